#include "tpuslice/cli.h"

#include <charconv>
#include <ostream>

#include "admission/config_flags.h"
#include "base/flags/flags.h"
#include "base/json/access.h"
#include "base/text/text.h"
#include "dryrun/output.h"
#include "kube/api_client.h"
#include "tpuslice/inspect.h"
#include "tpuslice/render.h"
#include "tpuslice/snapshot.h"

namespace tpuslice {
namespace {

using webhook::flags::FlagTable;
using webhook::flags::Kind;

constexpr const char* kProgram = "kubectl-tpu_slice";

struct Options {
  std::string command;  // status or check
  std::string cluster;
  std::string kubeconfig;
  std::string context;
  std::string ns;
  bool all_namespaces = false;
  std::string output = "table";
  std::string webhook_namespace = "ray-system";
  int timeout_seconds = 20;
  admission::Config config;
  bool help = false;
  bool version = false;
};

webhook::Status set_output(Options& o, std::string_view v) {
  if (v != "table" && v != "json" && v != "yaml") {
    return webhook::invalid_argument("expected table, json or yaml");
  }
  o.output = std::string(v);
  return {};
}

webhook::Status set_timeout(Options& o, std::string_view v) {
  std::string_view digits = v.ends_with('s') ? v.substr(0, v.size() - 1) : v;
  int n = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (ec != std::errc() || end != digits.data() + digits.size() || n <= 0 || n > 3600) {
    return webhook::invalid_argument("expected whole seconds between 1 and 3600, such as 20s");
  }
  o.timeout_seconds = n;
  return {};
}

webhook::flags::Flag<Options> text_flag(std::string name, std::string alias, std::string value,
                                        std::string help, std::string Options::*field) {
  return {.name = std::move(name),
          .alias = std::move(alias),
          .value_name = std::move(value),
          .help = std::move(help),
          .apply = [field](Options& o, std::string_view v) -> webhook::Status {
            if (v.empty()) {
              return webhook::invalid_argument("expected a value, not an empty one");
            }
            o.*field = std::string(v);
            return {};
          }};
}

webhook::flags::Flag<Options> bool_flag(std::string name, std::string alias, std::string help,
                                        bool Options::*field, bool stops) {
  return {.name = std::move(name),
          .alias = std::move(alias),
          .help = std::move(help),
          .kind = Kind::kBoolean,
          .apply = [field](Options& o, std::string_view v) -> webhook::Status {
            o.*field = v != "false";
            return {};
          },
          .stops = stops};
}

webhook::Status positional(Options& o, std::string_view arg) {
  if (o.command.empty()) {
    if (arg != "status" && arg != "check") {
      return webhook::invalid_argument("unknown command " + webhook::quote(arg) +
                                       "; expected status or check (see --help)");
    }
    o.command = std::string(arg);
  } else if (o.cluster.empty()) {
    o.cluster = std::string(arg);
  } else {
    return webhook::invalid_argument("unexpected argument " + webhook::quote(arg) +
                                     ": give at most one RayCluster (see --help)");
  }
  return {};
}

const FlagTable<Options>& table() {
  static const FlagTable<Options> kFlags = [] {
    FlagTable<Options> t;
    t.section("Flags")
        .add(text_flag("kubeconfig", "", "FILE",
                       "the kubeconfig (default: the files of $KUBECONFIG, merged as kubectl "
                       "does, else ~/.kube/config)",
                       &Options::kubeconfig))
        .add(text_flag("context", "", "NAME", "the kubeconfig context (default: its current one)",
                       &Options::context))
        .add(text_flag("namespace", "n", "NS",
                       "the RayCluster's namespace (default: the context's, else default)",
                       &Options::ns))
        .add(bool_flag("all-namespaces", "A", "every namespace", &Options::all_namespaces, false))
        .add({.name = "output",
              .alias = "o",
              .value_name = "FORMAT",
              .help = "table (default), json or yaml",
              .apply = set_output})
        .add(text_flag("webhook-namespace", "", "NS",
                       "where the webhook's Service kuberay-tpu-webhook is (default ray-system)",
                       &Options::webhook_namespace))
        .add({.name = "request-timeout",
              .value_name = "SECONDS",
              .help = "the limit of each API request (default 20s)",
              .apply = set_timeout})
        .section("As the deployed webhook runs (for what it would set now)")
        .add(admission::config_flags(), &Options::config)
        .section("")
        .add(bool_flag("help", "h", "this text", &Options::help, true))
        .add(bool_flag("version", "", "print the version and exit", &Options::version, true));
    t.positional(positional);
    return t;
  }();
  return kFlags;
}

webhook::Result<kube::ClusterConfig> cluster_config(const Options& o, CliIo io,
                                                    const kube::EnvLookup& env) {
  std::vector<std::string> paths = kube::kubeconfig_paths(o.kubeconfig, env);
  if (paths.empty()) {
    return webhook::invalid_argument(
        "no kubeconfig: pass --kubeconfig FILE or set KUBECONFIG (HOME is not set either)");
  }
  return kube::kubeconfig_config(paths, {.context = o.context,
                                         .allow_insecure = true,
                                         .allow_exec = true,
                                         .search_path = env("PATH").value_or(""),
                                         .stdin_is_terminal = io.stdin_is_terminal});
}

void print(const Options& o, const Report& report, std::ostream& out) {
  bool status = o.command == "status";
  if (o.output == "table") {
    out << (status ? status_table(report) : check_table(report));
    return;
  }
  json value = status ? slices_json(report) : findings_json(report);
  if (o.output == "json") {
    out << webhook::dump_json(value, 2) << "\n";
  } else {
    out << dryrun::to_yaml(value);
  }
}

// A RayCluster named on the command line that neither exists nor has Pods is an error.
bool cluster_missing(const Options& o, const Snapshot& s) {
  return !o.cluster.empty() && s.pods.empty() && s.rayclusters.empty() &&
         !s.unreadable.contains("rayclusters");
}

int run(const Options& o, CliIo io, const kube::EnvLookup& env) {
  webhook::Result<kube::ClusterConfig> config = cluster_config(o, io, env);
  if (!config) {
    io.err << kProgram << ": " << config.error().message << "\n";
    return kExitError;
  }
  webhook::Result<std::unique_ptr<kube::ApiClient>> client = kube::ApiClient::create(*config);
  if (!client) {
    io.err << kProgram << ": " << client.error().message << "\n";
    return kExitError;
  }
  Scope scope;
  scope.ns = !o.ns.empty()                        ? o.ns
             : !config->context_namespace.empty() ? config->context_namespace
                                                  : "default";
  scope.all_namespaces = o.all_namespaces;
  scope.cluster = o.cluster;
  scope.webhook_namespace = o.webhook_namespace;
  scope.timeout = std::chrono::seconds(o.timeout_seconds);
  webhook::Result<Snapshot> snapshot = read_snapshot(**client, scope);
  if (!snapshot) {
    io.err << kProgram << ": " << snapshot.error().message << "\n";
    return kExitError;
  }
  if (cluster_missing(o, *snapshot)) {
    io.err << kProgram << ": RayCluster " << webhook::quote(o.cluster) << " not found in "
           << (o.all_namespaces ? "any namespace" : "namespace " + scope.ns) << "\n";
    return kExitError;
  }
  Report report = inspect(*snapshot, {o.config, o.webhook_namespace});
  print(o, report, io.out);
  return report.findings.empty() ? kExitHealthy : kExitFindings;
}

}  // namespace

std::string usage() {
  return R"(kubectl tpu-slice: read a live RayCluster's TPU slices and say why one will not start.

Usage:
  kubectl tpu-slice status [RAYCLUSTER] [flags]   each TPU worker group's slices, their Pods and
                                                  a verdict per slice (ready, pending, broken)
  kubectl tpu-slice check [RAYCLUSTER] [flags]    findings, each with its evidence and a command
                                                  that fixes it or shows more

It reads (never writes) RayClusters, their worker Pods, Nodes, Services and the webhook's
EndpointSlices with the kubeconfig's credentials, as kubectl reads them: $KUBECONFIG's files
merged, and a token, tokenFile, client certificate or exec credential plugin (such as GKE's
gke-gcloud-auth-plugin, `aws eks get-token` or kubelogin).

)" + webhook::flags::render_help(table().docs(), {.column = 29, .equals = false}) +
         R"(
Exit status: 0 healthy, 1 findings, 2 bad usage, an unusable kubeconfig or an API error (one
line on stderr). A kind the credentials may not read (RBAC 403) is reported as not checked.

Examples:
  kubectl tpu-slice status my-cluster -n ray              # the slices of one RayCluster
  kubectl tpu-slice check my-cluster -n ray               # why one will not start
  kubectl tpu-slice check -A -o json                      # every RayCluster, for a script
  kubectl tpu-slice status --context prod --webhook-namespace ray-system -o yaml
)";
}

int run_cli(const std::vector<std::string>& args, CliIo io, const kube::EnvLookup& env) {
  Options o;
  if (webhook::Status st = table().parse(args, o); !st) {
    io.err << kProgram << ": " << st.error().message << "\n";
    return kExitError;
  }
  if (o.help) {
    io.out << usage();
    return kExitHealthy;
  }
  if (o.version) {
    io.out << kProgram << " " << WEBHOOK_VERSION << "\n";
    return kExitHealthy;
  }
  if (o.command.empty()) {
    io.err << kProgram << ": no command; usage: kubectl tpu-slice status|check [RAYCLUSTER] "
           << "(see --help)\n";
    return kExitError;
  }
  return run(o, io, env);
}

}  // namespace tpuslice
