// libFuzzer target (c): webhook-dryrun's input path — YAML/JSON -> JSON conversion, input-kind
// detection, RayCluster expansion and the Handler — on stdin, as `webhook-dryrun -o json -`.
// Property: never a crash, and the exit status is one the CLI documents (docs/dryrun.md, "Exit
// status and messages"), with its output rule:
//   0 admitted        stdout holds JSON values only (the mutated objects), at least one;
//   1 denied          stdout holds JSON values only, and the denial is named: on stderr
//                     ("denied"), or, for an AdmissionReview input, which is answered with a
//                     review, in a printed response with allowed false;
//   2 unreadable      nothing on stdout and exactly one line on stderr (inputs are checked
//                     before anything runs);
//   3 not sent        stdout holds JSON values only, stderr says "is not sent to the webhook".
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "dryrun/cli.h"

namespace {

// The JSON values stdout holds, one after another with whitespace between them; false when
// anything else is there.
bool json_values(const std::string& text, std::vector<nlohmann::json>& values) {
  std::istringstream in(text);
  while ((in >> std::ws).peek() != std::char_traits<char>::eof()) {
    nlohmann::json value;
    try {
      in >> value;  // one value, not the whole stream (operator>> does not require the end)
    } catch (const nlohmann::json::exception&) {
      return false;
    }
    values.push_back(std::move(value));
  }
  return true;
}

// Whether a printed value is an AdmissionReview answered allowed: false.
bool denied_review(const std::vector<nlohmann::json>& values) {
  for (const nlohmann::json& v : values) {
    const nlohmann::json* allowed = v.is_object() && v.value("kind", "") == "AdmissionReview" &&
                                            v.contains("response") && v["response"].is_object() &&
                                            v["response"].contains("allowed")
                                        ? &v["response"]["allowed"]
                                        : nullptr;
    if (allowed != nullptr && *allowed == false) {
      return true;
    }
  }
  return false;
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
  std::vector<nlohmann::json> values;
  bool only_json = json_values(o, values);
  switch (code) {
    case 0:
      if (!only_json || values.empty()) {
        __builtin_trap();
      }
      break;
    case 1:
      if (!only_json || (!has(e, "denied") && !denied_review(values))) {
        __builtin_trap();
      }
      break;
    case 2:
      if (std::count(e.begin(), e.end(), '\n') != 1 || !o.empty()) {
        __builtin_trap();
      }
      break;
    case 3:
      if (!only_json || !has(e, "is not sent to the webhook")) {
        __builtin_trap();
      }
      break;
    default:
      __builtin_trap();
  }
  return 0;
}
