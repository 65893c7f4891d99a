// fake-kube-apiserver: testing::FakeApiServer (test/unit/kube/fake_apiserver.h) as a process of
// its own, for tests that run several webhook processes against one API. It listens on
// 127.0.0.1 only and serves, on the same port, control endpoints under /fake/ (no token needed;
// JSON in and out) that reach the C++ API: seeding objects, injecting faults, reading counters.
//
//   fake-kube-apiserver --port-file FILE [--port N] [--token T]... [--max-seconds N]
//                       [--tls-cert FILE --tls-key FILE]
//
//   {resource}: pods, nodes, services, leases, rayclusters, endpointslices, secrets,
//               mutatingwebhookconfigurations, validatingwebhookconfigurations
//   POST   /fake/objects/{resource}              body: an object     -> create(); 201, the object
//   PUT    /fake/objects/{resource}              body: an object     -> update(); 200 or 404
//   DELETE /fake/objects/{resource}/{ns}/{name}  (or /{name} for nodes) -> remove(); 200 or 404
//   GET    /fake/objects/{resource}                                  -> {"items":[...]}
//   POST   /fake/fail-writes   {"resource":"leases","status":409,"count":3}
//   POST   /fake/fail-next     {"resource":"pods","status":500,"count":1,"watch":false}
//   POST   /fake/write-delay   {"ms":2000}
//   POST   /fake/partition     {"token":"t2"}
//   POST   /fake/tokens        {"tokens":["t3"]}      the bearer tokens accepted from now on
//   POST   /fake/forbid        {"resource":"nodes"}   every read of it: RBAC's 403
//   POST   /fake/forbid-writes {"resource":"secrets"} every write of it: RBAC's 403
//   POST   /fake/heal, /fake/drop-watches, /fake/compact, /fake/bookmarks
//   GET    /fake/stats         ->
//   {"writes":{"leases":n,...},"write_attempts":{...},"creates":{...},
//                                  "updates":{...},"deletes":{...},"conflicts":{...},
//                                  "already_exists":{...},"totals":{...},"lists":{...},
//                                  "watches":{...},"open_watches":n,"resource_version":n,
//                                  "tokens_seen":[...]}
//
// SIGTERM or SIGINT ends it at once with status 0, as does --max-seconds (default 600) elapsing,
// so a test that forgets it does not leave it behind. Exit status 2: bad flags; 1: cannot serve.

#include <httplib.h>
#include <pthread.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>

#include "fake_apiserver.h"

namespace {

using nlohmann::json;
using testing::FakeApiServer;

const std::set<std::string> kResources = {"pods",
                                          "nodes",
                                          "services",
                                          "leases",
                                          "rayclusters",
                                          "endpointslices",
                                          "secrets",
                                          "mutatingwebhookconfigurations",
                                          "validatingwebhookconfigurations"};

struct Args {
  std::string port_file;
  int port = 0;
  std::set<std::string> tokens;
  long max_seconds = 600;
  std::string tls_cert;
  std::string tls_key;
};

[[noreturn]] void usage(const std::string& error) {
  std::cerr << "fake-kube-apiserver: " << error << "\n"
            << "usage: fake-kube-apiserver --port-file FILE [--port N] [--token T]... "
               "[--max-seconds N] [--tls-cert FILE --tls-key FILE]\n";
  std::exit(2);
}

long number(const std::string& flag, const std::string& value, long min, long max) {
  try {
    std::size_t used = 0;
    long n = std::stol(value, &used);
    if (used == value.size() && n >= min && n <= max) {
      return n;
    }
  } catch (const std::exception&) {
  }
  usage(flag + " wants a number from " + std::to_string(min) + " to " + std::to_string(max) +
        ", not \"" + value + "\"");
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    std::string value;
    if (std::size_t eq = flag.find('='); flag.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = flag.substr(eq + 1);
      flag.resize(eq);
    } else if (flag == "--help" || flag == "-h") {
      usage("a kube-apiserver stand-in for tests");
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      usage(flag + " wants a value");
    }
    if (flag == "--port-file") {
      a.port_file = value;
    } else if (flag == "--port") {
      a.port = static_cast<int>(number(flag, value, 0, 65535));
    } else if (flag == "--token") {
      if (value.empty()) {
        usage("--token wants a non-empty token");
      }
      a.tokens.insert(value);
    } else if (flag == "--max-seconds") {
      a.max_seconds = number(flag, value, 1, 86400);
    } else if (flag == "--tls-cert") {
      a.tls_cert = value;
    } else if (flag == "--tls-key") {
      a.tls_key = value;
    } else {
      usage("unknown flag " + flag);
    }
  }
  if (a.tls_cert.empty() != a.tls_key.empty()) {
    usage("--tls-cert and --tls-key go together");
  }
  return a;
}

void answer(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void error(httplib::Response& res, int status, const std::string& message) {
  answer(res, status, {{"error", message}});
}

// The handler with its JSON body parsed (an object; {} when empty); 400 for anything else.
httplib::Server::Handler with_body(
    std::function<void(const json&, const httplib::Request&, httplib::Response&)> handle) {
  return [handle = std::move(handle)](const httplib::Request& req, httplib::Response& res) {
    json body = req.body.empty() ? json::object() : json::parse(req.body, nullptr, false);
    if (body.is_discarded() || !body.is_object()) {
      error(res, 400, "the body must be a JSON object");
      return;
    }
    try {
      handle(body, req, res);
    } catch (const std::exception& e) {
      error(res, 400, e.what());
    }
  };
}

// A control request's resource, or "" after answering 400.
std::string resource_of(const std::string& resource, httplib::Response& res) {
  if (!kResources.contains(resource)) {
    error(res, 400, "unknown resource \"" + resource + "\" (pods, nodes, services, leases, ...)");
    return "";
  }
  return resource;
}

json stats(const FakeApiServer& api) {
  using Stats = FakeApiServer::WriteStats;
  const std::pair<const char*, int Stats::*> fields[] = {
      {"writes", &Stats::writes},
      {"write_attempts", &Stats::attempts},
      {"creates", &Stats::creates},
      {"updates", &Stats::updates},
      {"deletes", &Stats::deletes},
      {"conflicts", &Stats::conflicts},
      {"already_exists", &Stats::already_exists}};
  json out = json::object();
  json totals = json::object();
  std::map<std::string, Stats> written = api.write_stats();
  for (const std::string& resource : kResources) {
    written.try_emplace(resource);
  }
  for (const auto& [field, member] : fields) {
    int total = 0;
    for (const auto& [resource, s] : written) {
      out[field][resource] = s.*member;
      total += s.*member;
    }
    totals[field] = total;
  }
  out["totals"] = totals;
  for (const std::string& resource : kResources) {
    out["lists"][resource] = api.lists(resource);
    out["watches"][resource] = api.watches(resource);
  }
  out["open_watches"] = api.open_watches();
  out["resource_version"] = api.resource_version();
  out["tokens_seen"] = api.tokens_seen();
  return out;
}

void add_routes(httplib::Server& svr, FakeApiServer& server) {
  FakeApiServer* const api = &server;
  const std::string resources = "([^/]+)";
  svr.Post("/fake/objects/" + resources,
           with_body([api](const json& body, const httplib::Request& req, httplib::Response& res) {
             std::string resource = resource_of(req.matches[1], res);
             if (!resource.empty()) {
               answer(res, 201, api->create(resource, body));
             }
           }));
  svr.Put("/fake/objects/" + resources,
          with_body([api](const json& body, const httplib::Request& req, httplib::Response& res) {
            std::string resource = resource_of(req.matches[1], res);
            if (resource.empty()) {
              return;
            }
            if (!body.contains("metadata") || !body["metadata"].is_object()) {
              error(res, 400, "the object has no metadata");
              return;
            }
            std::string ns = body["metadata"].value("namespace", "");
            std::string name = body["metadata"].value("name", "");
            if (!api->update(resource, body)) {
              error(res, 404,
                    resource + " " + (ns.empty() ? name : ns + "/" + name) + " does not exist");
              return;
            }
            answer(res, 200, api->get(resource, ns, name).value_or(json::object()));
          }));
  auto remove = [api](const httplib::Request& req, httplib::Response& res) {
    std::string resource = resource_of(req.matches[1], res);
    if (resource.empty()) {
      return;
    }
    std::string ns = req.matches.size() > 3 ? std::string(req.matches[2]) : "";
    std::string name = req.matches[req.matches.size() - 1];
    if (!api->remove(resource, ns, name)) {
      error(res, 404, resource + " " + (ns.empty() ? name : ns + "/" + name) + " does not exist");
      return;
    }
    answer(res, 200, json::object());
  };
  svr.Delete("/fake/objects/" + resources + "/([^/]+)/([^/]+)", remove);
  svr.Delete("/fake/objects/" + resources + "/([^/]+)", remove);
  svr.Get("/fake/objects/" + resources, [api](const httplib::Request& req, httplib::Response& res) {
    std::string resource = resource_of(req.matches[1], res);
    if (!resource.empty()) {
      answer(res, 200, {{"items", api->objects(resource)}});
    }
  });
  svr.Post("/fake/fail-writes",
           with_body([api](const json& body, const httplib::Request&, httplib::Response& res) {
             std::string resource = resource_of(body.at("resource").get<std::string>(), res);
             if (!resource.empty()) {
               api->fail_next_writes(resource, body.at("status").get<int>(),
                                     body.value("count", 1));
               answer(res, 200, json::object());
             }
           }));
  svr.Post("/fake/fail-next",
           with_body([api](const json& body, const httplib::Request&, httplib::Response& res) {
             std::string resource = resource_of(body.at("resource").get<std::string>(), res);
             if (resource.empty()) {
               return;
             }
             if (body.value("watch", false)) {
               api->fail_next_watch(resource, body.at("status").get<int>(), body.value("count", 1));
             } else {
               api->fail_next(resource, body.at("status").get<int>(), body.value("count", 1));
             }
             answer(res, 200, json::object());
           }));
  svr.Post("/fake/write-delay",
           with_body([api](const json& body, const httplib::Request&, httplib::Response& res) {
             api->set_write_delay(std::chrono::milliseconds(body.at("ms").get<std::int64_t>()));
             answer(res, 200, json::object());
           }));
  svr.Post("/fake/forbid",
           with_body([api](const json& body, const httplib::Request&, httplib::Response& res) {
             api->forbid(body.at("resource").get<std::string>());
             answer(res, 200, json::object());
           }));
  svr.Post("/fake/forbid-writes",
           with_body([api](const json& body, const httplib::Request&, httplib::Response& res) {
             api->forbid_writes(body.at("resource").get<std::string>());
             answer(res, 200, json::object());
           }));
  svr.Post("/fake/partition",
           with_body([api](const json& body, const httplib::Request&, httplib::Response& res) {
             api->partition(body.at("token").get<std::string>());
             answer(res, 200, json::object());
           }));
  svr.Post("/fake/tokens",
           with_body([api](const json& body, const httplib::Request&, httplib::Response& res) {
             api->set_tokens(body.at("tokens").get<std::set<std::string>>());
             answer(res, 200, json::object());
           }));
  auto simple = [&svr](const std::string& path, std::function<void()> action) {
    svr.Post(path, with_body([action = std::move(action)](const json&, const httplib::Request&,
                                                          httplib::Response& res) {
               action();
               answer(res, 200, json::object());
             }));
  };
  simple("/fake/heal", [api] { api->heal(); });
  simple("/fake/drop-watches", [api] { api->drop_watches(); });
  simple("/fake/compact", [api] { api->compact(); });
  simple("/fake/bookmarks", [api] { api->send_bookmarks(); });
  svr.Get("/fake/stats", [api](const httplib::Request&, httplib::Response& res) {
    answer(res, 200, stats(*api));
  });
}

bool write_port_file(const std::string& path, int port) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << port << "\n";
    if (!out.flush()) {
      return false;
    }
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args = parse_args(argc, argv);

  // Signals are taken by sigtimedwait below; every thread started from here on blocks them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  std::signal(SIGPIPE, SIG_IGN);

  FakeApiServer::Options o;
  o.tokens = args.tokens;
  o.tls_cert_file = args.tls_cert;
  o.tls_key_file = args.tls_key;
  o.port = args.port;
  o.extra_routes = add_routes;
  std::unique_ptr<FakeApiServer> api;
  try {
    api = std::make_unique<FakeApiServer>(std::move(o));
  } catch (const std::exception& e) {
    std::cerr << "fake-kube-apiserver: " << e.what() << "\n";
    return 1;
  }
  if (!args.port_file.empty() && !write_port_file(args.port_file, api->port())) {
    std::cerr << "fake-kube-apiserver: cannot write " << args.port_file << "\n";
    return 1;
  }
  std::cerr << "fake-kube-apiserver: listening on " << (args.tls_cert.empty() ? "http" : "https")
            << "://127.0.0.1:" << api->port() << " for at most " << args.max_seconds << " s\n";

  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(args.max_seconds);
  while (true) {
    auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      std::cerr << "fake-kube-apiserver: --max-seconds " << args.max_seconds
                << " elapsed, exiting\n";
      break;
    }
    timespec wait{};
    wait.tv_sec = static_cast<std::time_t>(left.count() / 1000000000);
    wait.tv_nsec = static_cast<long>(left.count() % 1000000000);
    int sig = sigtimedwait(&stop, nullptr, &wait);
    if (sig > 0) {
      std::cerr << "fake-kube-apiserver: " << (sig == SIGTERM ? "SIGTERM" : "SIGINT")
                << ", exiting\n";
      break;
    }
    if (sig < 0 && errno != EAGAIN && errno != EINTR) {
      std::perror("fake-kube-apiserver: sigtimedwait");
      break;
    }
  }
  // At once: open watches and idle keep-alive connections are not drained.
  std::_Exit(0);
}
