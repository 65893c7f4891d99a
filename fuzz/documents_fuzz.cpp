// libFuzzer target (c): webhook-dryrun's input path — YAML/JSON -> JSON conversion, input-kind
// detection, RayCluster expansion and the Handler — on stdin, as `webhook-dryrun -o json -`.
// Property: never a crash, and the exit status is one the CLI documents (docs/dryrun.md, "Exit
// status and messages"), with its output rule:
//   0 admitted        stdout holds JSON values only (the mutated objects), at least one;
//   1 denied          stdout holds JSON values only, stderr names the denial ("denied");
//   2 unreadable      nothing on stdout and exactly one line on stderr (inputs are checked
//                     before anything runs);
//   3 not sent        stdout holds JSON values only, stderr says "is not sent to the webhook".
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "dryrun/cli.h"

namespace {

// The number of JSON values stdout holds, one after another with whitespace between them, or -1
// when anything else is there.
int json_values(const std::string& text) {
  std::istringstream in(text);
  int count = 0;
  while ((in >> std::ws).peek() != std::char_traits<char>::eof()) {
    nlohmann::json value;
    try {
      in >> value;  // one value, not the whole stream (operator>> does not require the end)
    } catch (const nlohmann::json::exception&) {
      return -1;
    }
    ++count;
  }
  return count;
}

bool has(const std::string& text, const char* what) { return text.find(what) != std::string::npos; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::ostringstream out;
  std::ostringstream err;
  int code = dryrun::run_cli({"-o", "json", "-"}, {in, out, err});
  std::string o = out.str();
  std::string e = err.str();
  switch (code) {
    case 0:
      if (json_values(o) < 1) {
        __builtin_trap();
      }
      break;
    case 1:
      if (json_values(o) < 0 || !has(e, "denied")) {
        __builtin_trap();
      }
      break;
    case 2:
      if (std::count(e.begin(), e.end(), '\n') != 1 || !o.empty()) {
        __builtin_trap();
      }
      break;
    case 3:
      if (json_values(o) < 0 || !has(e, "is not sent to the webhook")) {
        __builtin_trap();
      }
      break;
    default:
      __builtin_trap();
  }
  return 0;
}
