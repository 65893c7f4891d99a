#include "dryrun/cli.h"

#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <sstream>

#include "admission/handler.h"
#include "admission/review.h"
#include "admission/static_sources.h"
#include "dryrun/documents.h"
#include "dryrun/expand.h"
#include "dryrun/output.h"
#include "base/json/access.h"
#include "podpatch/pod_view.h"
#include "base/text/numbers.h"

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
};

// A usage or input problem: one line on stderr, exit 2.
struct Failure {
  std::string line;
};

template <class T>
using Parsed = std::variant<T, Failure>;

std::optional<int> port_value(std::string_view text) {
  std::optional<std::int64_t> n = webhook::parse_non_negative(text, 65535);
  if (!n || *n == 0) {
    return std::nullopt;
  }
  return static_cast<int>(*n);
}

Parsed<Options> parse_flags(const std::vector<std::string>& args) {
  Options o;
  bool only_files = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string arg = args[i];
    if (only_files || arg == "-" || !arg.starts_with("-")) {
      o.files.push_back(arg);
      continue;
    }
    if (arg == "--") {
      only_files = true;
      continue;
    }
    std::string name = arg;
    std::optional<std::string> value;
    if (std::size_t eq = arg.find('='); eq != std::string::npos && arg.starts_with("--")) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    auto take = [&]() -> std::optional<std::string> {
      if (value) {
        return value;
      }
      if (i + 1 < args.size()) {
        return args[++i];
      }
      return std::nullopt;
    };
    auto need = [&](std::string_view flag) { return Failure{"flag " + std::string(flag) + " needs a value"}; };
    if (name == "-h" || name == "--help") {
      return Failure{"__help__"};
    }
    if (name == "--version") {
      return Failure{"__version__"};
    }
    if (name == "--explain") {
      o.explain = true;
    } else if (name == "-o" || name == "--output") {
      std::optional<std::string> v = take();
      if (!v) {
        return need(name);
      }
      if (*v != "yaml" && *v != "json" && *v != "patch" && *v != "review" && *v != "table") {
        return Failure{"-o " + *v + ": expected yaml, json, patch, review or table"};
      }
      o.output = *v;
    } else if (name == "--existing") {
      std::optional<std::string> v = take();
      if (!v) {
        return need(name);
      }
      o.existing.push_back(*v);
    } else if (name == "--kuberay-indexing") {
      std::optional<std::string> v = take();
      if (!v || (*v != "on" && *v != "off")) {
        return Failure{"--kuberay-indexing must be on or off"};
      }
      o.indexing = *v == "on";
    } else if (name == "--namespace" || name == "-n") {
      std::optional<std::string> v = take();
      if (!v || v->empty()) {
        return need(name);
      }
      o.default_namespace = *v;
    } else if (name == "--kuberay-version") {
      std::optional<std::string> v = take();
      if (!v) {
        return need(name);
      }
      webhook::Result<topology::KubeRayVersion> version = topology::parse_kuberay_version(*v);
      if (!version) {
        return Failure{"--kuberay-version: " + version.error().message};
      }
      o.config.kuberay = *version;
    } else if (name == "--tpu-process-port-base" || name == "--megascale-port-base" ||
               name == "--device-plugin-port") {
      std::optional<std::string> v = take();
      std::optional<int> port = v ? port_value(*v) : std::nullopt;
      if (!port) {
        return Failure{name + " must be a port number from 1 to 65535"};
      }
      (name == "--tpu-process-port-base"  ? o.config.ports.tpu_process_base
       : name == "--megascale-port-base" ? o.config.ports.megascale_base
                                         : o.config.ports.device_plugin) = *port;
    } else {
      return Failure{"unknown flag " + name + " (see webhook-dryrun --help)"};
    }
  }
  if (o.files.empty()) {
    return Failure{"no input file; usage: webhook-dryrun [flags] FILE... (- reads stdin)"};
  }
  return o;
}

Parsed<std::string> read_input(const std::string& path, std::istream& in) {
  std::string text;
  if (path == "-") {
    text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  } else {
    std::ifstream f(path, std::ios::binary);
    if (!f) {
      return Failure{path + ": cannot open the file (does it exist and is it readable?)"};
    }
    std::ostringstream s;
    s << f.rdbuf();
    if (f.bad()) {
      return Failure{path + ": cannot read the file"};
    }
    text = std::move(s).str();
  }
  if (text.size() > kMaxInputBytes) {
    return Failure{path + ": larger than " + std::to_string(kMaxInputBytes >> 20) +
                   " MiB; Kubernetes objects are far smaller"};
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

std::optional<Failure> flatten(json doc, const std::string& where, std::vector<Item>& items,
                               int depth = 0) {
  if (!doc.is_object()) {
    return Failure{where + ": a YAML/JSON " + std::string(doc.type_name()) +
                   " is not a Kubernetes object; expected a mapping with apiVersion and kind"};
  }
  std::string kind(string_member(&doc, "kind").value_or(""));
  if (kind.empty()) {
    return Failure{where + ": the object has no kind; expected Pod, RayCluster, AdmissionReview "
                           "or List"};
  }
  if (kind == "List" || kind.ends_with("List")) {
    const json* list = member(doc, "items");
    if (list == nullptr || !list->is_array() || depth > 0) {
      return Failure{where + ": a " + kind + " needs an items array (of objects, not Lists)"};
    }
    int n = 0;
    for (json& item : doc["items"]) {
      if (auto f = flatten(std::move(item), where + ": item " + std::to_string(++n), items,
                           depth + 1)) {
        return f;
      }
    }
    return std::nullopt;
  }
  items.push_back({std::move(doc), kind, where});
  return std::nullopt;
}

Parsed<std::vector<Item>> load_items(const std::string& path, std::istream& in) {
  Parsed<std::string> text = read_input(path, in);
  if (auto* f = std::get_if<Failure>(&text)) {
    return *f;
  }
  std::string name = display(path);
  webhook::Result<std::vector<json>> docs = parse_documents(std::get<std::string>(text));
  if (!docs) {
    return Failure{name + ": " + docs.error().message};
  }
  std::vector<Item> items;
  std::size_t count = docs->size();
  for (std::size_t i = 0; i < count; ++i) {
    std::string where = count > 1 ? name + ": document " + std::to_string(i + 1) : name;
    if (auto f = flatten(std::move((*docs)[i]), where, items)) {
      return *f;
    }
  }
  return items;
}

// The cluster as --existing describes it.
struct Cluster {
  admission::StaticPodSource pods;
  admission::StaticNodeSource nodes;
  admission::StaticServiceSource services;
  std::map<podpatch::GroupKey, int> pods_per_group;
};

std::optional<Failure> load_existing(const Options& o, std::istream& in, Cluster& cluster) {
  for (const std::string& path : o.existing) {
    Parsed<std::vector<Item>> items = load_items(path, in);
    if (auto* f = std::get_if<Failure>(&items)) {
      return Failure{"--existing " + f->line};
    }
    for (Item& item : std::get<std::vector<Item>>(items)) {
      if (item.kind == "Pod") {
        cluster.pods.add(item.object);
        webhook::Result<podpatch::PodView> view = podpatch::PodView::create(item.object);
        std::optional<podpatch::GroupKey> key;
        if (view && !view->deleting()) {
          key = podpatch::group_key(*view, o.default_namespace);
        }
        if (key) {
          ++cluster.pods_per_group[*key];
        }
      } else if (item.kind == "Node") {
        cluster.nodes.add(item.object);
      } else if (item.kind == "Service") {
        cluster.services.add(item.object);
      } else {
        return Failure{"--existing " + item.where + ": kind " + item.kind +
                       " is not an existing-cluster object; expected Pod, Node or Service"};
      }
    }
  }
  return std::nullopt;
}

// What can be known wrong with an input before anything runs, so a bad input changes nothing:
// an unsupported kind, an output format that does not apply, a RayCluster or worker group without
// a name, an AdmissionReview without a readable uid.
std::optional<Failure> check_item(const Item& item, const Options& o) {
  if (item.kind == "Pod") {
    return std::nullopt;
  }
  if (item.kind == "RayCluster") {
    if (o.output == "patch") {
      return Failure{item.where + ": -o patch applies to Pods; for a RayCluster use table, yaml, "
                                  "json or review"};
    }
    if (string_member(member(item.object, "metadata"), "name").value_or("").empty()) {
      return Failure{item.where + ": the RayCluster has no metadata.name"};
    }
    const json* groups = member(item.object, "spec", "workerGroupSpecs");
    if (groups != nullptr && groups->is_array()) {
      for (std::size_t i = 0; i < groups->size(); ++i) {
        if (string_member(&(*groups)[i], "groupName").value_or("").empty()) {
          return Failure{item.where + ": spec.workerGroupSpecs[" + std::to_string(i) +
                         "] has no groupName"};
        }
      }
    }
    return std::nullopt;
  }
  if (item.kind == "AdmissionReview") {
    admission::Decoded d = admission::decode(webhook::dump_json(item.object));
    if (!d.request && d.uid.empty()) {
      return Failure{item.where + ": " + d.error.message};
    }
    return std::nullopt;
  }
  return Failure{item.where + ": kind " + item.kind +
                 " is not supported; webhook-dryrun reads Pod, RayCluster, AdmissionReview or a "
                 "List of them"};
}

class Runner {
 public:
  Runner(const Options& o, CliIo io, Cluster& cluster)
      : o_(o), io_(io), cluster_(cluster),
        handler_(o.config, cluster.pods, cluster.nodes, cluster.services) {}

  // Returns the exit code for one item that passed check_item, or a Failure.
  Parsed<int> run(Item& item) {
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

  void print_explain(const std::vector<std::string>& lines, const std::string& title) {
    if (!o_.explain) {
      return;
    }
    io_.err << "# " << title << "\n";
    for (const std::string& l : lines) {
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

  Parsed<int> run_pod(Item& item) {
    std::string out = o_.output.empty() ? "yaml" : o_.output;
    std::vector<std::string> notes;
    admission::Request req = request("Pod", "", std::move(item.object));
    admission::Response r = handler_.mutate(req, o_.explain ? &notes : nullptr);
    print_explain(notes, item.where + " (Pod " + podpatch_name(req.object) + ")");
    print_warnings(r);
    if (out == "review") {
      io_.out << webhook::dump_json(admission::to_json(r), 2) << "\n";
      return r.allowed ? kExitAdmitted : kExitDenied;
    }
    if (!r.allowed) {
      io_.err << item.where << ": denied: " << r.message << "\n";
      return kExitDenied;
    }
    json patch = r.patch.is_array() ? r.patch : json::array();
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

  Parsed<int> run_cluster(Item& item) {
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
      return Failure{item.where + ": " + pods.error().message};
    }
    std::vector<TableRow> rows;
    json list = {{"apiVersion", "v1"}, {"kind", "List"}, {"items", json::array()}};
    int ordinal = 0;
    for (WorkerPod& w : *pods) {
      std::vector<std::string> notes;
      admission::Request pod_req = request("Pod", "", std::move(w.pod));
      admission::Response r = handler_.mutate(pod_req, o_.explain ? &notes : nullptr);
      ++ordinal;
      print_explain(notes, "worker Pod #" + std::to_string(ordinal) + " of group " + w.group);
      print_warnings(r);
      if (!r.allowed) {
        (out == "table" ? io_.out : io_.err)
            << item.where << ": worker Pod #" << ordinal << " of group " << w.group
            << " denied: " << r.message << "\n";
        return kExitDenied;
      }
      json mutated = pod_req.object.patch(r.patch.is_array() ? r.patch : json::array());
      rows.push_back({ordinal, w.group, r.placement ? r.placement->slot : podpatch::Slot{},
                      mutated});
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

  Parsed<int> run_review(Item& item) {
    std::string text = webhook::dump_json(item.object);
    admission::Decoded d = admission::decode(text);
    admission::Response r;
    if (!d.request) {  // check_item made sure the uid is readable
      r = admission::denied(d.uid, d.error, "malformed_request");
    } else {
      std::vector<std::string> notes;
      bool validate = d.request->kind == "RayCluster";
      r = validate ? handler_.validate(*d.request)
                   : handler_.mutate(*d.request, o_.explain ? &notes : nullptr);
      print_explain(notes, item.where);
    }
    print_warnings(r);
    io_.out << webhook::dump_json(admission::to_json(r), 2) << "\n";
    return r.allowed ? kExitAdmitted : kExitDenied;
  }

  static std::string podpatch_name(const json& pod) {
    const json* md = member(pod, "metadata");
    std::string n(string_member(md, "name").value_or(""));
    return n.empty() ? std::string(string_member(md, "generateName").value_or("(no name)")) : n;
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

}  // namespace

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

Flags:
  --existing FILE            Pods (and Nodes, headless Services) already in the cluster, as a
                             v1 List or multi-document YAML; repeatable; before or after the
                             inputs. Pods feed legacy placement (M3.3), Nodes subslice
                             placement (M4, V3), Services the headless Service name.
  --kuberay-indexing=on|off  RayCluster expansion with KubeRay's index labels (on, KubeRay >=
                             1.6 default) or without them (off: KubeRay <= 1.4, or the
                             RayMultiHostIndexing gate off; Pods are placed by legacy
                             placement and only the Pods missing from --existing are created)
  --explain                  print on stderr how each value was derived
                             (topology -> chips -> hosts -> placement -> names -> addresses)
  -n, --namespace NS         namespace of objects that name none (default: default)
  --kuberay-version V        KubeRay version (default 1.6); 1.3 or older names the headless
                             Service CheckName(<cluster>-headless-worker-svc)
  --tpu-process-port-base N  first slicebuilder/TPU process port (default 8471)
  --megascale-port-base N    MEGASCALE_PORT base (default 8081)
  --device-plugin-port N     TPU device plugin port in TPU_DEVICE_PLUGIN_ADDR (default 2112)
  -h, --help                 this text
  --version                  print the version

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
  Parsed<Options> parsed = parse_flags(args);
  if (auto* f = std::get_if<Failure>(&parsed)) {
    if (f->line == "__help__") {
      io.out << usage();
      return kExitAdmitted;
    }
    if (f->line == "__version__") {
      io.out << "webhook-dryrun " << WEBHOOK_VERSION << "\n";
      return kExitAdmitted;
    }
    io.err << "webhook-dryrun: " << f->line << "\n";
    return kExitUsage;
  }
  const Options& o = std::get<Options>(parsed);
  Cluster cluster;
  if (auto f = load_existing(o, io.in, cluster)) {
    io.err << "webhook-dryrun: " << f->line << "\n";
    return kExitUsage;
  }
  // Read and check every input first: an unreadable one stops the run before any output.
  std::vector<Item> all;
  for (const std::string& path : o.files) {
    Parsed<std::vector<Item>> items = load_items(path, io.in);
    if (auto* f = std::get_if<Failure>(&items)) {
      io.err << "webhook-dryrun: " << f->line << "\n";
      return kExitUsage;
    }
    for (Item& item : std::get<std::vector<Item>>(items)) {
      if (std::optional<Failure> f = check_item(item, o)) {
        io.err << "webhook-dryrun: " << f->line << "\n";
        return kExitUsage;
      }
      all.push_back(std::move(item));
    }
  }
  Runner runner(o, io, cluster);
  int code = kExitAdmitted;
  for (Item& item : all) {
    Parsed<int> result = runner.run(item);
    if (auto* f = std::get_if<Failure>(&result)) {
      io.err << "webhook-dryrun: " << f->line << "\n";
      return kExitUsage;
    }
    code = std::max(code, std::get<int>(result));
  }
  return code;
}

}  // namespace dryrun
