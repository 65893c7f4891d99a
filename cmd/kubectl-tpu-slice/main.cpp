// kubectl-tpu_slice: `kubectl tpu-slice status|check [RAYCLUSTER]` (lib/tpuslice/cli.h).
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "tpuslice/cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return tpuslice::run_cli(args, {std::cout, std::cerr, ::isatty(STDIN_FILENO) == 1},
                           kube::process_env());
}
