// The Handler reserves the memory the answer for a large slice takes before building it
// (admission::answer_memory_bound, webhook::memory::reserve), and denies with 503 server_busy
// when the server cannot grant it; an ordinary slice's answer reserves nothing.
#include <catch2/catch.hpp>
#include <cstddef>
#include <string>
#include <vector>

#include "admission/handler.h"
#include "base/memory/reserve.h"
#include "support/test_support.h"

using testing::json;

namespace {

constexpr std::size_t kGrantedBytes = std::size_t{64} << 10;

// A genuine v6e worker Pod (4 chips per host, placed by KubeRay's labels) of `topology`.
json v6e_worker(const std::string& topology) {
  json pod = testing::read_json(testing::fixture_path("pods/v6e-16-multihost-worker-indexed.json"));
  pod["spec"]["nodeSelector"]["cloud.google.com/gke-tpu-topology"] = topology;
  return pod;
}

// A reserver that records what it is asked for, and grants it when `grant` is set.
struct Recorder {
  bool grant = true;
  std::vector<std::size_t> asked;
};

bool record(void* context, std::size_t bytes) {
  auto* r = static_cast<Recorder*>(context);
  r->asked.push_back(bytes);
  return r->grant;
}

}  // namespace

TEST_CASE("a large slice's answer is reserved before it is built", "[admission][reserve]") {
  testing::Harness h;
  // 96x96: 9216 chips on 2304 hosts, every host's address in the env of each TPU container.
  const admission::Request request = testing::pod_request(v6e_worker("96x96"));

  SECTION("granted: one reservation of more than the base grant, then the normal patch") {
    admission::Response unreserved = h.handler.mutate(request);  // no reserver: always granted
    REQUIRE(unreserved.allowed);
    REQUIRE(admission::has_patch(unreserved));
    Recorder recorder;
    admission::Response out;
    {
      webhook::memory::ScopedReserver scope(&record, &recorder);
      out = h.handler.mutate(request);
    }
    REQUIRE(recorder.asked.size() == 1);
    CHECK(recorder.asked[0] > kGrantedBytes);
    // The answer itself (its encoded text) is part of what was reserved.
    CHECK(recorder.asked[0] > admission::encode(out).size());
    CHECK(out.allowed);
    CHECK(out.patch == unreserved.patch);
    CHECK(out.warnings == unreserved.warnings);
  }

  SECTION("refused: 503 server_busy saying what is wrong and what to do") {
    Recorder recorder;
    recorder.grant = false;
    admission::Response out;
    {
      webhook::memory::ScopedReserver scope(&record, &recorder);
      out = h.handler.mutate(request);
    }
    REQUIRE(recorder.asked.size() == 1);
    CHECK_FALSE(out.allowed);
    CHECK(out.code == 503);
    CHECK(out.reason == "server_busy");
    CHECK(!admission::has_patch(out));
    const std::size_t mib = (recorder.asked[0] + (std::size_t{1} << 20) - 1) >> 20;
    CHECK_THAT(out.message, Catch::StartsWith("Pod "));
    CHECK_THAT(out.message,
               Catch::Contains("the webhook is busy: the answer for this 9216-chip slice needs "
                               "about " +
                               std::to_string(mib) + " MiB of its in-flight memory budget"));
    CHECK_THAT(out.message, Catch::Contains("retry, or raise --memory-limit"));
  }
}

TEST_CASE("an ordinary slice's answer reserves nothing", "[admission][reserve]") {
  testing::Harness h;
  Recorder recorder;
  recorder.grant = false;  // a reservation would deny the Pod
  admission::Response out;
  {
    webhook::memory::ScopedReserver scope(&record, &recorder);
    out = h.handler.mutate(testing::pod_request(v6e_worker("4x4")));
  }
  CHECK(recorder.asked.empty());
  CHECK(out.allowed);
  CHECK(admission::has_patch(out));
}
