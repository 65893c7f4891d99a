#include "dryrun/cli.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>

#include "admission/config_flags.h"
#include "admission/handler.h"
#include "admission/review.h"
#include "base/flags/flags.h"
#include "base/json/access.h"
#include "base/text/text.h"
#include "dryrun/documents.h"
#include "dryrun/expand.h"
#include "dryrun/output.h"
#include "kube/listed_cluster.h"
#include "kube/slot_allocators.h"
#include "podpatch/keys.h"
#include "podpatch/pod_view.h"
#include "podpatch/validate.h"

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
  admission::LegacyIndexing legacy = admission::LegacyIndexing::kAuto;
  // The webhook configurations' namespaceSelector leaves these out (with kube-system and
  // kube-node-lease, which it always leaves out).
  std::vector<std::string> excluded_namespaces;
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
        .add({.name = "excluded-namespace",
              .value_name = "NS",
              .help = "a namespace the webhook configurations leave out (Helm value "
                      "tpuWebhook.webhook.extraExcludedNamespaces); repeatable. kube-system and "
                      "kube-node-lease always are. Objects there are reported as not sent to "
                      "the webhook (exit 3).",
              .apply = [](Options& o, std::string_view v) -> webhook::Status {
                if (v.empty()) {
                  return invalid_argument("expected a namespace name, not an empty one");
                }
                o.excluded_namespaces.emplace_back(v);
                return {};
              }})
        .add(admission::legacy_indexing_flags(), &Options::legacy)
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
  if (o.legacy == admission::LegacyIndexing::kOff && !o.existing.empty()) {
    return invalid_argument(
        "--existing describes what the webhook reads through the Kubernetes API, which a "
        "webhook with --legacy-indexing=off goes without (it sees no Pods, Nodes or Services); "
        "drop one of the two");
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
// an unsupported kind, an output format that does not apply, a ray.io object or worker group
// without a name, an AdmissionReview without a readable uid.
webhook::Status check_item(const Item& item, const Options& o) {
  if (item.kind == "Pod") {
    return {};
  }
  if (const podpatch::RayKind* kind = podpatch::find_ray_kind(item.kind)) {
    if (o.output == "patch") {
      return invalid_argument(item.where + ": -o patch applies to Pods; for a " + item.kind +
                              " use table, yaml, json or review");
    }
    webhook::Result<podpatch::RayObject> ray =
        podpatch::read_ray_object(item.object, kind->kind, o.default_namespace);
    if (!ray) {
      return invalid_argument(item.where + ": " + ray.error().message);
    }
    if (ray->name.empty()) {
      return invalid_argument(item.where + ": the " + item.kind + " has no metadata.name");
    }
    const json* groups = ray->spec != nullptr ? member(*ray->spec, "workerGroupSpecs") : nullptr;
    if (groups != nullptr && groups->is_array()) {
      for (std::size_t i = 0; i < groups->size(); ++i) {
        if (string_member(&(*groups)[i], "groupName").value_or("").empty()) {
          return invalid_argument(item.where + ": " + std::string(kind->spec_field) +
                                  ".workerGroupSpecs[" + std::to_string(i) + "] has no groupName");
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
      " is not supported; webhook-dryrun reads Pod, RayCluster, RayJob, RayService, "
      "AdmissionReview or a List of them");
}

// Exit codes combine to the most telling: a denial, else an object the webhook never sees, else
// admitted.
int worst(int a, int b) {
  auto rank = [](int code) { return code == kExitDenied ? 2 : code == kExitNotSent ? 1 : 0; };
  return rank(b) > rank(a) ? b : a;
}

// The webhook configurations' selectors (deploy/manifests/webhooks.yaml, the chart's
// templates/webhook.yaml): why kube-apiserver would not send this object, or "".
class Selectors {
 public:
  explicit Selectors(const Options& o) : excluded_(o.excluded_namespaces) {
    excluded_.insert(excluded_.begin(), {"kube-system", "kube-node-lease"});
  }

  std::string namespace_excluded(std::string_view ns) const {
    if (std::find(excluded_.begin(), excluded_.end(), ns) == excluded_.end()) {
      return {};
    }
    return "namespace " + webhook::quote_bounded(ns) +
           " is left out by the webhook configurations' namespaceSelector";
  }

  // The MutatingWebhookConfiguration's objectSelector and namespaceSelector.
  std::string pod_not_sent(const json& pod, std::string_view ns) const {
    if (std::string why = namespace_excluded(ns); !why.empty()) {
      return why;
    }
    const json* labels = member(pod, "metadata", "labels");
    for (auto [key, want] :
         {std::pair{podpatch::keys::kAppNameLabel, podpatch::keys::kAppNameValue},
          std::pair{podpatch::keys::kNodeTypeLabel, std::string_view("worker")}}) {
      std::optional<std::string_view> has = string_member(labels, key);
      if (has != want) {
        return "the MutatingWebhookConfiguration's objectSelector needs the label " +
               std::string(key) + "=" + std::string(want) + " and the Pod has " +
               (has ? std::string(key) + "=" + webhook::quote_bounded(*has) : "none");
      }
    }
    return {};
  }

 private:
  std::vector<std::string> excluded_;
};

// A file that holds a large output until it is known to be complete: created in $TMPDIR (or
// /tmp) and unlinked at once, so nothing is left behind whatever happens.
class SpillFile {
 public:
  static webhook::Result<SpillFile> create() {
    const char* dir = std::getenv("TMPDIR");
    std::string path =
        std::string(dir != nullptr && *dir != '\0' ? dir : "/tmp") + "/webhook-dryrun-XXXXXX";
    int fd = mkstemp(path.data());
    if (fd < 0) {
      return webhook::invalid_argument("cannot create a temporary file in " + path + ": " +
                                       std::strerror(errno) +
                                       "; set TMPDIR to a writable "
                                       "directory");
    }
    SpillFile f;
    f.file_ = std::make_unique<std::fstream>(
        path, std::ios_base::in | std::ios_base::out | std::ios_base::trunc);
    ::close(fd);
    std::remove(path.c_str());
    return f;
  }
  std::ostream& stream() { return *file_; }
  // Everything written, to `out`.
  void copy_to(std::ostream& out) {
    file_->flush();
    file_->seekg(0);
    out << file_->rdbuf();
  }

 private:
  SpillFile() = default;
  std::unique_ptr<std::fstream> file_;
};

class Runner {
 public:
  Runner(const Options& o, CliIo io, Cluster& cluster)
      : o_(o),
        io_(io),
        cluster_(cluster),
        selectors_(o),
        handler_(o.config,
                 o.legacy == admission::LegacyIndexing::kOff
                     ? static_cast<podpatch::SlotAllocator&>(no_legacy_)
                     : cluster.state.pods(),
                 cluster.state.nodes(), cluster.state.services()) {}

  // Returns the exit code for one item that passed check_item, or an input problem.
  webhook::Result<int> run(Item& item) {
    warned_.clear();  // each warning once per input object
    if (item.kind == "Pod") {
      return run_pod(item);
    }
    if (item.kind == "AdmissionReview") {
      return run_review(item);
    }
    return run_ray_object(item);
  }

  // What is printed once all inputs ran: the one table of every Pod input, the patches of
  // several Pods labelled by Pod.
  void finish() {
    if (!pod_rows_.empty()) {
      io_.out << format_table(pod_rows_);
    }
    if (patches_.size() == 1) {
      io_.out << webhook::dump_json(patches_[0]["patch"], 2) << "\n";
    } else if (!patches_.empty()) {
      io_.out << webhook::dump_json(patches_, 2) << "\n";
    }
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

  // Each warning once per input object: a worker Pod's advice that validation already gave
  // about its group (the same sentence after "<object>: worker group ...: ") is not repeated.
  void print_warnings(const admission::Response& r) {
    for (const std::string& w : r.warnings) {
      bool given = std::any_of(warned_.begin(), warned_.end(),
                               [&](const std::string& seen) { return seen.ends_with(w); });
      if (!given) {
        warned_.push_back(w);
        io_.err << "Warning: " << w << "\n";
      }
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

  static std::string pod_id(const admission::Request& req) {
    return req.ns + "/" + pod_display_name(req.object);
  }

  webhook::Result<int> run_pod(Item& item) {
    std::string out = o_.output.empty() ? "yaml" : o_.output;
    admission::Request req = request("Pod", "", std::move(item.object));
    if (std::string why = selectors_.pod_not_sent(req.object, req.ns); !why.empty()) {
      io_.err << item.where << ": Pod " << webhook::quote_bounded(pod_id(req))
              << " is not sent to the webhook: " << why
              << "; kube-apiserver creates it unchanged\n";
      return kExitNotSent;
    }
    admission::PodDecision decision;
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
      patches_.push_back({{"pod", pod_id(req)}, {"patch", std::move(patch)}});
      return kExitAdmitted;
    }
    json mutated = req.object.patch(patch);
    if (out == "table") {
      pod_rows_.push_back({static_cast<int>(pod_rows_.size()) + 1,
                           std::string(podpatch_group(mutated)),
                           r.placement ? r.placement->slot : podpatch::Slot{}, mutated});
    } else {
      print_object(mutated, out);
    }
    return kExitAdmitted;
  }

  // A RayCluster, RayJob or RayService: validated as the server validates it, then the
  // RayCluster KubeRay creates for it expanded into its worker Pods, each mutated.
  webhook::Result<int> run_ray_object(Item& item) {
    std::string out = o_.output.empty() ? "table" : o_.output;
    std::ostream& verdict_out = out == "table" ? io_.out : io_.err;
    admission::Request req = request(item.kind, "ray.io", item.object);
    webhook::Result<podpatch::RayObject> ray =
        podpatch::read_ray_object(item.object, item.kind, o_.default_namespace);
    if (!ray) {  // check_item read it already
      return invalid_argument(item.where + ": " + ray.error().message);
    }
    std::string id = ray->display();
    if (std::string why = selectors_.namespace_excluded(ray->ns); !why.empty()) {
      io_.err << item.where << ": " << id << " is not sent to the webhook: " << why << "\n";
      return kExitNotSent;
    }
    admission::Response verdict = handler_.validate(req);
    print_warnings(verdict);
    if (out == "review") {
      io_.out << webhook::dump_json(admission::to_json(verdict), 2) << "\n";
      return verdict.allowed ? kExitAdmitted : kExitDenied;
    }
    if (!verdict.allowed) {
      verdict_out << item.where << ": denied: " << verdict.message << "\n";
      return kExitDenied;
    }
    if (ray->spec == nullptr) {
      if (out == "table") {
        io_.out << id << ": admitted; it runs on the existing RayCluster "
                << webhook::quote_bounded(ray->existing_cluster)
                << " (spec.clusterSelector), so KubeRay creates no Pods for it\n";
      } else {
        print_object({{"apiVersion", "v1"}, {"kind", "List"}, {"items", json::array()}}, out);
      }
      return kExitAdmitted;
    }
    return run_workers(item, *ray, out);
  }

  // The line naming the object, its generated RayCluster and headless Service, then the slice
  // table of the Pods the webhook mutated.
  void print_cluster_table(const podpatch::RayObject& ray, const std::vector<RowCells>& rows,
                           std::size_t pods, int not_sent, const std::string& subdomain) {
    io_.out << ray.display() << ": admitted";
    if (ray.generated_name) {
      io_.out << "; KubeRay creates RayCluster " << ray.cluster << " (\""
              << podpatch::kGeneratedSuffix
              << "\" stands for the 5 random characters KubeRay picks)";
    }
    if (!subdomain.empty()) {
      io_.out << "; peers resolve through headless Service " << subdomain;
    }
    io_.out << "; " << pods << " worker Pod(s)"
            << (o_.indexing ? "" : " placed without KubeRay's index labels");
    if (not_sent > 0) {
      io_.out << ", " << not_sent << " of them not sent to the webhook";
    }
    io_.out << "\n";
    if (!rows.empty()) {
      io_.out << format_table(rows);
    }
  }

  // What run_workers has seen so far of one RayCluster's worker Pods.
  struct WorkerRun {
    WorkerRun(const Item& i, std::ostream& v) : item(i), verdict_out(v) {}

    const Item& item;
    std::ostream& verdict_out;       // where a Pod's verdict goes
    std::vector<RowCells> rows;      // the table's cells, one Pod each
    std::optional<SpillFile> spill;  // yaml and json: the List, spilled
    std::optional<ListWriter> list;
    int ordinal = 0;
    int code = kExitAdmitted;
    int not_sent = 0;
    bool denied = false;
    std::size_t pods = 0;
    std::string subdomain;
  };

  // The RayCluster of `ray` expanded into its worker Pods, each through the webhook, printed as
  // `out` says. One Pod at a time: the table keeps each Pod's cells, yaml and json write each
  // Pod to a spill file (so that a denial part way prints no partial List) copied out at the end.
  webhook::Result<int> run_workers(const Item& item, const podpatch::RayObject& ray,
                                   const std::string& out) {
    ExpandOptions eo;
    eo.indexing = o_.indexing;
    eo.default_namespace = o_.default_namespace;
    eo.existing = cluster_.pods_per_group;
    WorkerRun run(item, out == "table" ? io_.out : io_.err);
    if (out != "table") {
      webhook::Result<SpillFile> file = SpillFile::create();
      if (!file) {
        return file.error();
      }
      run.spill.emplace(std::move(file).value());
      run.list.emplace(run.spill->stream(), out == "json");
    }
    webhook::Status expanded =
        for_each_worker(podpatch::generated_raycluster(ray), eo, [&](WorkerPod&& w) {
          ++run.pods;
          if (!run.denied) {
            admit_worker(run, std::move(w));
          }
          return webhook::Status{};
        });
    if (!expanded) {
      return invalid_argument(item.where + ": " + expanded.error().message);
    }
    if (run.denied) {
      return kExitDenied;
    }
    if (out == "table") {
      print_cluster_table(ray, run.rows, run.pods, run.not_sent, run.subdomain);
    } else {
      if (printed_yaml_ && out != "json") {
        io_.out << "---\n";
      }
      run.list->end();
      run.spill->copy_to(io_.out);
      printed_yaml_ = printed_yaml_ || out != "json";
    }
    return run.code;
  }

  // One worker Pod through the webhook (unless its namespace or labels keep it from being sent),
  // its verdict printed and the mutated Pod kept for the output.
  void admit_worker(WorkerRun& run, WorkerPod&& w) {
    admission::Request pod_req = request("Pod", "", std::move(w.pod));
    std::string title = "worker Pod #" + std::to_string(++run.ordinal) + " of group " + w.group;
    if (std::string why = selectors_.pod_not_sent(pod_req.object, pod_req.ns); !why.empty()) {
      run.verdict_out << run.item.where << ": " << title << " is not sent to the webhook: " << why
                      << "; kube-apiserver creates it unchanged\n";
      run.code = worst(run.code, kExitNotSent);
      ++run.not_sent;
      if (run.list) {
        run.list->item(pod_req.object);
      }
      return;
    }
    admission::PodDecision decision;
    decision.record_mutated = o_.explain;  // only --explain shows it
    admission::Response r = handler_.mutate(pod_req, &decision);
    print_explain(decision, title);
    print_warnings(r);
    if (!r.allowed) {
      run.verdict_out << run.item.where << ": " << title << " denied: " << r.message << "\n";
      run.denied = true;
      return;
    }
    json mutated =
        pod_req.object.patch(admission::has_patch(r) ? admission::patch_ops(r) : json::array());
    if (run.subdomain.empty()) {
      run.subdomain = string_member(member(mutated, "spec"), "subdomain").value_or("");
    }
    if (run.list) {
      run.list->item(mutated);
    } else {
      run.rows.push_back(row_cells(
          {run.ordinal, w.group, r.placement ? r.placement->slot : podpatch::Slot{}, mutated}));
    }
  }

  webhook::Result<int> run_review(Item& item) {
    std::string text = webhook::dump_json(item.object);
    webhook::Result<admission::Request> req = admission::decode(text);
    admission::Response r;
    admission::PodDecision decision;
    if (!req) {  // check_item made sure the uid is readable
      r = admission::denied(admission::request_uid(text), req.error());
    } else if (req->kind == "Pod" && req->group.empty()) {
      r = handler_.mutate(*req, &decision);
      print_explain(decision, item.where);
    } else {
      r = handler_.validate(*req);  // ray.io kinds; any other is refused as /validate refuses it
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
  Selectors selectors_;
  kube::DisabledSlotAllocator no_legacy_;
  admission::Handler handler_;
  int uid_ = 0;
  bool printed_yaml_ = false;
  std::vector<std::string> warned_;
  std::vector<TableRow> pod_rows_;
  json patches_ = json::array();
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
  RayCluster       validates it (V1-V5), expands every worker group into the Pods KubeRay
                   would create (replicas x numOfHosts, in creation order), runs each through
                   the webhook and prints the slice table
  RayJob,          the same for the RayCluster KubeRay creates from spec.rayClusterSpec
  RayService       (spec.rayClusterConfig), named <name>-xxxxx: "xxxxx" stands for the 5
                   random characters KubeRay picks
  AdmissionReview  prints the AdmissionReview response the server would send

A Pod or object the webhook configurations' selectors would not send to the webhook (a Pod
without app.kubernetes.io/name=kuberay and ray.io/node-type=worker, a namespace they leave
out by name) is reported as such, exit 3: on stderr, except for the worker Pods of a
RayCluster, RayJob or RayService shown as a table (their default), reported on stdout above it.
Not modelled: the namespace label kuberay-tpu-webhook.ray.io/ignore and the tpu-pods-only
matchCondition (a Pod without google.com/tpu is admitted unchanged).

Output (-o, --output):
  Pod:             yaml (default) | json | patch (the RFC 6902 JSON Patch; [] when nothing
                   changes; for several Pods a JSON array of {"pod": "NS/NAME", "patch": [...]})
                   | review | table (one table for all Pod inputs)
  RayCluster, RayJob, RayService:
                   table (default: pod, group, replica, host, TPU_WORKER_ID, hostname,
                   TPU_NAME, TORCH_TPU_TOPOLOGY, first peer address, and MEGASCALE slice/count
                   when multi-slice) | yaml | json (the mutated Pods as a v1 List) | review (the
                   validation response)

)" + webhook::flags::render_help(table().docs(), {.column = 29, .equals = false}) +
         R"(
Exit status: 0 admitted, 1 denied (the reason on stdout, instead of the table, for a
RayCluster, RayJob or RayService shown as a table; else on stderr),
2 bad usage or unreadable input (one line on stderr naming the file and the problem),
3 not sent to the webhook (and nothing denied).
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
    code = worst(code, *result);
  }
  runner.finish();
  return code;
}

}  // namespace dryrun
