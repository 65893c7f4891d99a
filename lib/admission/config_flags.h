#pragma once
// The flags of admission::Config, shared by kuberay-tpu-webhook, webhook-dryrun and kubectl
// tpu-slice so all three read them with the same defaults, checks, error wording and help text:
//   --kuberay-version=VERSION  --tpu-process-port-base=N  --megascale-port-base=N
//   --device-plugin-port=N  --legacy-indexing=auto|on|off
//
//   table.add(admission::config_flags(), &Options::config);

#include <vector>

#include "admission/handler.h"
#include "base/flags/flags.h"

namespace admission {

std::vector<webhook::flags::Flag<Config>> config_flags();

// How Pods without KubeRay's index labels are placed (docs/spec.md M3.3): auto and on by legacy
// placement (the server: on when API access is configured, which in a Pod means always), off
// denies them saying how to fix it.
enum class LegacyIndexing { kAuto, kOn, kOff };

// --legacy-indexing=auto|on|off, for both front doors.
std::vector<webhook::flags::Flag<LegacyIndexing>> legacy_indexing_flags();

}  // namespace admission
