// libFuzzer target (a): bytes -> admission::decode -> Handler (/mutate and /validate) -> encode.
// Properties checked on every input: no crash, no sanitizer report, the uid is echoed, the output
// is valid JSON, an allowed patch applies to the object it came from, and /mutate's fast path
// (decode_for_mutation) answers exactly as decode does. Seeds: test/fixtures/admission and
// fuzz/corpus/admission.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "admission/handler.h"
#include "admission/review.h"
#include "kube/listed_cluster.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  kube::ListedCluster cluster;  // empty, as webhook-dryrun without --existing
  admission::Handler handler({}, cluster.pods(), cluster.nodes(), cluster.services());
  for (bool mutate : {true, false}) {
    webhook::Result<admission::Request> req = admission::decode(body);
    std::string uid = req ? req->uid : admission::request_uid(body);
    admission::Response r = !req     ? admission::denied(uid, req.error())
                            : mutate ? handler.mutate(*req)
                                     : handler.validate(*req);
    std::string out = admission::encode(r);
    nlohmann::json parsed = nlohmann::json::parse(out);  // throws (and aborts) if invalid
    if (parsed["response"]["uid"] != uid) {
      __builtin_trap();
    }
    if (mutate) {
      webhook::Result<admission::Request> fast = admission::decode_for_mutation(body);
      admission::Response f = fast ? handler.mutate(*fast) : admission::denied(uid, fast.error());
      if (admission::encode(f) != out) {
        __builtin_trap();
      }
    }
    if (req && r.allowed && admission::has_patch(r)) {
      (void)req->object.patch(
          admission::patch_ops(r));  // throws (and aborts) if the patch does not apply
    }
  }
  return 0;
}
