// libFuzzer target (a): bytes -> admission::decode -> Handler (/mutate and /validate) -> encode.
// Properties checked on every input: no crash, no sanitizer report, the uid is echoed, the output
// is valid JSON, an allowed patch applies to the object it came from, and /mutate's fast path
// (decode_for_mutation) answers exactly as decode does. Seeds: test/fixtures/admission and
// fuzz/corpus/admission; fuzz/regressions/admission holds inputs that once failed.
//
// Each admission runs on a Handler of its own over a fresh, empty cluster (as webhook-dryrun
// without --existing): placement of a Pod without index labels reserves its slot, so a second
// admission on the same Handler would rightly get the next slot, and the differential check
// compares the two decoders, not two placements.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "admission/handler.h"
#include "admission/review.h"
#include "kube/listed_cluster.h"

namespace {

// What one admission gave: the decoded request (or its error), the answer and its wire text.
struct Answer {
  webhook::Result<admission::Request> req;
  admission::Response response;
  std::string encoded;
};

// One admission on a fresh Handler: the decoded request answered as /mutate or /validate, or the
// decode error as a denial for uid_if_undecoded.
template <class Decode>
Answer admit(std::string_view body, bool mutate, const std::string& uid_if_undecoded,
             Decode decode) {
  kube::ListedCluster cluster;
  admission::Handler handler({}, cluster.pods(), cluster.nodes(), cluster.services());
  webhook::Result<admission::Request> req = decode(body);
  admission::Response r = !req     ? admission::denied(uid_if_undecoded, req.error())
                          : mutate ? handler.mutate(*req)
                                   : handler.validate(*req);
  std::string encoded = admission::encode(r);
  return {std::move(req), std::move(r), std::move(encoded)};
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view body(reinterpret_cast<const char*>(data), size);
  for (bool mutate : {true, false}) {
    std::string undecoded_uid = admission::request_uid(body);
    Answer a =
        admit(body, mutate, undecoded_uid, [](std::string_view b) { return admission::decode(b); });
    std::string uid = a.req ? a.req->uid : undecoded_uid;
    nlohmann::json parsed = nlohmann::json::parse(a.encoded);  // throws (and aborts) if invalid
    if (parsed["response"]["uid"] != uid) {
      __builtin_trap();
    }
    if (mutate) {
      Answer fast = admit(body, true, uid,
                          [](std::string_view b) { return admission::decode_for_mutation(b); });
      if (fast.encoded != a.encoded) {
        __builtin_trap();  // the two decoders disagree on the same input
      }
    }
    if (a.req && a.response.allowed && admission::has_patch(a.response)) {
      (void)a.req->object.patch(
          admission::patch_ops(a.response));  // throws (and aborts) if the patch does not apply
    }
  }
  return 0;
}
