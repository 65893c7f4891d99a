#include "dryrun/cli.h"

#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>

#include "admission/config_flags.h"
#include "admission/handler.h"
#include "admission/review.h"
#include "base/flags/flags.h"
#include "base/json/access.h"
#include "dryrun/documents.h"
#include "dryrun/expand.h"
#include "dryrun/output.h"
#include "kube/listed_cluster.h"
#include "podpatch/pod_view.h"

namespace dryrun {

using webhook::member;
using webhook::string_member;
namespace {

constexpr std::size_t kMaxInputBytes = 64 << 20;

struct Options {
  std::string output;  // empty: the kind's default
  std::vector<std::string> files;
  std::vector<std::string> existing;
  bool explain = false;
  bool indexing = true;
  std::string default_namespace = "default";
  admission::Config config;
  bool help = false;
  bool version = false;
};

using webhook::invalid_argument;
using webhook::flags::Flag;
using webhook::flags::FlagTable;
using webhook::flags::Kind;

Flag<Options> output_flag() {
  return {.name = "output",
          .alias = "o",
          .value_name = "FORMAT",
          .help = "yaml, json, patch, review or table (see Output above)",
          .apply = [](Options& o, std::string_view v) -> webhook::Status {
            if (v != "yaml" && v != "json" && v != "patch" && v != "review" && v != "table") {
              return invalid_argument("expected yaml, json, patch, review or table");
            }
            o.output = std::string(v);
            return {};
          }};
}

Flag<Options> indexing_flag() {
  return {.name = "kuberay-indexing",
          .value_name = "on|off",
          .help =
              "RayCluster expansion with KubeRay's index labels (on, KubeRay >= 1.6 "
              "default) or without them (off: KubeRay <= 1.4, or the RayMultiHostIndexing "
              "gate off; Pods are placed by legacy placement and only the Pods missing from "
              "--existing are created)",
          .apply = [](Options& o, std::string_view v) -> webhook::Status {
            if (v != "on" && v != "off") {
              return invalid_argument("expected on or off");
            }
            o.indexing = v == "on";
            return {};
          }};
}

Flag<Options> namespace_flag() {
  return {.name = "namespace",
          .alias = "n",
          .value_name = "NS",
          .help = "namespace of objects that name none (default: default)",
          .apply = [](Options& o, std::string_view v) -> webhook::Status {
            if (v.empty()) {
              return invalid_argument("expected a namespace name, not an empty one");
            }
            o.default_namespace = std::string(v);
            return {};
          }};
}

Flag<Options> switch_flag(std::string name, std::string alias, bool Options::*field, bool stops,
                          std::string help) {
  return {.name = std::move(name),
          .alias = std::move(alias),
          .help = std::move(help),
          .kind = Kind::kBoolean,
          .apply = [field](Options& o, std::string_view) -> webhook::Status {
            o.*field = true;
            return {};
          },
          .stops = stops};
}

const FlagTable<Options>& table() {
  static const FlagTable<Options> kFlags = [] {
    FlagTable<Options> t;
    t.section("Flags")
        .add(output_flag())
        .add({.name = "existing",
              .value_name = "FILE",
              .help = "Pods (and Nodes, headless Services) already in the cluster, as a v1 List "
                      "or multi-document YAML; repeatable; before or after the inputs. Pods feed "
                      "legacy placement (M3.3), Nodes subslice placement (M4, V3), Services the "
                      "headless Service name.",
              .apply = [](Options& o, std::string_view v) -> webhook::Status {
                o.existing.emplace_back(v);
                return {};
              }})
        .add(indexing_flag())
        .add(switch_flag("explain", "", &Options::explain, false,
                         "print on stderr how each value was derived\n"
                         "(topology -> chips -> hosts -> placement -> names -> addresses)"))
        .add(namespace_flag())
        .add(admission::config_flags(), &Options::config)
        .add(switch_flag("help", "h", &Options::help, true, "this text"))
        .add(switch_flag("version", "", &Options::version, true, "print the version"));
    t.positional([](Options& o, std::string_view file) -> webhook::Status {
       o.files.emplace_back(file);
       return {};
     }).dash_dash_ends_flags();
    return t;
  }();
  return kFlags;
}

webhook::Result<Options> parse_flags(const std::vector<std::string>& args) {
  Options o;
  if (webhook::Status st = table().parse(args, o); !st) {
    return st.error();
  }
  if (!o.help && !o.version && o.files.empty()) {
    return invalid_argument("no input file; usage: webhook-dryrun [flags] FILE... (- reads stdin)");
  }
  return o;
}

webhook::Result<std::string> read_input(const std::string& path, std::istream& in) {
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } else {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
      return invalid_argument(path + ": cannot open the file (does it exist and is it readable?)");
    }
    std::ostringstream s;
    s << f.rdbuf();
    if (f.bad()) {
      return invalid_argument(path + ": cannot read the file");
    }
    text = std::move(s).str();
  }
  if (text.size() > kMaxInputBytes) {
    return invalid_argument(path + ": larger than " + std::to_string(kMaxInputBytes >> 20) +
                            " MiB; Kubernetes objects are far smaller");
  }
  return text;
}

std::string display(const std::string& path) { return path == "-" ? "<stdin>" : path; }

// Kubernetes objects of a document, with List items flattened.
struct Item {
  json object;
  std::string kind;
  std::string where;  // "FILE" or "FILE: document N" for messages
};

webhook::Status flatten(json doc, const std::string& where, std::vector<Item>& items,
                        int depth = 0) {
  if (!doc.is_object()) {
    return invalid_argument(
        where + ": a YAML/JSON " + std::string(doc.type_name()) +
        " is not a Kubernetes object; expected a mapping with apiVersion and kind");
  }
  std::string kind(string_member(&doc, "kind").value_or(""));
  if (kind.empty()) {
    return invalid_argument(where +
                            ": the object has no kind; expected Pod, RayCluster, AdmissionReview "
                            "or List");
  }
  if (kind == "List" || kind.ends_with("List")) {
    const json* list = member(doc, "items");
    if (list == nullptr || !list->is_array() || depth > 0) {
      return invalid_argument(where + ": a " + kind +
                              " needs an items array (of objects, not Lists)");
    }
    int n = 0;
    for (json& item : doc["items"]) {
      if (webhook::Status st =
              flatten(std::move(item), where + ": item " + std::to_string(++n), items, depth + 1);
          !st) {
        return st;
      }
    }
    return {};
  }
  items.push_back({std::move(doc), kind, where});
  return {};
}

webhook::Result<std::vector<Item>> load_items(const std::string& path, std::istream& in) {
  webhook::Result<std::string> text = read_input(path, in);
  if (!text) {
    return text.error();
  }
  std::string name = display(path);
  webhook::Result<std::vector<json>> docs = parse_documents(*text);
  if (!docs) {
    return invalid_argument(name + ": " + docs.error().message);
  }
  std::vector<Item> items;
  std::size_t count = docs->size();
  for (std::size_t i = 0; i < count; ++i) {
    std::string where = count > 1 ? name + ": document " + std::to_string(i + 1) : name;
    if (webhook::Status st = flatten(std::move((*docs)[i]), where, items); !st) {
      return st.error();
    }
  }
  return items;
}

// The cluster as --existing describes it, in the server's own classes: every --existing object
// is one item of a single list fed to them (kube::ListedCluster).
struct Cluster {
  kube::ListedCluster state;
  std::map<podpatch::GroupKey, int> pods_per_group;
};

webhook::Status load_existing(const Options& o, std::istream& in, Cluster& cluster) {
  std::vector<json> objects;
  for (const std::string& path : o.existing) {
    webhook::Result<std::vector<Item>> items = load_items(path, in);
    if (!items) {
      return invalid_argument("--existing " + items.error().message);
    }
    for (Item& item : *items) {
      if (item.kind == "Pod") {
        webhook::Result<podpatch::PodView> view = podpatch::PodView::create(item.object);
        std::optional<podpatch::GroupKey> key;
        if (view && !view->deleting()) {
          key = podpatch::group_key(*view, o.default_namespace);
        }
        if (key) {
          ++cluster.pods_per_group[*key];
        }
      } else if (item.kind != "Node" && item.kind != "Service") {
        return invalid_argument(
            "--existing " + item.where + ": kind " + item.kind +
            " is not an existing-cluster object; expected Pod, Node or Service");
      }
      // A namespaced object without a namespace is in -n's, as kubectl would create it.
      if (item.kind != "Node" && item.object.is_object() &&
          !string_member(member(item.object, "metadata"), "namespace")) {
        webhook::object_member(item.object, "metadata")["namespace"] = o.default_namespace;
      }
      objects.push_back(std::move(item.object));
    }
  }
  cluster.state.list(objects);
  return {};
}

// What can be known wrong with an input before anything runs, so a bad input changes nothing:
// an unsupported kind, an output format that does not apply, a RayCluster or worker group without
// a name, an AdmissionReview without a readable uid.
webhook::Status check_item(const Item& item, const Options& o) {
  if (item.kind == "Pod") {
    return {};
  }
  if (item.kind == "RayCluster") {
    if (o.output == "patch") {
      return invalid_argument(item.where +
                              ": -o patch applies to Pods; for a RayCluster use table, yaml, "
                              "json or review");
    }
    if (string_member(member(item.object, "metadata"), "name").value_or("").empty()) {
      return invalid_argument(item.where + ": the RayCluster has no metadata.name");
    }
    const json* groups = member(item.object, "spec", "workerGroupSpecs");
    if (groups != nullptr && groups->is_array()) {
      for (std::size_t i = 0; i < groups->size(); ++i) {
        if (string_member(&(*groups)[i], "groupName").value_or("").empty()) {
          return invalid_argument(item.where + ": spec.workerGroupSpecs[" + std::to_string(i) +
                                  "] has no groupName");
        }
      }
    }
    return {};
  }
  if (item.kind == "AdmissionReview") {
    std::string text = webhook::dump_json(item.object);
    webhook::Result<admission::Request> req = admission::decode(text);
    if (!req && admission::request_uid(text).empty()) {
      return invalid_argument(item.where + ": " + req.error().message);
    }
    return {};
  }
  return invalid_argument(
      item.where + ": kind " + item.kind +
      " is not supported; webhook-dryrun reads Pod, RayCluster, AdmissionReview or a "
      "List of them");
}

class Runner {
 public:
  Runner(const Options& o, CliIo io, Cluster& cluster)
      : o_(o),
        io_(io),
        cluster_(cluster),
        handler_(o.config, cluster.state.pods(), cluster.state.nodes(), cluster.state.services()) {}

  // Returns the exit code for one item that passed check_item, or an input problem.
  webhook::Result<int> run(Item& item) {
    if (item.kind == "Pod") {
      return run_pod(item);
    }
    if (item.kind == "RayCluster") {
      return run_cluster(item);
    }
    return run_review(item);
  }

 private:
  admission::Request request(std::string kind, std::string group, json object) {
    admission::Request r;
    r.uid = "dryrun-" + std::to_string(++uid_);
    r.kind = std::move(kind);
    r.group = std::move(group);
    r.version = "v1";
    r.operation = "CREATE";
    const json* md = member(object, "metadata");
    r.ns = std::string(string_member(md, "namespace").value_or(o_.default_namespace));
    r.name = std::string(string_member(md, "name").value_or(""));
    r.object = std::move(object);
    return r;
  }

  void print_warnings(const admission::Response& r) {
    for (const std::string& w : r.warnings) {
      io_.err << "Warning: " << w << "\n";
    }
  }

  void print_explain(const admission::PodDecision& decision, const std::string& title) {
    if (!o_.explain) {
      return;
    }
    io_.err << "# " << title << "\n";
    for (const std::string& l : admission::explain(decision, handler_.config())) {
      io_.err << "#   " << l << "\n";
    }
  }

  // -o json, or YAML (documents after the first separated by ---).
  void print_object(const json& value, const std::string& format) {
    if (format == "json") {
      io_.out << webhook::dump_json(value, 2) << "\n";
      return;
    }
    if (printed_yaml_) {
      io_.out << "---\n";
    }
    io_.out << to_yaml(value);
    printed_yaml_ = true;
  }

  webhook::Result<int> run_pod(Item& item) {
    std::string out = o_.output.empty() ? "yaml" : o_.output;
    admission::PodDecision decision;
    admission::Request req = request("Pod", "", std::move(item.object));
    admission::Response r = handler_.mutate(req, &decision);
    print_explain(decision, item.where + " (Pod " + podpatch::pod_name(req.object) + ")");
    print_warnings(r);
    if (out == "review") {
      io_.out << webhook::dump_json(admission::to_json(r), 2) << "\n";
      return r.allowed ? kExitAdmitted : kExitDenied;
    }
    if (!r.allowed) {
      io_.err << item.where << ": denied: " << r.message << "\n";
      return kExitDenied;
    }
    json patch = admission::has_patch(r) ? admission::patch_ops(r) : json::array();
    if (out == "patch") {
      io_.out << webhook::dump_json(patch, 2) << "\n";
      return kExitAdmitted;
    }
    json mutated = req.object.patch(patch);
    if (out == "table") {
      io_.out << format_table({{1, std::string(podpatch_group(mutated)),
                                r.placement ? r.placement->slot : podpatch::Slot{}, mutated}});
    } else {
      print_object(mutated, out);
    }
    return kExitAdmitted;
  }

  webhook::Result<int> run_cluster(Item& item) {
    std::string out = o_.output.empty() ? "table" : o_.output;
    const json* md = member(item.object, "metadata");
    std::string name(string_member(md, "name").value_or(""));
    std::string ns(string_member(md, "namespace").value_or(o_.default_namespace));
    admission::Request req = request("RayCluster", "ray.io", item.object);
    admission::Response verdict = handler_.validate(req);
    print_warnings(verdict);
    if (out == "review") {
      io_.out << webhook::dump_json(admission::to_json(verdict), 2) << "\n";
      return verdict.allowed ? kExitAdmitted : kExitDenied;
    }
    if (!verdict.allowed) {
      (out == "table" ? io_.out : io_.err) << item.where << ": denied: " << verdict.message << "\n";
      return kExitDenied;
    }
    ExpandOptions eo;
    eo.indexing = o_.indexing;
    eo.default_namespace = o_.default_namespace;
    eo.existing = cluster_.pods_per_group;
    webhook::Result<std::vector<WorkerPod>> pods = expand_workers(item.object, eo);
    if (!pods) {
      return invalid_argument(item.where + ": " + pods.error().message);
    }
    std::vector<TableRow> rows;
    json list = {{"apiVersion", "v1"}, {"kind", "List"}, {"items", json::array()}};
    int ordinal = 0;
    for (WorkerPod& w : *pods) {
      admission::PodDecision decision;
      admission::Request pod_req = request("Pod", "", std::move(w.pod));
      admission::Response r = handler_.mutate(pod_req, &decision);
      ++ordinal;
      print_explain(decision, "worker Pod #" + std::to_string(ordinal) + " of group " + w.group);
      print_warnings(r);
      if (!r.allowed) {
        (out == "table" ? io_.out : io_.err)
            << item.where << ": worker Pod #" << ordinal << " of group " << w.group
            << " denied: " << r.message << "\n";
        return kExitDenied;
      }
      json mutated =
          pod_req.object.patch(admission::has_patch(r) ? admission::patch_ops(r) : json::array());
      rows.push_back(
          {ordinal, w.group, r.placement ? r.placement->slot : podpatch::Slot{}, mutated});
      list["items"].push_back(std::move(mutated));
    }
    if (out == "table") {
      io_.out << "RayCluster " << ns << "/" << name << ": admitted; " << rows.size()
              << " worker Pod(s)" << (o_.indexing ? "" : " placed without KubeRay's index labels")
              << "\n";
      if (!rows.empty()) {
        io_.out << format_table(rows);
      }
    } else {
      print_object(list, out);
    }
    return kExitAdmitted;
  }

  webhook::Result<int> run_review(Item& item) {
    std::string text = webhook::dump_json(item.object);
    webhook::Result<admission::Request> req = admission::decode(text);
    admission::Response r;
    admission::PodDecision decision;
    if (!req) {  // check_item made sure the uid is readable
      r = admission::denied(admission::request_uid(text), req.error());
    } else {
      bool validate = req->kind == "RayCluster";
      r = validate ? handler_.validate(*req) : handler_.mutate(*req, &decision);
      print_explain(decision, item.where);
    }
    print_warnings(r);
    io_.out << webhook::dump_json(admission::to_json(r), 2) << "\n";
    return r.allowed ? kExitAdmitted : kExitDenied;
  }

  static std::string_view podpatch_group(const json& pod) {
    return string_member(member(pod, "metadata", "labels"), "ray.io/group").value_or("-");
  }

  const Options& o_;
  CliIo io_;
  Cluster& cluster_;
  admission::Handler handler_;
  int uid_ = 0;
  bool printed_yaml_ = false;
};

// Prints one usage or input problem: one line on stderr, exit 2.
int usage_error(CliIo io, const webhook::Error& error) {
  io.err << "webhook-dryrun: " << error.message << "\n";
  return kExitUsage;
}

}  // namespace

std::vector<std::string> flag_spellings() { return table().spellings(); }

std::string usage() {
  return R"(webhook-dryrun: what kuberay-tpu-webhook would answer, without a cluster.

Usage: webhook-dryrun [flags] FILE...        (FILE "-" reads standard input)

Inputs (YAML, multi-document YAML, or JSON; a v1 List of them is read item by item):
  Pod              prints the mutated Pod (docs/spec.md M1-M7), as the API server stores it
  RayCluster       validates it (V1-V4), expands every worker group into the Pods KubeRay
                   would create (replicas x numOfHosts, in creation order), runs each through
                   the webhook and prints the slice table
  AdmissionReview  prints the AdmissionReview response the server would send

Output (-o, --output):
  Pod:             yaml (default) | json | patch (the RFC 6902 JSON Patch; [] when nothing
                   changes) | review | table
  RayCluster:      table (default: pod, group, replica, host, TPU_WORKER_ID, hostname,
                   TPU_NAME, TORCH_TPU_TOPOLOGY, first peer address) | yaml | json (the mutated
                   Pods as a v1 List) | review (the validation response)

)" + webhook::flags::render_help(table().docs(), {.column = 29, .equals = false}) +
         R"(
Exit status: 0 admitted, 1 denied (the reason on stdout for a table, else stderr),
2 bad usage or unreadable input (one line on stderr naming the file and the problem).
Warnings the API server would show (kubectl "Warning:") go to stderr.

Example:
  webhook-dryrun examples/gke-tutorial/ray-cluster.tpu-v6e-multihost.yaml
  webhook-dryrun -o patch --explain pod.yaml
  kubectl get pods -l ray.io/cluster=c -o yaml > pods.yaml
  webhook-dryrun --kuberay-indexing=off --existing pods.yaml raycluster.yaml
)";
}

int run_cli(const std::vector<std::string>& args, CliIo io) {
  webhook::Result<Options> parsed = parse_flags(args);
  if (!parsed) {
    return usage_error(io, parsed.error());
  }
  const Options& o = *parsed;
  if (o.help) {
    io.out << usage();
    return kExitAdmitted;
  }
  if (o.version) {
    io.out << "webhook-dryrun " << WEBHOOK_VERSION << "\n";
    return kExitAdmitted;
  }
  Cluster cluster;
  if (webhook::Status st = load_existing(o, io.in, cluster); !st) {
    return usage_error(io, st.error());
  }
  // Read and check every input first: an unreadable one stops the run before any output.
  std::vector<Item> all;
  for (const std::string& path : o.files) {
    webhook::Result<std::vector<Item>> items = load_items(path, io.in);
    if (!items) {
      return usage_error(io, items.error());
    }
    for (Item& item : *items) {
      if (webhook::Status st = check_item(item, o); !st) {
        return usage_error(io, st.error());
      }
      all.push_back(std::move(item));
    }
  }
  Runner runner(o, io, cluster);
  int code = kExitAdmitted;
  for (Item& item : all) {
    webhook::Result<int> result = runner.run(item);
    if (!result) {
      return usage_error(io, result.error());
    }
    code = std::max(code, *result);
  }
  return code;
}

}  // namespace dryrun
