// Legacy placement under load and at scale.
//
//   legacy-bench serve --pods 10000 --port-file /tmp/port      # a fake kube-apiserver
//   legacy-bench client --port 38127 --requests 2000 --replica 0   # one webhook replica
//
// `serve` fills a fake kube-apiserver (test/unit/kube/fake_apiserver.h) on 127.0.0.1 with KubeRay
// TPU worker Pods as they look in a cluster: placed by the webhook (replicaIndex, TPU_WORKER_ID),
// scheduled, with status. `client` runs what one webhook process runs for legacy placement — a
// kube::LiveCluster (Pod, Node and Service watches, SliceRegistry, ClaimStore writing slot claims
// to Leases of the fake API server) and the admission::Handler — and reports, in one run, the
// latency of label-less admissions (each placed through a claim written to the API server) and of
// labelled ones (stateless), the API requests per placed Pod, and the process's RSS once the Pod
// list has been absorbed. bench/legacy/run.sh runs several clients at once against one server:
// replicas sharing claims.
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "admission/handler.h"
#include "fake_apiserver.h"
#include "kube/live_cluster.h"

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kHosts = 16;  // v6e 8x8, 4 chips per host

struct Args {
  std::string mode;
  int pods = 10000;
  int port = 0;
  std::string port_file;
  int requests = 20000;  // per kind
  int threads = 2;
  int groups = 512;  // worker groups the label-less Pods belong to
  int replica = 0;   // names this client in its claims
  int stagger = 21;  // groups between where replicas start: 0 = all on the same groups at once
};

int flag_int(const std::string& v) { return std::stoi(v); }

Args parse(int argc, char** argv) {
  Args a;
  if (argc < 2) {
    throw std::runtime_error("usage: legacy-bench serve|client [flags]");
  }
  a.mode = argv[1];
  for (int i = 2; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    std::string v = argv[i + 1];
    if (k == "--pods") {
      a.pods = flag_int(v);
    } else if (k == "--port") {
      a.port = flag_int(v);
    } else if (k == "--port-file") {
      a.port_file = v;
    } else if (k == "--requests") {
      a.requests = flag_int(v);
    } else if (k == "--threads") {
      a.threads = flag_int(v);
    } else if (k == "--groups") {
      a.groups = flag_int(v);
    } else if (k == "--replica") {
      a.replica = flag_int(v);
    } else if (k == "--stagger") {
      a.stagger = flag_int(v);
    } else {
      throw std::runtime_error("unknown flag " + k);
    }
  }
  return a;
}

json read_json(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw std::runtime_error("cannot read " + path);
  }
  return json::parse(in);
}

json base_pod(const std::string& cluster, const std::string& group) {
  static const json pod =
      read_json(std::string(FIXTURE_DIR) + "/pods/v6e-16-multihost-worker-no-indexing.json");
  json p = pod;
  p["metadata"]["labels"]["ray.io/cluster"] = cluster;
  p["metadata"]["labels"]["ray.io/group"] = group;
  p["metadata"]["generateName"] = cluster + "-" + group + "-worker-";
  p["spec"]["nodeSelector"]["cloud.google.com/gke-tpu-topology"] = "8x8";
  return p;
}

// A worker Pod as the cluster holds it after admission and scheduling.
json cluster_pod(int index) {
  int slice = index / kHosts;
  std::string cluster = "raycluster-" + std::to_string(slice / 4);
  std::string group = "tpu-group";
  int replica = slice % 4;
  int host = index % kHosts;
  json p = base_pod(cluster, group);
  json& md = p["metadata"];
  md["name"] = cluster + "-" + group + "-worker-" + std::to_string(100000 + index);
  md["labels"]["replicaIndex"] = group + "-" + std::to_string(replica);
  md["creationTimestamp"] = "2025-05-01T10:00:00Z";
  md["annotations"]["ray.io/ft-enabled"] = "false";
  json& c = p["spec"]["containers"][0];
  c["env"].push_back({{"name", "TPU_WORKER_ID"}, {"value", std::to_string(host)}});
  c["env"].push_back({{"name", "TPU_NAME"}, {"value", group + "-" + std::to_string(replica)}});
  p["spec"]["hostname"] = group + "-" + std::to_string(replica) + "-" + std::to_string(host);
  p["spec"]["subdomain"] = cluster + "-headless";
  p["spec"]["nodeName"] = "gke-tpu-node-" + std::to_string(index);
  p["status"] = {
      {"phase", "Running"},
      {"hostIP", "10.0.0." + std::to_string(index % 250)},
      {"podIP", "10.4.0." + std::to_string(index % 250)},
      {"startTime", "2025-05-01T10:00:05Z"},
      {"conditions", json::array({{{"type", "Initialized"}, {"status", "True"}},
                                  {{"type", "Ready"}, {"status", "True"}},
                                  {{"type", "ContainersReady"}, {"status", "True"}},
                                  {{"type", "PodScheduled"}, {"status", "True"}}})},
      {"containerStatuses",
       json::array({{{"name", "ray-worker"},
                     {"ready", true},
                     {"restartCount", 0},
                     {"image", "rayproject/ray:2.41.0"},
                     {"containerID", "containerd://" + std::string(64, 'a')},
                     {"state", {{"running", {{"startedAt", "2025-05-01T10:00:09Z"}}}}}}})}};
  return p;
}

int serve(const Args& a) {
  testing::FakeApiServer::Options o;
  o.record_events = false;  // a bulk load: no history to replay
  testing::FakeApiServer api(o);
  std::size_t bytes = 0;
  for (int i = 0; i < a.pods; ++i) {
    bytes += api.create("pods", cluster_pod(i)).dump().size();
  }
  for (int i = 0; i < 64; ++i) {
    api.create("nodes", {{"metadata",
                          {{"name", "gke-tpu-node-" + std::to_string(i)},
                           {"labels",
                            {{"cloud.google.com/gke-tpu-accelerator", "tpu-v6e-slice"},
                             {"cloud.google.com/gke-tpu-topology", "8x8"}}}}}});
  }
  api.set_record_events(true);  // the webhook replicas' Lease writes are watched
  std::cerr << "fake API: " << a.pods << " Pods, " << bytes / (1 << 20) << " MiB of JSON, port "
            << api.port() << "\n";
  if (!a.port_file.empty()) {
    std::ofstream(a.port_file + ".tmp") << api.port() << "\n";
    std::rename((a.port_file + ".tmp").c_str(), a.port_file.c_str());
  }
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  int sig = 0;
  sigwait(&set, &sig);
  return 0;
}

struct Memory {
  long rss_kib = 0;
  long hwm_kib = 0;
};

Memory memory() {
  std::ifstream in("/proc/self/status");
  Memory m;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) {
      m.rss_kib = std::stol(line.substr(6));
    } else if (line.rfind("VmHWM:", 0) == 0) {
      m.hwm_kib = std::stol(line.substr(6));
    }
  }
  return m;
}

double percentile(std::vector<double>& v, double p) {
  std::sort(v.begin(), v.end());
  std::size_t i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
  return v[i];
}

int client(const Args& a) {
  kube::ClusterConfig config;
  config.https = false;
  config.host = "127.0.0.1";
  config.port = a.port;
  config.origin = "bench";
  kube::LiveClusterOptions options;
  options.claims.ns = "ray-system";
  options.claims.holder = "bench-replica-" + std::to_string(a.replica);
  options.log = [](kube::LogLevel level, const std::string& line) {
    if (level >= kube::LogLevel::kWarning) {
      std::cerr << "kube: " << line << "\n";
    }
  };
  Memory before = memory();
  auto live = kube::LiveCluster::create(config, options);
  if (!live) {
    std::cerr << live.error().message << "\n";
    return 2;
  }
  Clock::time_point t0 = Clock::now();
  (*live)->start();
  while (!(*live)->pods_synced()) {
    if (Clock::now() - t0 > std::chrono::minutes(5)) {
      std::cerr << "the Pod list did not sync within 5 minutes\n";
      return 2;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  double sync_s = std::chrono::duration<double>(Clock::now() - t0).count();
  kube::SliceRegistry::Stats st = (*live)->registry().stats();
  Memory synced = memory();

  admission::Handler handler({}, (*live)->pods(), (*live)->nodes(), (*live)->services());
  // Each request is built before its timer starts: the timed part is Handler::mutate only.
  // Label-less Pods belong to --groups groups of their own (no Pods listed), so each is placed
  // over its group's claims; in a cluster a group's Lease holds at most a burst's claims.
  auto request = [&](int g, bool is_legacy, const std::string& uid) {
    admission::Request r;
    r.uid = uid;
    r.kind = "Pod";
    r.version = "v1";
    r.operation = "CREATE";
    r.ns = "default";
    r.object = base_pod("raycluster-bench-" + std::to_string(g), "tpu-group");
    if (!is_legacy) {
      json& labels = r.object["metadata"]["labels"];
      labels["ray.io/worker-group-replica-index"] = std::to_string(g % 4);
      labels["ray.io/replica-host-index"] = std::to_string(g % kHosts);
      labels["ray.io/worker-group-replica-name"] = "tpu-group-abcde";
    }
    return r;
  };
  std::atomic<int> failures{0};
  std::vector<std::vector<double>> lat_legacy(static_cast<std::size_t>(a.threads));
  std::vector<std::vector<double>> lat_labelled(static_cast<std::size_t>(a.threads));
  auto work = [&](int t) {
    auto& ll = lat_legacy[static_cast<std::size_t>(t)];
    auto& lb = lat_labelled[static_cast<std::size_t>(t)];
    int each = a.requests / a.threads;
    for (int i = 0; i < each + 200; ++i) {  // the first 200 of each kind warm up
      bool legacy_first = (i % 2) == 0;     // alternate the order: same conditions for both
      for (int k = 0; k < 2; ++k) {
        bool is_legacy = (k == 0) == legacy_first;
        // Replicas start at different groups: as in a cluster, they meet in a group now and
        // then (and then conflict), not on every Pod.
        int pick = (i * a.threads + t + a.replica * a.stagger) % std::max(1, a.groups);
        admission::Request r = request(pick, is_legacy,
                                       "bench-" + std::to_string(a.replica) + "-" +
                                           std::to_string(t) + "-" + std::to_string(i));
        Clock::time_point s = Clock::now();
        admission::Response resp = handler.mutate(r);
        double us = std::chrono::duration<double, std::micro>(Clock::now() - s).count();
        if (!resp.allowed) {
          ++failures;
        }
        if (i >= 200) {
          (is_legacy ? ll : lb).push_back(us);
        }
      }
    }
  };
  {
    std::vector<std::jthread> threads;
    for (int t = 0; t < a.threads; ++t) {
      threads.emplace_back(work, t);
    }
  }
  Memory after = memory();
  std::vector<double> all_legacy;
  std::vector<double> all_labelled;
  for (int t = 0; t < a.threads; ++t) {
    all_legacy.insert(all_legacy.end(), lat_legacy[static_cast<std::size_t>(t)].begin(),
                      lat_legacy[static_cast<std::size_t>(t)].end());
    all_labelled.insert(all_labelled.end(), lat_labelled[static_cast<std::size_t>(t)].begin(),
                        lat_labelled[static_cast<std::size_t>(t)].end());
  }
  double p50_legacy = percentile(all_legacy, 0.50);
  double p99_legacy = percentile(all_legacy, 0.99);
  double p50_labelled = percentile(all_labelled, 0.50);
  double p99_labelled = percentile(all_labelled, 0.99);
  kube::ClaimStore::Stats claims = (*live)->claims().stats();
  (*live)->stop();
  auto per_pod = [&](std::uint64_t n) {
    return claims.claims_written == 0
               ? 0.0
               : static_cast<double>(n) / static_cast<double>(claims.claims_written);
  };

  std::printf("pods_listed %zu\n", st.pods);
  std::printf("sync_seconds %.2f\n", sync_s);
  std::printf("rss_before_mib %.1f\n", static_cast<double>(before.rss_kib) / 1024);
  std::printf("rss_synced_mib %.1f\n", static_cast<double>(synced.rss_kib) / 1024);
  std::printf("rss_after_load_mib %.1f\n", static_cast<double>(after.rss_kib) / 1024);
  std::printf("rss_peak_mib %.1f\n", static_cast<double>(after.hwm_kib) / 1024);
  std::printf("requests_per_kind %zu\n", all_legacy.size());
  std::printf("claims_written %llu\n", static_cast<unsigned long long>(claims.claims_written));
  std::printf("claim_conflicts %llu\n", static_cast<unsigned long long>(claims.conflicts));
  std::printf("writes_per_pod %.3f\n", per_pod(claims.writes));
  std::printf("reads_per_pod %.3f\n", per_pod(claims.reads));
  std::printf("labelled_p50_us %.1f\n", p50_labelled);
  std::printf("labelled_p99_us %.1f\n", p99_labelled);
  std::printf("legacy_p50_us %.1f\n", p50_legacy);
  std::printf("legacy_p99_us %.1f\n", p99_legacy);
  std::printf("p99_ratio %.3f\n", p99_legacy / p99_labelled);
  std::printf("denied %d\n", failures.load());
  return failures.load() == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    Args a = parse(argc, argv);
    if (a.mode == "serve") {
      return serve(a);
    }
    if (a.mode == "client") {
      return client(a);
    }
    std::cerr << "usage: legacy-bench serve|client [flags]\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "legacy-bench: " << e.what() << "\n";
    return 2;
  }
}
