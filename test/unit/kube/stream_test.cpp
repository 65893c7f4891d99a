#include "kube/stream.h"

#include <catch2/catch.hpp>
#include <random>

using nlohmann::json;

namespace {

// Feeds `body` in pieces of `piece` bytes (0: byte by byte ... 1 at a time).
webhook::Status scan_in_pieces(kube::ListScanner& scan, std::string_view body, std::size_t piece) {
  for (std::size_t i = 0; i < body.size(); i += piece) {
    if (webhook::Status s = scan.feed(body.substr(i, piece)); !s) {
      return s;
    }
  }
  return scan.finish();
}

}  // namespace

TEST_CASE("ListScanner cuts each item out of the stream, whatever the chunking") {
  std::string body =
      R"({"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"42",)"
      R"("continue":"abc"},"items":[{"metadata":{"name":"a","annotations":)"
      R"({"x":"}]{[\"\\"}}},{"metadata":{"name":"b"}} , {"metadata":{"name":"c"}}]})";
  auto piece = GENERATE(std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{4096});
  CAPTURE(piece);
  std::vector<std::string> names;
  kube::ListScanner scan(1 << 20, [&](json item) {
    names.push_back(item["metadata"]["name"]);
    return webhook::Status();
  });
  REQUIRE(scan_in_pieces(scan, body, piece).ok());
  CHECK(names == std::vector<std::string>{"a", "b", "c"});
  CHECK(scan.items() == 3);
  CHECK(scan.resource_version() == "42");
  CHECK(scan.continue_token() == "abc");
}

TEST_CASE("ListScanner reads metadata after the items and empty or null item lists") {
  for (std::string body :
       {R"({"items":[],"metadata":{"resourceVersion":"7"}})",
        R"({"items":null,"metadata":{"resourceVersion":"7"}})",
        " {\n \"metadata\" : {\"resourceVersion\":\"7\"} ,\n\"items\": [ ] }\n"}) {
    CAPTURE(body);
    kube::ListScanner scan(1024, [](json) { return webhook::Status(); });
    REQUIRE(scan_in_pieces(scan, body, 3).ok());
    CHECK(scan.items() == 0);
    CHECK(scan.resource_version() == "7");
  }
}

TEST_CASE("ListScanner ignores nested keys named items or metadata") {
  std::string body = R"({"metadata":{"resourceVersion":"9"},"items":[{"metadata":{"name":"a"},)"
                     R"("spec":{"items":[1,2],"metadata":{"resourceVersion":"1"}}}]})";
  int n = 0;
  kube::ListScanner scan(1024, [&](json item) {
    ++n;
    CHECK(item["spec"]["items"] == json::array({1, 2}));
    return webhook::Status();
  });
  REQUIRE(scan_in_pieces(scan, body, 5).ok());
  CHECK(n == 1);
  CHECK(scan.resource_version() == "9");
}

TEST_CASE("ListScanner refuses an item over the bound without buffering it") {
  std::string big(5000, 'x');
  std::string body = R"({"metadata":{},"items":[{"a":"small"},{"a":")" + big + R"("}]})";
  int n = 0;
  kube::ListScanner scan(4096, [&](json) {
    ++n;
    return webhook::Status();
  });
  webhook::Status s = scan_in_pieces(scan, body, 1000);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == webhook::ErrorCode::kResourceExhausted);
  CHECK_THAT(s.error().message, Catch::Contains("item 1") && Catch::Contains("4096"));
  CHECK(n == 1);
}

TEST_CASE("ListScanner rejects bodies that are not a list") {
  auto [body, why] = GENERATE(table<std::string, std::string>({
      {R"([1,2])", "not a JSON object"},
      {R"({"items":[1]})", "not an object"},
      {R"({"items":["a"]})", "not an object"},
      {R"({"items":[{"a":1}])", "cut short"},
      {R"({"items":[{"a":1},{"a":}]})", "not valid JSON"},
      {R"({"items":[]} x)", "not a JSON object"},
  }));
  CAPTURE(body);
  kube::ListScanner scan(1024, [](json) { return webhook::Status(); });
  webhook::Status s = scan_in_pieces(scan, body, 2);
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.error().message, Catch::Contains(why));
}

TEST_CASE("ListScanner passes on the item callback's error") {
  kube::ListScanner scan(1024,
                         [](json) { return webhook::Status(webhook::invalid_argument("no")); });
  webhook::Status s = scan.feed(R"({"items":[{}]})");
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().message == "no");
}

TEST_CASE("LineSplitter yields whole lines across chunks and bounds a line") {
  std::string text = "{\"type\":\"ADDED\"}\n\n{\"type\":\"MODIFIED\"}\r\n{\"type\":\"DEL";
  std::vector<std::string> lines;
  kube::LineSplitter split(64);
  auto collect = [&](std::string_view l) {
    lines.emplace_back(l);
    return webhook::Status();
  };
  for (char c : text) {
    REQUIRE(split.feed(std::string_view(&c, 1), collect).ok());
  }
  CHECK(lines == std::vector<std::string>{R"({"type":"ADDED"})", R"({"type":"MODIFIED"})"});
  CHECK(split.pending() > 0);
  REQUIRE(split.feed("ETED\"}\n", collect).ok());
  CHECK(lines.back() == R"({"type":"DELETED"})");
  CHECK(split.pending() == 0);

  webhook::Status s = split.feed(std::string(65, 'x'), collect);
  REQUIRE_FALSE(s.ok());
  CHECK(s.error().code == webhook::ErrorCode::kResourceExhausted);
  webhook::Status s2 =
      kube::LineSplitter(64).feed(std::string(40, 'x') + std::string(40, 'y'), collect);
  CHECK_FALSE(s2.ok());
}
