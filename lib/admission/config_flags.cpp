#include "admission/config_flags.h"

#include <cstdint>
#include <optional>
#include <string>

#include "base/text/numbers.h"
#include "topology/names.h"

namespace admission {
namespace {

using webhook::flags::Flag;

Flag<Config> port_flag(std::string name, int topology::Ports::*field, std::string help) {
  int fallback = Config{}.ports.*field;
  return {.name = std::move(name),
          .value_name = "N",
          .help = std::move(help) + " (default " + std::to_string(fallback) + ")",
          .apply = [field](Config& c, std::string_view v) -> webhook::Status {
            std::optional<std::int64_t> n = webhook::parse_non_negative(v, 65535);
            if (!n || *n == 0) {
              return webhook::invalid_argument("expected a port number from 1 to 65535");
            }
            c.ports.*field = static_cast<int>(*n);
            return {};
          }};
}

Flag<Config> kuberay_version_flag() {
  return {.name = "kuberay-version",
          .value_name = "VERSION",
          .help = "KubeRay operator version (default " + Config{}.kuberay.text() +
                  "); 1.3 or older names the headless Service <cluster>-headless-worker-svc",
          .apply = [](Config& c, std::string_view v) -> webhook::Status {
            webhook::Result<topology::KubeRayVersion> version = topology::parse_kuberay_version(v);
            if (!version) {
              return version.error();
            }
            c.kuberay = *version;
            return {};
          }};
}

}  // namespace

std::vector<Flag<LegacyIndexing>> legacy_indexing_flags() {
  return {{.name = "legacy-indexing",
           .value_name = "auto|on|off",
           .help = "place Pods without KubeRay's index labels (KubeRay 1.4, or 1.5 without "
                   "RayMultiHostIndexing) from the cluster's Pods and slot claims shared by every "
                   "replica (needs API access; auto, the default: on when API access is "
                   "configured, which in a Pod means always)",
           .apply = [](LegacyIndexing& l, std::string_view v) -> webhook::Status {
             if (v == "auto") {
               l = LegacyIndexing::kAuto;
             } else if (v == "on") {
               l = LegacyIndexing::kOn;
             } else if (v == "off") {
               l = LegacyIndexing::kOff;
             } else {
               return webhook::invalid_argument("expected auto, on or off");
             }
             return {};
           }}};
}

std::vector<Flag<Config>> config_flags() {
  return {
      kuberay_version_flag(),
      port_flag("tpu-process-port-base", &topology::Ports::tpu_process_base,
                "first slicebuilder/TPU process port"),
      port_flag("megascale-port-base", &topology::Ports::megascale_base, "MEGASCALE_PORT base"),
      port_flag("device-plugin-port", &topology::Ports::device_plugin,
                "TPU device plugin port in TPU_DEVICE_PLUGIN_ADDR"),
  };
}

}  // namespace admission
