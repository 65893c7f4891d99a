#pragma once
// kubectl-tpu_slice: a kubectl plugin that reads a live RayCluster's TPU slices and says why one
// will not start. cmd/kubectl-tpu-slice/main.cpp only forwards argv, the streams and the
// environment here, so tests run the whole CLI in-process.
//
//   std::ostringstream out, err;
//   int code = tpuslice::run_cli({"check", "my-cluster", "-n", "ray"}, {out, err},
//                                kube::process_env());
//   // 0 healthy, 1 findings, 2 bad usage, an unusable kubeconfig or an API error (one line on
//   // err)

#include <iosfwd>
#include <string>
#include <vector>

#include "kube/config.h"

namespace tpuslice {

struct CliIo {
  std::ostream& out;
  std::ostream& err;
  // Whether stdin is a terminal: an exec credential plugin may then ask the user (its
  // interactiveMode).
  bool stdin_is_terminal = false;
};

inline constexpr int kExitHealthy = 0;
inline constexpr int kExitFindings = 1;
inline constexpr int kExitError = 2;

// `env` supplies KUBECONFIG and HOME (the kubeconfig kubectl would read) and PATH (where an exec
// credential plugin's command is looked up).
int run_cli(const std::vector<std::string>& args, CliIo io, const kube::EnvLookup& env);

std::string usage();

}  // namespace tpuslice
