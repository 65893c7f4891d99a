#include "tpuslice_support.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "dryrun/documents.h"
#include "tpuslice/cli.h"

namespace testing {

using nlohmann::json;

nlohmann::json CliRun::json() const {
  nlohmann::json j = nlohmann::json::parse(out, nullptr, false);
  INFO(out);
  REQUIRE_FALSE(j.is_discarded());
  return j;
}

std::vector<json> load_fixture(const std::string& name) {
  std::ifstream in(std::string(TPUSLICE_FIXTURE_DIR) + "/" + name + ".cluster.yaml");
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  webhook::Result<std::vector<json>> docs = dryrun::parse_documents(text.str());
  REQUIRE(docs.has_value());
  REQUIRE(docs->size() == 1);
  return docs->front().at("items").get<std::vector<json>>();
}

std::string resource_of(const json& object) {
  std::string kind = object.at("kind").get<std::string>();
  if (kind == "RayCluster") {
    return "rayclusters";
  }
  if (kind == "EndpointSlice") {
    return "endpointslices";
  }
  std::string lower;
  for (char c : kind) {
    lower.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  }
  return lower + "s";
}

RecordedCluster::RecordedCluster(const std::string& fixture, FakeApiServer::Options options)
    : api_(std::move(options)) {
  for (const json& object : load_fixture(fixture)) {
    api_.create(resource_of(object), object);
  }
}

std::string RecordedCluster::kubeconfig(const std::string& extra_context_fields) const {
  return dir.write("kubeconfig",
                   "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
                   "clusters:\n- name: fake\n  cluster:\n    server: http://127.0.0.1:" +
                       std::to_string(api_.port()) +
                       "\ncontexts:\n- name: fake\n  context:\n    cluster: fake\n    user: u\n" +
                       extra_context_fields + "users:\n- name: u\n  user:\n    token: t\n");
}

CliRun RecordedCluster::run(std::vector<std::string> args) const {
  return run_plugin(args, {{"KUBECONFIG", kubeconfig()}});
}

CliRun run_plugin(const std::vector<std::string>& args,
                  const std::vector<std::pair<std::string, std::string>>& env) {
  std::ostringstream out;
  std::ostringstream err;
  kube::EnvLookup lookup = [env](const std::string& name) -> std::optional<std::string> {
    for (const auto& [k, v] : env) {
      if (k == name) {
        return v;
      }
    }
    return std::nullopt;
  };
  CliRun r;
  r.code = tpuslice::run_cli(args, {out, err}, lookup);
  r.out = out.str();
  r.err = err.str();
  return r;
}

std::vector<json> findings_of(const json& answer, const std::string& check) {
  std::vector<json> out;
  for (const json& f : answer.at("findings")) {
    if (f.at("check") == check) {
      out.push_back(f);
    }
  }
  return out;
}

}  // namespace testing
