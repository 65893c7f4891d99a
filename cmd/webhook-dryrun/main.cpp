// webhook-dryrun: argv and the standard streams in, exit code out. Everything else is in
// lib/dryrun, where the tests link it.
#include <iostream>
#include <string>
#include <vector>

#include "dryrun/cli.h"

int main(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  std::vector<std::string> args(argv + 1, argv + argc);
  return dryrun::run_cli(args, {std::cin, std::cout, std::cerr});
}
