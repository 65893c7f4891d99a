#include "kube/api_client.h"

#include <arpa/inet.h>
#include <httplib.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "kube/openssl_handles.h"

namespace kube {
namespace {

constexpr std::size_t kMaxErrorBody = 64 << 10;
constexpr std::size_t kMaxReplyBody = 4 << 20;  // a Lease or a list of them: far less
constexpr std::size_t kMaxIdle = 4;             // kept-alive connections for send()

BioPtr memory_bio(const std::string& pem) {
  return BioPtr(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// The thread's queued OpenSSL errors, oldest (the cause) first; clears the queue.
std::string openssl_error() {
  std::string out;
  int n = 0;
  while (unsigned long e = ERR_get_error()) {
    if (n++ < 3) {
      char buf[256];
      ERR_error_string_n(e, buf, sizeof buf);
      out += (out.empty() ? "" : "; ") + std::string(buf);
    }
  }
  return out;
}

bool is_ip(const std::string& host) {
  in6_addr a6{};
  in_addr a4{};
  return inet_pton(AF_INET6, host.c_str(), &a6) == 1 || inet_pton(AF_INET, host.c_str(), &a4) == 1;
}

std::string describe(httplib::Error e) {
  switch (e) {
    case httplib::Error::Connection:
      return "cannot connect";
    case httplib::Error::SSLConnection:
      return "TLS handshake failed (is the server's certificate signed by the configured CA and "
             "issued for this host?)";
    case httplib::Error::SSLServerVerification:
      return "the server's certificate did not verify";
    case httplib::Error::Read:
      return "the connection closed or timed out while reading";
    case httplib::Error::Write:
      return "the connection closed while writing";
    case httplib::Error::Canceled:
      return "cancelled";
    case httplib::Error::ConnectionTimeout:
      return "connection timed out";
    default:
      return httplib::to_string(e);
  }
}

// A reply's body as it arrives, up to kMaxReplyBody bytes.
struct BoundedBody {
  std::string body;
  std::size_t received = 0;
  bool too_large = false;

  // False (and too_large) once the bytes received pass the bound.
  bool append(const char* data, std::size_t n) {
    received += n;
    if (received > kMaxReplyBody) {
      too_large = true;
      return false;
    }
    body.append(data, n);
    return true;
  }
};

// Timeouts of one request (connecting and writing within 10 s at most), keep-alive, and no Nagle
// delay: headers and body go out at once.
void configure(httplib::ClientImpl& client, Duration timeout) {
  // Never negative: httplib would wait without end. In whole milliseconds, rounded up: httplib
  // waits in milliseconds rounding down, so a wait would end before the deadline.
  auto micros = std::chrono::microseconds(std::max(
      std::chrono::ceil<std::chrono::milliseconds>(timeout), std::chrono::milliseconds(1)));
  client.set_connection_timeout(
      std::min<std::chrono::microseconds>(micros, std::chrono::seconds(10)));
  client.set_write_timeout(std::min<std::chrono::microseconds>(micros, std::chrono::seconds(10)));
  client.set_read_timeout(micros);
  client.set_keep_alive(true);
  client.set_tcp_nodelay(true);
}

// Whether a request that failed on a kept-alive connection may go once more on a new one: when
// sending it again cannot repeat it (a read, or a write not sent whole) and time is left.
bool send_again(std::string_view method, httplib::Error error,
                std::chrono::steady_clock::time_point deadline) {
  bool repeats_nothing = error == httplib::Error::Write || method == "GET";
  return repeats_nothing && error != httplib::Error::Canceled &&
         std::chrono::steady_clock::now() < deadline;
}

// `method` to `path` with `body`: a body (and its Content-Type, JSON unless said) unless an empty
// GET.
httplib::Request make_request(std::string_view method, std::string path,
                              const httplib::Headers& headers, const std::string& body,
                              std::string_view content_type) {
  httplib::Request req;
  req.method = std::string(method);
  req.path = std::move(path);
  req.headers = headers;
  if (!body.empty() || method != "GET") {
    req.body = body;
    req.set_header("Content-Type", content_type.empty() ? std::string("application/json")
                                                        : std::string(content_type));
  }
  return req;
}

}  // namespace

// The parsed CA bundle and client identity. Each connection parses its own copy: OpenSSL caches
// data inside certificate objects while verifying, so they are not shared between threads.
struct ApiClient::Tls {
  std::vector<X509Ptr> cas;
  X509Ptr cert;
  KeyPtr key;

  // The client identity is `cert_pem` and `key_pem` (the config's, or an exec plugin's).
  static webhook::Result<std::unique_ptr<Tls>> parse(const ClusterConfig& config,
                                                     const std::string& cert_pem,
                                                     const std::string& key_pem);
};

webhook::Result<std::unique_ptr<ApiClient::Tls>> ApiClient::Tls::parse(const ClusterConfig& config,
                                                                       const std::string& cert_pem,
                                                                       const std::string& key_pem) {
  auto tls = std::make_unique<Tls>();
  if (config.https && !config.insecure_skip_verify) {
    BioPtr bio = memory_bio(config.ca_pem);
    while (X509* x = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
      tls->cas.emplace_back(x);
    }
    ERR_clear_error();
    if (tls->cas.empty()) {
      return webhook::invalid_argument(config.origin +
                                       ": the CA for the API server holds no PEM certificate");
    }
  }
  if (!cert_pem.empty()) {
    BioPtr cert = memory_bio(cert_pem);
    tls->cert.reset(PEM_read_bio_X509(cert.get(), nullptr, nullptr, nullptr));
    BioPtr key = memory_bio(key_pem);
    tls->key.reset(PEM_read_bio_PrivateKey(key.get(), nullptr, nullptr, nullptr));
    if (!tls->cert || !tls->key) {
      std::string why = openssl_error();
      return webhook::invalid_argument(
          config.origin + ": the client " + (tls->cert ? "key" : "certificate") + " is not a PEM " +
          (tls->cert ? "private key" : "certificate") + (why.empty() ? "" : " (" + why + ")"));
    }
    if (X509_check_private_key(tls->cert.get(), tls->key.get()) != 1) {
      ERR_clear_error();
      return webhook::invalid_argument(config.origin +
                                       ": the client key does not match the client certificate");
    }
  }
  return tls;
}

void Call::cancel() {
  std::lock_guard lock(mu_);
  cancelled_ = true;
  if (active_ != nullptr) {
    active_->stop();
  }
}

bool Call::cancelled() const {
  std::lock_guard lock(mu_);
  return cancelled_;
}

bool Call::attach(httplib::ClientImpl* client) {
  std::lock_guard lock(mu_);
  if (cancelled_) {
    return false;
  }
  active_ = client;
  return true;
}

void Call::detach() {
  std::lock_guard lock(mu_);
  active_ = nullptr;
}

std::string url_encode(std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (char ch : value) {
    auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) != 0 || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 15]);
    }
  }
  return out;
}

webhook::Result<std::unique_ptr<ApiClient>> ApiClient::create(const ClusterConfig& config) {
  // refuse bad input at start
  webhook::Result<std::unique_ptr<Tls>> tls =
      Tls::parse(config, config.client_cert_pem, config.client_key_pem);
  if (!tls) {
    return tls.error();
  }
  return std::unique_ptr<ApiClient>(new ApiClient(config));
}

ApiClient::ApiClient(ClusterConfig config)
    : config_(std::move(config)), token_(config_.token, config_.token_file) {
  if (config_.exec) {
    exec_ = std::make_unique<ExecCredentialSource>(*config_.exec);
  }
}

ApiClient::~ApiClient() = default;

std::string ApiClient::server() const {
  bool v6 = config_.host.find(':') != std::string::npos;
  return std::string(config_.https ? "https://" : "http://") + (v6 ? "[" : "") + config_.host +
         (v6 ? "]" : "") + ":" + std::to_string(config_.port);
}

std::unique_ptr<httplib::ClientImpl> ApiClient::connect(const std::string& cert_pem,
                                                        const std::string& key_pem) const {
  if (!config_.https) {
    return std::make_unique<httplib::ClientImpl>(config_.host, config_.port);
  }
  webhook::Result<std::unique_ptr<Tls>> tls = Tls::parse(config_, cert_pem, key_pem);
  if (!tls) {
    return nullptr;
  }
  auto client = std::make_unique<httplib::SSLClient>(config_.host, config_.port, (*tls)->cert.get(),
                                                     (*tls)->key.get());
  SSL_CTX* ctx = client->ssl_context();
  if (ctx == nullptr) {
    return nullptr;
  }
  client->enable_server_certificate_verification(false);
  if (config_.insecure_skip_verify) {  // kubeconfig insecure-skip-tls-verify, where allowed
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
    return client;
  }
  // Trust the configured CAs only, and check the server's name or IP (OpenSSL does both during
  // the handshake); httplib's own check would add the system's CAs.
  X509_STORE* store = X509_STORE_new();
  for (const X509Ptr& ca : (*tls)->cas) {
    X509_STORE_add_cert(store, ca.get());
  }
  SSL_CTX_set_cert_store(ctx, store);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  X509_VERIFY_PARAM* param = SSL_CTX_get0_param(ctx);
  if (is_ip(config_.host)) {
    X509_VERIFY_PARAM_set1_ip_asc(param, config_.host.c_str());
  } else {
    X509_VERIFY_PARAM_set1_host(param, config_.host.c_str(), config_.host.size());
  }
  return client;
}

struct ApiClient::Prepared {
  std::unique_ptr<httplib::ClientImpl> client;
  httplib::Headers headers;
  std::string cert_pem;  // the client identity of a new connection
  std::string key_pem;
};

webhook::Result<ApiClient::Prepared> ApiClient::prepare(Duration timeout, bool connect_now) {
  bool force = false;
  {
    std::lock_guard lock(mu_);
    std::swap(force, force_token_);
  }
  Prepared p;
  p.headers = {{"Accept", "application/json"}, {"User-Agent", "kuberay-tpu-webhook"}};
  std::string bearer;
  if (exec_) {
    ASSIGN_OR_RETURN(ExecCredential cred, exec_->get(force));
    if (!cred.client_cert_pem.empty()) {
      RETURN_IF_ERROR(Tls::parse(config_, cred.client_cert_pem, cred.client_key_pem));
    }
    bearer = std::move(cred.token);
    p.cert_pem = std::move(cred.client_cert_pem);
    p.key_pem = std::move(cred.client_key_pem);
  } else {
    ASSIGN_OR_RETURN(bearer, token_.get(force));
    p.cert_pem = config_.client_cert_pem;
    p.key_pem = config_.client_key_pem;
  }
  if (!bearer.empty()) {
    p.headers.emplace("Authorization", "Bearer " + bearer);
  }
  if (!connect_now) {
    return p;
  }
  p.client = connect(p.cert_pem, p.key_pem);
  if (!p.client) {
    return webhook::Error{webhook::ErrorCode::kInternal,
                          "cannot set up TLS for " + server() + ": " + openssl_error()};
  }
  configure(*p.client, timeout);
  p.client->set_keep_alive(false);
  return p;
}

webhook::Error ApiClient::transport_error(std::string_view method, const std::string& path_query,
                                          int error, bool cancelled) const {
  auto e = static_cast<httplib::Error>(error);
  std::string detail = e == httplib::Error::SSLConnection ? openssl_error() : "";
  ERR_clear_error();
  return call_error(
      method, path_query,
      (cancelled ? "cancelled" : describe(e)) + (detail.empty() ? "" : " [" + detail + "]"));
}

webhook::Error ApiClient::call_error(std::string_view method, const std::string& path_query,
                                     const std::string& what) const {
  return webhook::Error{webhook::ErrorCode::kUnavailable,
                        std::string(method) + " " + server() + config_.base_path +
                            path_query.substr(0, path_query.find('?')) + ": " + what};
}

void ApiClient::saw_status(int status) {
  if (status == 401) {
    std::lock_guard lock(mu_);
    force_token_ = true;
    if (exec_) {
      idle_.clear();  // connections made with a client certificate the server refused
    }
  }
}

webhook::Result<int> ApiClient::get(const std::string& path_query, const BodyFn& on_body,
                                    Duration read_timeout, Call& call, std::string* error_body,
                                    const std::function<void(int)>& on_status) {
  webhook::Result<Prepared> p = prepare(read_timeout);
  if (!p) {
    return p.error();
  }
  if (!call.attach(p->client.get())) {
    return webhook::Error{webhook::ErrorCode::kUnavailable, "cancelled"};
  }
  int status = 0;
  httplib::Result res = p->client->Get(
      config_.base_path + path_query, p->headers,
      [&](const httplib::Response& r) {
        status = r.status;
        if (on_status) {
          on_status(status);
        }
        return true;
      },
      [&](const char* data, std::size_t n) {
        if (status == 200) {
          return on_body(std::string_view(data, n));
        }
        if (error_body != nullptr && error_body->size() < kMaxErrorBody) {
          error_body->append(data, std::min(n, kMaxErrorBody - error_body->size()));
        }
        return true;
      });
  call.detach();
  if (!res) {
    return transport_error("GET", path_query, static_cast<int>(res.error()), call.cancelled());
  }
  saw_status(res->status);
  return res->status;
}

std::unique_ptr<httplib::ClientImpl> ApiClient::take_idle() {
  std::lock_guard lock(mu_);
  if (idle_.empty()) {
    return nullptr;
  }
  std::unique_ptr<httplib::ClientImpl> c = std::move(idle_.back());
  idle_.pop_back();
  return c;
}

void ApiClient::put_idle(std::unique_ptr<httplib::ClientImpl> client) {
  std::lock_guard lock(mu_);
  if (idle_.size() < kMaxIdle) {
    idle_.push_back(std::move(client));
  }
}

webhook::Result<ApiClient::Reply> ApiClient::send(std::string_view method,
                                                  const std::string& path_query,
                                                  const std::string& body,
                                                  std::string_view content_type, Duration timeout,
                                                  Call* call) {
  // `timeout` bounds the whole call, a second attempt included.
  if (timeout <= Duration::zero()) {
    return call_error(method, path_query, "not sent, no time was left of its timeout");
  }
  const SteadyTime deadline = std::chrono::steady_clock::now() + timeout;
  webhook::Result<Reply> reply = send_once(method, path_query, body, content_type, deadline, call);
  if (reply && reply->status == 401 && exec_ && std::chrono::steady_clock::now() < deadline) {
    // The plugin's credential was refused (revoked, or expired early): run it again, once.
    reply = send_once(method, path_query, body, content_type, deadline, call);
  }
  return reply;
}

webhook::Result<ApiClient::Reply> ApiClient::send_once(std::string_view method,
                                                       const std::string& path_query,
                                                       const std::string& body,
                                                       std::string_view content_type,
                                                       SteadyTime deadline, Call* call) {
  webhook::Result<Prepared> p =
      prepare(deadline - std::chrono::steady_clock::now(), /*connect_now=*/false);
  if (!p) {
    return p.error();
  }
  // A kept-alive connection saves a TCP (and TLS) handshake per claim. One that the server
  // closed meanwhile fails; the request then goes once more over a new connection, within what
  // is left of the deadline, when that cannot repeat it: when it was not written whole (the
  // server acts on none of it) or is a read. A write that went out is never sent again (the
  // server may have acted on it before the connection was lost, or a timeout ended it).
  std::unique_ptr<httplib::ClientImpl> reused = take_idle();
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::unique_ptr<httplib::ClientImpl> client = std::move(reused);
    bool fresh = client == nullptr;
    if (fresh) {
      client = connect(p->cert_pem, p->key_pem);
      if (!client) {
        return webhook::Error{webhook::ErrorCode::kInternal,
                              "cannot set up TLS for " + server() + ": " + openssl_error()};
      }
    }
    configure(*client, deadline - std::chrono::steady_clock::now());
    if (call != nullptr && !call->attach(client.get())) {
      return webhook::Error{webhook::ErrorCode::kUnavailable, "cancelled"};
    }
    BoundedBody received;
    httplib::Request req =
        make_request(method, config_.base_path + path_query, p->headers, body, content_type);
    req.content_receiver = [&](const char* data, std::size_t n, std::uint64_t, std::uint64_t) {
      return received.append(data, n);
    };
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    bool ok = client->send(req, res, error);
    if (call != nullptr) {
      call->detach();
    }
    if (received.too_large) {
      return webhook::Error{webhook::ErrorCode::kUnavailable,
                            std::string(method) + " " + server() + req.path +
                                ": the answer is larger than " +
                                std::to_string(kMaxReplyBody >> 20) + " MiB"};
    }
    if (!ok) {
      bool cancelled = call != nullptr && call->cancelled();
      if (!fresh && !cancelled && send_again(method, error, deadline)) {
        continue;  // a stale kept-alive connection: once more on a new one
      }
      return transport_error(method, path_query, static_cast<int>(error), cancelled);
    }
    saw_status(res.status);
    if (res.get_header_value("Connection") != "close") {
      put_idle(std::move(client));
    }
    return Reply{res.status,
                 received.body.empty() ? std::move(res.body) : std::move(received.body)};
  }
  return webhook::Error{webhook::ErrorCode::kUnavailable,
                        std::string(method) + " " + server() + path_query + ": no connection"};
}

}  // namespace kube
