#include "fake_apiserver.h"

#include <chrono>
#include <stdexcept>

#include <httplib.h>

namespace testing {
namespace {

using nlohmann::json;

std::string key_of(const json& object) {
  const json& md = object.at("metadata");
  std::string ns = md.value("namespace", "");
  return ns.empty() ? md.value("name", "") : ns + "/" + md.value("name", "");
}

std::string kind_of(const std::string& resource) {
  if (resource == "pods") {
    return "Pod";
  }
  if (resource == "nodes") {
    return "Node";
  }
  return "Service";
}

json status_body(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"}, {"apiVersion", "v1"}, {"metadata", json::object()},
          {"status", "Failure"}, {"message", message}, {"reason", reason}, {"code", code}};
}

void answer_status(httplib::Response& res, int code, const std::string& reason,
                   const std::string& message) {
  res.status = code;
  res.set_content(status_body(code, reason, message).dump(), "application/json");
}

const json* labels_of(const json& object) {
  auto md = object.find("metadata");
  if (md == object.end() || !md->is_object()) {
    return nullptr;
  }
  auto labels = md->find("labels");
  return labels == md->end() ? nullptr : &*labels;
}

}  // namespace

bool selector_matches(const std::string& selector, const json* labels) {
  std::size_t start = 0;
  while (start <= selector.size()) {
    std::size_t comma = selector.find(',', start);
    std::string term = selector.substr(start, comma == std::string::npos ? std::string::npos
                                                                         : comma - start);
    start = comma == std::string::npos ? selector.size() + 1 : comma + 1;
    if (term.empty()) {
      continue;
    }
    std::size_t eq = term.find('=');
    std::string key = term.substr(0, eq);
    if (labels == nullptr || !labels->is_object() || !labels->contains(key)) {
      return false;
    }
    if (eq != std::string::npos && labels->at(key) != term.substr(eq + 1)) {
      return false;
    }
  }
  return true;
}

struct FakeApiServer::Watch {
  std::string resource;
  std::string selector;
  std::int64_t rv = 0;
  std::chrono::steady_clock::time_point deadline;
  std::uint64_t drop_generation = 0;
  std::uint64_t bookmark_generation = 0;
  bool checked_gone = false;
  bool counted = false;
  FakeApiServer* server = nullptr;
  ~Watch() {
    if (counted) {
      std::lock_guard lock(server->mu_);
      --server->open_watches_;
    }
  }
};

FakeApiServer::FakeApiServer(Options options) : options_(std::move(options)) {
  if (!options_.tls_cert_file.empty()) {
    server_ = std::make_unique<httplib::SSLServer>(options_.tls_cert_file.c_str(),
                                                   options_.tls_key_file.c_str());
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  if (!server_->is_valid()) {
    throw std::runtime_error("fake API server: cannot load the TLS certificate");
  }
  server_->new_task_queue = [] { return new httplib::ThreadPool(48); };
  server_->Get(R"(/api/v1/(pods|nodes|services))",
               [this](const httplib::Request& req, httplib::Response& res) {
                 std::string resource = req.matches[1];
                 std::string auth = req.get_header_value("Authorization");
                 std::string token = auth.rfind("Bearer ", 0) == 0 ? auth.substr(7) : "";
                 bool watch = req.get_param_value("watch") == "1" ||
                              req.get_param_value("watch") == "true";
                 {
                   std::lock_guard lock(mu_);
                   std::string q;
                   for (const auto& [k, v] : req.params) {
                     q += (q.empty() ? "?" : "&") + k + "=" + v;
                   }
                   queries_.push_back(req.path + q);
                   if (!token.empty()) {
                     tokens_seen_.insert(token);
                   }
                   if (!options_.tokens.empty() && !options_.tokens.contains(token)) {
                     answer_status(res, 401, "Unauthorized", "Unauthorized");
                     return;
                   }
                   auto& watch_f = failures_[resource + (watch ? "#watch" : "#list")];
                   auto& f = watch_f.empty() ? failures_[resource] : watch_f;
                   if (!f.empty()) {
                     int code = f.front();
                     f.pop_front();
                     answer_status(res, code, code == 410 ? "Expired" : "InternalError",
                                   "injected failure " + std::to_string(code));
                     return;
                   }
                   ++(watch ? watches_ : lists_)[resource];
                 }
                 if (watch) {
                   serve_watch(resource, req, res);
                 } else {
                   serve_list(resource, req, res);
                 }
               });
  port_ = server_->bind_to_any_port("127.0.0.1");
  if (port_ <= 0) {
    throw std::runtime_error("fake API server: cannot bind 127.0.0.1");
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  while (!server_->is_running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

FakeApiServer::~FakeApiServer() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  server_->stop();
  thread_.join();
}

void FakeApiServer::record(const std::string& resource, const std::string& type,
                           const json& object) {
  if (options_.record_events) {
    events_.push_back({rv_, resource, type, object});
  }
  cv_.notify_all();
}

json FakeApiServer::create(const std::string& resource, json object) {
  std::lock_guard lock(mu_);
  json& md = object["metadata"];
  if (resource != "nodes" && (!md.contains("namespace") || md["namespace"].get<std::string>().empty())) {
    md["namespace"] = "default";
  }
  if (!md.contains("name") || md["name"].get<std::string>().empty()) {
    std::string base = md.value("generateName", resource + "-");
    md["name"] = base + std::to_string(10000 + next_uid_);
  }
  md["uid"] = "uid-" + std::to_string(next_uid_++);
  md["resourceVersion"] = std::to_string(++rv_);
  object["kind"] = kind_of(resource);
  object["apiVersion"] = "v1";
  objects_[resource][key_of(object)] = object;
  record(resource, "ADDED", object);
  return object;
}

bool FakeApiServer::update(const std::string& resource, json object) {
  std::lock_guard lock(mu_);
  auto& objects = objects_[resource];
  auto it = objects.find(key_of(object));
  if (it == objects.end()) {
    return false;
  }
  object["metadata"]["uid"] = it->second["metadata"]["uid"];
  object["metadata"]["resourceVersion"] = std::to_string(++rv_);
  it->second = object;
  record(resource, "MODIFIED", object);
  return true;
}

bool FakeApiServer::remove(const std::string& resource, const std::string& ns,
                           const std::string& name) {
  std::lock_guard lock(mu_);
  auto& objects = objects_[resource];
  auto it = objects.find(ns.empty() ? name : ns + "/" + name);
  if (it == objects.end()) {
    return false;
  }
  json object = std::move(it->second);
  objects.erase(it);
  object["metadata"]["resourceVersion"] = std::to_string(++rv_);
  record(resource, "DELETED", object);
  return true;
}

std::vector<json> FakeApiServer::objects(const std::string& resource) const {
  std::lock_guard lock(mu_);
  std::vector<json> out;
  if (auto it = objects_.find(resource); it != objects_.end()) {
    for (const auto& [k, v] : it->second) {
      out.push_back(v);
    }
  }
  return out;
}

std::int64_t FakeApiServer::resource_version() const {
  std::lock_guard lock(mu_);
  return rv_;
}

void FakeApiServer::drop_watches() {
  std::lock_guard lock(mu_);
  ++drop_generation_;
  cv_.notify_all();
}

void FakeApiServer::compact() {
  std::lock_guard lock(mu_);
  compacted_ = rv_;
  events_.clear();
  cv_.notify_all();
}

void FakeApiServer::send_bookmarks() {
  std::lock_guard lock(mu_);
  ++bookmark_generation_;
  cv_.notify_all();
}

void FakeApiServer::fail_next(const std::string& resource, int status, int count) {
  std::lock_guard lock(mu_);
  for (int i = 0; i < count; ++i) {
    failures_[resource].push_back(status);
  }
}

void FakeApiServer::fail_next_watch(const std::string& resource, int status, int count) {
  fail_next(resource + "#watch", status, count);
}

void FakeApiServer::set_tokens(std::set<std::string> tokens) {
  std::lock_guard lock(mu_);
  options_.tokens = std::move(tokens);
}

void FakeApiServer::set_ignore_limit(bool ignore) {
  std::lock_guard lock(mu_);
  options_.ignore_limit = ignore;
}

int FakeApiServer::lists(const std::string& resource) const {
  std::lock_guard lock(mu_);
  auto it = lists_.find(resource);
  return it == lists_.end() ? 0 : it->second;
}

int FakeApiServer::watches(const std::string& resource) const {
  std::lock_guard lock(mu_);
  auto it = watches_.find(resource);
  return it == watches_.end() ? 0 : it->second;
}

int FakeApiServer::open_watches() const {
  std::lock_guard lock(mu_);
  return open_watches_;
}

std::vector<std::string> FakeApiServer::queries() const {
  std::lock_guard lock(mu_);
  return queries_;
}

std::set<std::string> FakeApiServer::tokens_seen() const {
  std::lock_guard lock(mu_);
  return tokens_seen_;
}

void FakeApiServer::serve_list(const std::string& resource, const httplib::Request& req,
                               httplib::Response& res) {
  std::string selector = req.get_param_value("labelSelector");
  std::string cont = req.get_param_value("continue");
  std::size_t limit = 0;
  if (req.has_param("limit")) {
    limit = static_cast<std::size_t>(std::stoul(req.get_param_value("limit")));
  }
  auto page = std::make_shared<std::vector<std::string>>();  // serialized items
  std::string rv;
  std::string next;
  {
    std::lock_guard lock(mu_);
    std::string after;
    std::int64_t list_rv = rv_;
    if (!cont.empty()) {
      std::size_t bar = cont.find('|');
      list_rv = std::stoll(cont.substr(0, bar));
      after = cont.substr(bar + 1);
      if (list_rv < compacted_) {
        answer_status(res, 410, "Expired",
                      "The provided continue parameter is too old to display a consistent list "
                      "result. You can start a new list without the continue parameter.");
        return;
      }
    }
    rv = std::to_string(list_rv);
    std::string last;
    if (options_.ignore_limit) {
      limit = 0;
    }
    const auto& objects = objects_[resource];
    for (auto it = after.empty() ? objects.begin() : objects.upper_bound(after);
         it != objects.end(); ++it) {
      if (!selector_matches(selector, labels_of(it->second))) {
        continue;
      }
      if (limit != 0 && page->size() == limit) {
        next = rv + "|" + last;
        break;
      }
      page->push_back(it->second.dump());
      last = it->first;
    }
  }
  json metadata = {{"resourceVersion", rv}};
  if (!next.empty()) {
    metadata["continue"] = next;
  }
  auto head = std::make_shared<std::string>(
      R"({"kind":")" + kind_of(resource) + R"(List","apiVersion":"v1","metadata":)" +
      metadata.dump() + R"(,"items":[)");
  res.set_chunked_content_provider(
      "application/json", [head, page, i = std::size_t{0}](std::size_t, httplib::DataSink& sink) mutable {
        if (i == 0 && !head->empty()) {
          sink.write(head->data(), head->size());
          head->clear();
        }
        // A few items per chunk, as a server flushing its buffer would.
        std::string out;
        for (int n = 0; n < 16 && i < page->size(); ++n, ++i) {
          if (i > 0) {
            out += ",";
          }
          out += (*page)[i];
          std::string().swap((*page)[i]);
        }
        if (i == page->size()) {
          out += "]}";
          sink.write(out.data(), out.size());
          sink.done();
          return true;
        }
        sink.write(out.data(), out.size());
        return true;
      });
}

void FakeApiServer::serve_watch(const std::string& resource, const httplib::Request& req,
                                httplib::Response& res) {
  auto w = std::make_shared<Watch>();
  w->resource = resource;
  w->selector = req.get_param_value("labelSelector");
  w->rv = req.has_param("resourceVersion") ? std::stoll(req.get_param_value("resourceVersion")) : 0;
  int timeout = req.has_param("timeoutSeconds") ? std::stoi(req.get_param_value("timeoutSeconds"))
                                                : 1800;
  w->deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
  w->server = this;
  {
    std::lock_guard lock(mu_);
    if (options_.gone_as_status && w->rv < compacted_) {
      answer_status(res, 410, "Expired", "too old resource version: " + std::to_string(w->rv) +
                                             " (" + std::to_string(compacted_) + ")");
      return;
    }
    w->drop_generation = drop_generation_;
    w->bookmark_generation = bookmark_generation_;
    ++open_watches_;
    w->counted = true;
  }
  res.set_chunked_content_provider("application/json", [this, w](std::size_t,
                                                                 httplib::DataSink& sink) {
    std::string out;
    bool end = false;
    {
      std::unique_lock lock(mu_);
      for (int round = 0; round < 2 && out.empty() && !end; ++round) {
        if (stopping_ || w->drop_generation != drop_generation_) {
          return false;  // cut without the terminating chunk
        }
        if (!w->checked_gone) {
          w->checked_gone = true;
          if (w->rv < compacted_) {
            out = json{{"type", "ERROR"},
                       {"object", status_body(410, "Expired",
                                              "too old resource version: " + std::to_string(w->rv) +
                                                  " (" + std::to_string(compacted_) + ")")}}
                      .dump() +
                  "\n";
            end = true;
            break;
          }
        }
        for (const Event& e : events_) {
          if (e.rv <= w->rv || e.resource != w->resource) {
            continue;
          }
          const json* labels = labels_of(e.object);
          w->rv = e.rv;
          if (selector_matches(w->selector, labels)) {
            out += json{{"type", e.type}, {"object", e.object}}.dump() + "\n";
          }
        }
        if (w->bookmark_generation != bookmark_generation_) {
          w->bookmark_generation = bookmark_generation_;
          w->rv = std::max(w->rv, rv_);
          out += json{{"type", "BOOKMARK"},
                      {"object", {{"kind", kind_of(w->resource)},
                                  {"apiVersion", "v1"},
                                  {"metadata", {{"resourceVersion", std::to_string(w->rv)}}}}}}
                     .dump() +
                 "\n";
        }
        if (std::chrono::steady_clock::now() >= w->deadline) {
          end = true;
        }
        if (out.empty() && !end && round == 0) {
          cv_.wait_for(lock, std::chrono::milliseconds(50));
        }
      }
    }
    if (!out.empty() && !sink.write(out.data(), out.size())) {
      return false;
    }
    if (end) {
      sink.done();
    }
    return true;
  });
}

}  // namespace testing
