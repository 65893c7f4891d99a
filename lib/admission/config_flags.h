#pragma once
// The flags of admission::Config, shared by kuberay-tpu-webhook and webhook-dryrun so both read
// them with the same defaults, checks, error wording and help text:
//   --kuberay-version=VERSION  --tpu-process-port-base=N  --megascale-port-base=N
//   --device-plugin-port=N
//
//   table.add(admission::config_flags(), &Options::config);

#include <vector>

#include "admission/handler.h"
#include "base/flags/flags.h"

namespace admission {

std::vector<webhook::flags::Flag<Config>> config_flags();

}  // namespace admission
