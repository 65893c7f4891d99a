#include "support/test_support.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "base/encoding/base64.h"
#include "dryrun/documents.h"

namespace testing {

namespace fs = std::filesystem;

std::string fixture_path(const std::string& relative) {
  return std::string(FIXTURE_DIR) + "/" + relative;
}

std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    throw std::runtime_error("cannot open " + path);
  }
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

json read_json(const std::string& path) { return json::parse(read_text(path)); }

std::vector<std::string> fixture_files(const std::string& dir, const std::string& suffix) {
  std::vector<std::string> out;
  for (const auto& entry : fs::directory_iterator(fixture_path(dir))) {
    std::string name = entry.path().filename().string();
    if (name.ends_with(suffix)) {
      out.push_back(name);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

json check_golden(const std::string& path, const json& actual) {
  const char* update = std::getenv("UPDATE_GOLDEN");
  if (update != nullptr && std::string(update) == "1") {
    std::ofstream(path) << actual.dump(2) << "\n";
    return json::array();
  }
  if (!fs::exists(path)) {
    return json::array({{{"op", "missing golden"}, {"path", path}}});
  }
  return json::diff(read_json(path), actual);
}

void record_patch(const std::string& name, const json& pod, const json& patch) {
  if (!patch.is_array() || patch.empty()) {
    return;
  }
  fs::create_directories(PATCH_RECORD_DIR);
  std::string base = std::string(PATCH_RECORD_DIR) + "/" + name;
  std::ofstream(base + ".pod.json") << pod.dump(2) << "\n";
  std::ofstream(base + ".patch.json") << patch.dump() << "\n";
  std::ofstream(base + ".mutated.json") << pod.patch(patch).dump(2) << "\n";
}

void FakeCluster::load(const std::string& path) {
  webhook::Result<std::vector<json>> docs = dryrun::parse_documents(read_text(path));
  if (!docs) {
    throw std::runtime_error(path + ": " + docs.error().message);
  }
  std::vector<json> objects;
  for (json& d : *docs) {
    if (d.value("kind", "") == "List") {
      for (json& item : d["items"]) {
        objects.push_back(std::move(item));
      }
    } else {
      objects.push_back(std::move(d));
    }
  }
  state.list(objects);
}

admission::Config config_from(const json& flags) {
  admission::Config c;
  if (flags.contains("kuberayVersion")) {
    c.kuberay = *topology::parse_kuberay_version(flags["kuberayVersion"].get<std::string>());
  }
  c.ports.tpu_process_base = flags.value("tpuProcessPortBase", c.ports.tpu_process_base);
  c.ports.megascale_base = flags.value("megascalePortBase", c.ports.megascale_base);
  c.ports.device_plugin = flags.value("devicePluginPort", c.ports.device_plugin);
  return c;
}

admission::Request pod_request(json object, std::string uid, bool dry_run) {
  admission::Request r;
  r.uid = std::move(uid);
  r.kind = "Pod";
  r.version = "v1";
  r.operation = "CREATE";
  r.dry_run = dry_run;
  r.ns = object.contains("metadata") ? object["metadata"].value("namespace", "default") : "default";
  r.object = std::move(object);
  return r;
}

admission::Request cluster_request(json object, std::string operation) {
  admission::Request r;
  r.uid = "uid-cluster";
  r.kind = "RayCluster";
  r.group = "ray.io";
  r.version = "v1";
  r.operation = std::move(operation);
  r.object = std::move(object);
  return r;
}

json readable(const admission::Response& response) {
  json out = admission::to_json(response)["response"];
  if (out.contains("patch")) {
    out["patch"] = json::parse(*webhook::base64_decode(out["patch"].get<std::string>()));
  }
  return out;
}

json apply(const json& original, const admission::Response& response) {
  return admission::has_patch(response) ? original.patch(admission::patch_ops(response)) : original;
}

std::string env_of(const json& pod, const std::string& name, std::size_t index) {
  const json& c = pod["spec"]["containers"][index];
  std::string value;
  if (c.contains("env") && c["env"].is_array()) {
    for (const json& e : c["env"]) {
      if (e.value("name", "") == name) {
        value = e.value("value", "");
      }
    }
  }
  return value;
}

std::vector<std::string> split_list(std::string_view text) {
  std::vector<std::string> out;
  if (text.empty()) {
    return out;
  }
  std::size_t start = 0;
  std::size_t comma = 0;
  do {
    comma = text.find(',', start);
    out.emplace_back(text.substr(start, comma - start));
    start = comma + 1;
  } while (comma != std::string_view::npos);
  return out;
}

}  // namespace testing
