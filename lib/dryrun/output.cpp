#include "dryrun/output.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>

#include "base/text/text.h"
#include "dryrun/documents.h"
#include "podpatch/env.h"
#include "podpatch/keys.h"
#include "podpatch/pod_view.h"

namespace dryrun {
namespace {

namespace keys = podpatch::keys;

void emit(YAML::Emitter& out, const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      if (v.empty()) {
        out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        return;
      }
      out << YAML::BeginMap;
      for (const auto& [key, value] : v.items()) {
        out << YAML::Key;
        if (!reads_back_as_string(key)) {
          out << YAML::DoubleQuoted;
        }
        out << key << YAML::Value;
        emit(out, value);
      }
      out << YAML::EndMap;
      return;
    case json::value_t::array:
      if (v.empty()) {
        out << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        return;
      }
      out << YAML::BeginSeq;
      for (const json& item : v) {
        emit(out, item);
      }
      out << YAML::EndSeq;
      return;
    case json::value_t::string: {
      const auto& s = v.get_ref<const std::string&>();
      if (!reads_back_as_string(s) || s.find('\n') != std::string::npos) {
        out << YAML::DoubleQuoted;
      }
      out << s;
      return;
    }
    case json::value_t::boolean:
      out << v.get<bool>();
      return;
    case json::value_t::number_integer:
      out << v.get<std::int64_t>();
      return;
    case json::value_t::number_unsigned:
      out << v.get<std::uint64_t>();
      return;
    case json::value_t::number_float:
      out << webhook::dump_json(v);
      return;
    default:
      out << YAML::Null;
      return;
  }
}

// Env of the Pod's TPU containers.
struct TpuEnv {
  std::vector<std::string> worker_ids;
  std::string tpu_name = "-";
  std::string topology = "-";
  std::string first_peer = "-";
  std::string megascale;  // "SLICE_ID/NUM_SLICES" when multi-slice, else ""
};

TpuEnv tpu_env(const json& pod) {
  TpuEnv out;
  webhook::Result<podpatch::PodView> view = podpatch::PodView::create(pod);
  if (!view) {
    return out;
  }
  for (const podpatch::TpuContainer& t : view->tpu_containers()) {
    const json& c = view->container(t.index);
    auto lit = [&](std::string_view name) {
      return std::string(podpatch::env_literal(c, name).value_or("-"));
    };
    out.worker_ids.push_back(lit(keys::kWorkerId));
    if (out.worker_ids.size() == 1) {
      out.tpu_name = lit(keys::kTpuName);
      out.topology = lit(keys::kTorchTopology);
      std::string peers = lit(keys::kTorchSlicebuilder);
      out.first_peer = peers.substr(0, peers.find(','));
      if (podpatch::env_present(c, keys::kMegascaleNumSlices)) {
        out.megascale = lit(keys::kMegascaleSliceId) + "/" + lit(keys::kMegascaleNumSlices);
      }
    }
  }
  return out;
}

}  // namespace

std::string to_yaml(const json& value) {
  YAML::Emitter out;
  out.SetIndent(2);
  out.SetSeqFormat(YAML::Block);
  emit(out, value);
  std::string text = out.c_str();
  if (!text.empty() && text.back() != '\n') {
    text.push_back('\n');
  }
  return text;
}

std::string pod_display_name(const json& pod) {
  const json* md = webhook::member(pod, "metadata");
  std::string_view name = webhook::string_member(md, "name").value_or("");
  if (!name.empty()) {
    return std::string(name);
  }
  return std::string(webhook::string_member(md, "generateName").value_or("-"));
}

std::string format_table(const std::vector<TableRow>& rows) {
  std::vector<TpuEnv> envs;
  bool multislice = false;
  for (const TableRow& r : rows) {
    envs.push_back(tpu_env(r.pod));
    multislice = multislice || !envs.back().megascale.empty();
  }
  std::vector<std::vector<std::string>> cells = {{"#", "POD", "GROUP", "REPLICA", "HOST",
                                                  "TPU_WORKER_ID", "HOSTNAME", "TPU_NAME",
                                                  "TORCH_TPU_TOPOLOGY", "FIRST_PEER"}};
  if (multislice) {
    cells[0].push_back("MEGASCALE");
  }
  for (std::size_t k = 0; k < rows.size(); ++k) {
    const TableRow& r = rows[k];
    const TpuEnv& env = envs[k];
    std::string ids;
    for (const std::string& id : env.worker_ids) {
      ids += (ids.empty() ? "" : ",") + id;
    }
    const json* spec = webhook::member(r.pod, "spec");
    std::string hostname(webhook::string_member(spec, "hostname").value_or("-"));
    if (auto sub = webhook::string_member(spec, "subdomain"); sub && hostname != "-") {
      hostname += '.';
      hostname += *sub;
    }
    cells.push_back({std::to_string(r.ordinal), pod_display_name(r.pod), r.group,
                     std::to_string(r.slot.replica), std::to_string(r.slot.host),
                     ids.empty() ? "-" : ids, hostname, env.tpu_name, env.topology,
                     env.first_peer});
    if (multislice) {
      cells.back().push_back(env.megascale.empty() ? "-" : env.megascale);
    }
  }
  return webhook::aligned_columns(cells);
}

}  // namespace dryrun
