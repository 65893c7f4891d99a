// libFuzzer target (a): bytes -> admission::decode -> Handler (/mutate and /validate) -> encode.
// Properties checked on every input: no crash, no sanitizer report, the uid is echoed, the output
// is valid JSON, and an allowed patch applies to the object it came from.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "admission/handler.h"
#include "admission/review.h"
#include "admission/static_sources.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  admission::StaticPodSource pods;
  admission::StaticNodeSource nodes;
  admission::StaticServiceSource services;
  admission::Handler handler({}, pods, nodes, services);
  for (admission::Endpoint endpoint : {admission::Endpoint::kMutate, admission::Endpoint::kValidate}) {
    admission::Decoded d = admission::decode(body);
    admission::Response r = d.request ? handler.handle(endpoint, *d.request)
                                      : admission::denied(d.uid, d.error, "malformed_request");
    std::string out = admission::encode(r);
    nlohmann::json parsed = nlohmann::json::parse(out);  // throws (and aborts) if invalid
    if (parsed["response"]["uid"] != d.uid) {
      __builtin_trap();
    }
    if (d.request && r.allowed && r.patch.is_array() && !r.patch.empty()) {
      (void)d.request->object.patch(r.patch);  // throws (and aborts) if the patch does not apply
    }
  }
  return 0;
}
