#include "dryrun/output.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>

#include "base/text/text.h"
#include "dryrun/documents.h"
#include "podpatch/env.h"
#include "podpatch/keys.h"
#include "podpatch/pod_view.h"

namespace dryrun {
namespace {

namespace keys = podpatch::keys;

// A long value yaml-cpp would write as a plain scalar as it is: a letter first, then only
// letters, digits and . , : _ - (the address lists of large slices). Such text reads back as a
// string and needs no quoting; yaml-cpp takes long to check it character by character, so
// to_yaml writes a short marker in its place and puts the text in after.
constexpr std::size_t kLongPlainBytes = 1024;
constexpr std::string_view kLongMarker = "zqzlongplainvaluezqz";

bool long_plain(const std::string& s) {
  if (s.size() < kLongPlainBytes || !std::isalpha(static_cast<unsigned char>(s[0]))) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == ',' || c == ':' ||
           c == '_' || c == '-';
  });
}

// Whether any key or string of `v` holds the marker: then no value is replaced by it.
bool holds_marker(const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      return std::any_of(v.items().begin(), v.items().end(), [](const auto& kv) {
        return kv.key().find(kLongMarker) != std::string::npos || holds_marker(kv.value());
      });
    case json::value_t::array:
      return std::any_of(v.begin(), v.end(), [](const json& i) { return holds_marker(i); });
    case json::value_t::string:
      return v.get_ref<const std::string&>().find(kLongMarker) != std::string::npos;
    default:
      return false;
  }
}

void emit(YAML::Emitter& out, const json& v, std::vector<const std::string*>* long_values) {
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
        emit(out, value, long_values);
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
        emit(out, item, long_values);
      }
      out << YAML::EndSeq;
      return;
    case json::value_t::string: {
      const auto& s = v.get_ref<const std::string&>();
      if (long_values != nullptr && long_plain(s)) {
        long_values->push_back(&s);
        out << std::string(kLongMarker);
        return;
      }
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
      std::optional<std::string_view> base = podpatch::env_literal(c, keys::kTorchBasePort);
      std::optional<std::string_view> hosts = podpatch::env_literal(c, keys::kWorkerHostnames);
      if (peers == "-" && base && hosts) {  // left out (M8.2): TorchTPU derives it
        out.first_peer = std::string(hosts->substr(0, hosts->find(','))) + ":" +
                         std::string(*base) + " (derived)";
      }
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
  std::vector<const std::string*> long_values;
  emit(out, value, holds_marker(value) ? nullptr : &long_values);
  std::string text = out.c_str();
  if (!long_values.empty()) {  // the markers, in the order written, get their values back
    std::string filled;
    std::size_t size = text.size();
    for (const std::string* s : long_values) {
      size += s->size();
    }
    filled.reserve(size);
    std::size_t from = 0;
    for (const std::string* s : long_values) {
      std::size_t at = text.find(kLongMarker, from);
      filled.append(text, from, at - from).append(*s);
      from = at + kLongMarker.size();
    }
    filled.append(text, from);
    text = std::move(filled);
  }
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

RowCells row_cells(const TableRow& r) {
  TpuEnv env = tpu_env(r.pod);
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
  return {{std::to_string(r.ordinal), pod_display_name(r.pod), r.group,
           std::to_string(r.slot.replica), std::to_string(r.slot.host), ids.empty() ? "-" : ids,
           hostname, env.tpu_name, env.topology, env.first_peer},
          env.megascale};
}

std::string format_table(const std::vector<RowCells>& rows) {
  bool multislice =
      std::any_of(rows.begin(), rows.end(), [](const RowCells& r) { return !r.megascale.empty(); });
  std::vector<std::vector<std::string>> cells = {{"#", "POD", "GROUP", "REPLICA", "HOST",
                                                  "TPU_WORKER_ID", "HOSTNAME", "TPU_NAME",
                                                  "TORCH_TPU_TOPOLOGY", "FIRST_PEER"}};
  if (multislice) {
    cells[0].push_back("MEGASCALE");
  }
  cells.reserve(rows.size() + 1);
  for (const RowCells& r : rows) {
    cells.push_back(r.cells);
    if (multislice) {
      cells.back().push_back(r.megascale.empty() ? "-" : r.megascale);
    }
  }
  return webhook::aligned_columns(cells);
}

std::string format_table(const std::vector<TableRow>& rows) {
  std::vector<RowCells> cells;
  cells.reserve(rows.size());
  for (const TableRow& r : rows) {
    cells.push_back(row_cells(r));
  }
  return format_table(cells);
}

namespace {

// Writes `text` with `first` before its first line and `rest` before every other line; a last
// line without its newline stays without.
void indented(std::ostream& out, const std::string& text, std::string_view first,
              std::string_view rest) {
  std::size_t start = 0;
  bool first_line = true;
  while (start < text.size()) {
    std::size_t nl = text.find('\n', start);
    std::size_t end = nl == std::string::npos ? text.size() : nl + 1;
    out << (first_line ? first : rest);
    out.write(text.data() + start, static_cast<std::streamsize>(end - start));
    first_line = false;
    start = end;
  }
}

}  // namespace

void ListWriter::item(const json& value) {
  if (json_) {
    // dump(2) of the List puts each item at depth 2: four more spaces on every line (a JSON
    // string holds no newline, so lines are safe to indent).
    out_ << (any_ ? ",\n" : "{\n  \"apiVersion\": \"v1\",\n  \"items\": [\n");
    indented(out_, webhook::dump_json(value, 2), "    ", "    ");
  } else {
    if (!any_) {
      out_ << "apiVersion: v1\nitems:\n";
    }
    indented(out_, to_yaml(value), "  - ", "    ");
  }
  any_ = true;
}

void ListWriter::end() {
  if (json_) {
    out_ << (any_ ? "\n  ],\n  \"kind\": \"List\"\n}\n"
                  : "{\n  \"apiVersion\": \"v1\",\n  \"items\": [],\n  \"kind\": \"List\"\n}\n");
  } else {
    out_ << (any_ ? "kind: List\n" : "apiVersion: v1\nitems: []\nkind: List\n");
  }
}

}  // namespace dryrun
