// libFuzzer target (c): webhook-dryrun's input path — YAML/JSON -> JSON conversion, input-kind
// detection, RayCluster expansion and the Handler — on stdin, as `webhook-dryrun -o json -`.
// Property: never a crash; exit status 0, 1 or 2; status 2 writes nothing on stdout and exactly
// one line on stderr (inputs are checked before anything runs).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "dryrun/cli.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::ostringstream out;
  std::ostringstream err;
  int code = dryrun::run_cli({"-o", "json", "-"}, {in, out, err});
  if (code < 0 || code > 2) {
    __builtin_trap();
  }
  if (code == 2) {
    std::string e = err.str();
    if (std::count(e.begin(), e.end(), '\n') != 1 || !out.str().empty()) {
      __builtin_trap();
    }
  }
  return 0;
}
