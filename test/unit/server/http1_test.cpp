// lib/server/http1: the strict HTTP/1.1 request parser over bytes (docs/server.md "Framing", and
// the refusal table in lib/server/http1.h). Every expected value is written by hand from RFC 9112,
// RFC 9110 and that table. Every request is also fed one byte at a time and split in two at every
// byte position, and must come to the same answer: the transport feeds whatever arrived.
#include "server/http1.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace {

using server::http1::Head;
using server::http1::Limits;
using server::http1::ParseError;
using server::http1::RequestParser;
using server::http1::State;
using namespace std::string_literals;

// A head as a test writes it: the fields of server::http1::Head, each with its default, so that
// a designated initializer names only what the case is about.
struct Want {
  std::string method{};
  std::string path{};
  int minor_version = 1;
  std::string content_type{};
  std::optional<std::uint64_t> content_length{};
  bool chunked = false;
  bool keep_alive = true;
  bool expect_continue = false;
  bool body_too_large = false;
};

Head to_head(const Want& w) {
  Head h;
  h.method = w.method;
  h.path = w.path;
  h.minor_version = w.minor_version;
  h.content_type = w.content_type;
  h.content_length = w.content_length;
  h.chunked = w.chunked;
  h.keep_alive = w.keep_alive;
  h.expect_continue = w.expect_continue;
  h.body_too_large = w.body_too_large;
  return h;
}

// What one request came to.
struct Parsed {
  State state = State::kHead;
  Head head;
  std::string body;
  ParseError error;
  std::size_t received = 0;
  std::size_t taken_after_error = 0;  // bytes offered after the error that feed() consumed
  bool error_changed = false;         // the state or the status moved after the error
};

// `taken`: the bytes feed() consumed since the request's first one.
Parsed snapshot(const RequestParser& p, std::size_t taken) {
  return {p.state(), p.head(), p.body(), p.error(), taken, 0, false};
}

// Drives a parser the way the transport does: each piece is fed, and what feed() did not consume
// is fed again; a finished request is recorded and the parser reset for the next (pipelined) one;
// after an error everything left is still offered, and must not be consumed. The last entry is
// the request in progress, if any byte of it arrived.
std::vector<Parsed> drive(const std::vector<std::string>& pieces, Limits limits) {
  std::vector<Parsed> out;
  RequestParser p(limits);
  std::size_t taken = 0;
  for (const std::string& piece : pieces) {
    std::string_view rest = piece;
    while (!rest.empty()) {
      if (p.state() == State::kError) {
        int status = out.back().error.status;
        out.back().taken_after_error += p.feed(rest);
        out.back().error_changed |= p.state() != State::kError || p.error().status != status;
        break;
      }
      std::size_t n = p.feed(rest);
      REQUIRE(n <= rest.size());
      rest.remove_prefix(n);
      taken += n;
      if (p.state() == State::kDone) {
        out.push_back(snapshot(p, taken));
        p.reset();
        taken = 0;
      } else if (p.state() == State::kError) {
        out.push_back(snapshot(p, taken));
      } else if (n == 0) {
        FAIL("feed() consumed nothing while the request was still open");
      }
    }
  }
  if (p.state() != State::kError && taken > 0) {
    out.push_back(snapshot(p, taken));
  }
  return out;
}

// The ways the bytes may arrive: in one piece, one byte at a time, and in two pieces split at
// every position.
std::vector<std::vector<std::string>> arrivals(std::string_view bytes) {
  std::vector<std::vector<std::string>> out;
  out.push_back({std::string(bytes)});
  std::vector<std::string> single;
  for (char c : bytes) {
    single.emplace_back(1, c);
  }
  out.push_back(single);
  for (std::size_t i = 1; i < bytes.size(); ++i) {
    out.push_back({std::string(bytes.substr(0, i)), std::string(bytes.substr(i))});
  }
  return out;
}

std::string arrival_name(std::size_t index) {
  if (index == 0) {
    return "in one piece";
  }
  if (index == 1) {
    return "one byte at a time";
  }
  return "split after byte " + std::to_string(index - 1);
}

std::string flag(bool b) { return b ? "1" : "0"; }

// A body as describe() shows it: long ones by their length (the cases holding one compare the
// bytes themselves).
std::string shown(const std::string& body) {
  return body.size() <= 100 ? "[" + body + "]" : "<" + std::to_string(body.size()) + " bytes>";
}

std::string describe(const Parsed& r) {
  switch (r.state) {
    case State::kHead:
      return "still in the head after " + std::to_string(r.received) + " bytes";
    case State::kBody:
      return "still in the body after " + std::to_string(r.received) + " bytes";
    case State::kError:
      return "error " + std::to_string(r.error.status) +
             " taken_after_error=" + std::to_string(r.taken_after_error) +
             " error_changed=" + flag(r.error_changed);
    case State::kDone:
      break;
  }
  const Head& h = r.head;
  return "done method=" + h.method + " path=" + h.path + " version=1." +
         std::to_string(h.minor_version) + " content_type=[" + h.content_type + "]" +
         " content_length=" + (h.content_length ? std::to_string(*h.content_length) : "none") +
         " chunked=" + flag(h.chunked) + " keep_alive=" + flag(h.keep_alive) +
         " expect_continue=" + flag(h.expect_continue) + " too_large=" + flag(h.body_too_large) +
         " body=" + shown(r.body) + " received=" + std::to_string(r.received);
}

// A request the parser accepts, as written by hand: `received` is the whole request's length.
Parsed done(const Want& head, std::string_view body, std::size_t received) {
  Parsed r;
  r.state = State::kDone;
  r.head = to_head(head);
  r.body = std::string(body);
  r.received = received;
  return r;
}

// Feeds `bytes` in every arrival; each must give exactly `want`, in order.
void check_requests(std::string_view bytes, const std::vector<Parsed>& want, Limits limits = {}) {
  std::vector<std::string> want_text;
  for (const Parsed& w : want) {
    want_text.push_back(describe(w));
  }
  std::vector<std::vector<std::string>> ways = arrivals(bytes);
  for (std::size_t i = 0; i < ways.size(); ++i) {
    INFO("fed " << arrival_name(i));
    std::vector<std::string> got_text;
    for (const Parsed& g : drive(ways[i], limits)) {
      got_text.push_back(describe(g));
    }
    CHECK(got_text == want_text);
    if (got_text != want_text) {
      return;  // one failing arrival says enough
    }
  }
}

void check_request(std::string_view request, const Want& head, std::string_view body,
                   Limits limits = {}) {
  check_requests(request, {done(head, body, request.size())}, limits);
}

// Feeds `bytes` in every arrival; each must be refused with `status` and a message naming
// `says`, and nothing offered after the refusal may be consumed.
void check_refused(std::string_view bytes, int status, std::string_view says, Limits limits = {}) {
  INFO("request: " << std::string(bytes.substr(0, 200)));
  Parsed refused;
  refused.state = State::kError;
  refused.error.status = status;
  std::string want_text = describe(refused) + "; ";
  auto names_it = Catch::Matchers::Contains(std::string(says), Catch::CaseSensitive::No);
  std::vector<std::vector<std::string>> ways = arrivals(bytes);
  for (std::size_t i = 0; i < ways.size(); ++i) {
    INFO("fed " << arrival_name(i));
    std::vector<Parsed> got = drive(ways[i], limits);
    std::string got_text;
    for (const Parsed& g : got) {
      got_text += describe(g) + "; ";
    }
    if (got_text != want_text) {
      CHECK(got_text == want_text);
      return;  // one failing arrival says enough
    }
    if (!names_it.match(got[0].error.message)) {
      CHECK_THAT(got[0].error.message, names_it);
      return;
    }
  }
}

constexpr std::string_view kHost = "Host: webhook.ray-system.svc:443\r\n";

}  // namespace

// ---------------------------------------------------------------------------------------------
// Requests that are accepted.

TEST_CASE("a POST with a Content-Length body", "[http1]") {
  std::string request = "POST /mutate HTTP/1.1\r\n"s + std::string(kHost) +
                        "Content-Type: application/json\r\n"
                        "Content-Length: 5\r\n"
                        "\r\n"
                        "hello";
  check_request(request,
                Want{.method = "POST",
                     .path = "/mutate",
                     .minor_version = 1,
                     .content_type = "application/json",
                     .content_length = 5U},
                "hello");
}

TEST_CASE("a GET without a body", "[http1]") {
  check_request("GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n",
                Want{.method = "GET", .path = "/healthz"}, "");
  check_request(
      "GET /readyz HTTP/1.1\r\nHost: 10.0.0.7:8443\r\nUser-Agent: kube-probe/1.29\r\n"
      "Accept: */*\r\n\r\n",
      Want{.method = "GET", .path = "/readyz"}, "");
  // RFC 9112 6.3: a request with neither Content-Length nor Transfer-Encoding has no body.
  check_request("POST /mutate HTTP/1.1\r\nHost: h\r\n\r\n",
                Want{.method = "POST", .path = "/mutate"}, "");
}

TEST_CASE("every implemented method is accepted", "[http1]") {
  for (const char* method : {"GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"}) {
    CAPTURE(method);
    check_request(std::string(method) + " /x HTTP/1.1\r\nHost: h\r\n\r\n",
                  Want{.method = method, .path = "/x"}, "");
  }
}

TEST_CASE("HTTP/1.0 closes the connection unless it asks for keep-alive", "[http1]") {
  // RFC 9112 9.3: a 1.0 connection persists only with "Connection: keep-alive"; no Host needed.
  check_request("POST /mutate HTTP/1.0\r\nContent-Length: 2\r\n\r\n{}",
                Want{.method = "POST",
                     .path = "/mutate",
                     .minor_version = 0,
                     .content_length = 2U,
                     .keep_alive = false},
                "{}");
  check_request("POST /mutate HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n{}",
                Want{.method = "POST",
                     .path = "/mutate",
                     .minor_version = 0,
                     .content_length = 2U,
                     .keep_alive = true},
                "{}");
  // Connection options are case-insensitive tokens (RFC 9110 7.6.1).
  check_request("GET / HTTP/1.0\r\nHost: h\r\nConnection: Keep-Alive\r\n\r\n",
                Want{.method = "GET", .path = "/", .minor_version = 0, .keep_alive = true}, "");
  check_request("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n",
                Want{.method = "GET", .path = "/", .minor_version = 0, .keep_alive = false}, "");
}

TEST_CASE("Connection: close ends an HTTP/1.1 connection", "[http1]") {
  check_request(
      "POST /mutate HTTP/1.1\r\nHost: h\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
      Want{.method = "POST", .path = "/mutate", .content_length = 0U, .keep_alive = false}, "");
  check_request("GET / HTTP/1.1\r\nHost: h\r\nConnection: TE, Close\r\n\r\n",
                Want{.method = "GET", .path = "/", .keep_alive = false}, "");
  // "closed" is another token, not "close".
  check_request("GET / HTTP/1.1\r\nHost: h\r\nConnection: closed\r\n\r\n",
                Want{.method = "GET", .path = "/", .keep_alive = true}, "");
}

TEST_CASE("a chunked body: several chunks, extensions, trailers", "[http1]") {
  std::string request =
      "POST /mutate HTTP/1.1\r\n"
      "Host: h\r\n"
      "Content-Type: application/json\r\n"
      "Transfer-Encoding: chunked\r\n"
      "\r\n"
      "5\r\nhello\r\n"
      "1;name=value\r\n \r\n"                 // an extension
      "A ; a=1;b=\"x y\"\r\n0123456789\r\n"   // BWS before ';' and a quoted value (RFC 9112 7.1.1)
      "1a\r\nabcdefghijklmnopqrstuvwxyz\r\n"  // 0x1a = 26 bytes
      "0;last\r\n"
      "X-Checksum: 1234\r\n"  // trailer fields (RFC 9112 7.1.2)
      "X-Other: yes\r\n"
      "\r\n";
  check_request(
      request,
      Want{
          .method = "POST", .path = "/mutate", .content_type = "application/json", .chunked = true},
      "hello 0123456789abcdefghijklmnopqrstuvwxyz");
  // No trailers; the coding's name is case-insensitive (RFC 9112 7); CRLFs inside chunk data
  // are data.
  check_request(
      "POST /m HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n"
      "4\r\n\r\n\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
      Want{.method = "POST", .path = "/m", .chunked = true}, "\r\n\r\nabc");
  // An empty chunked body.
  check_request("POST /m HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                Want{.method = "POST", .path = "/m", .chunked = true}, "");
}

TEST_CASE("Expect: 100-continue is reported", "[http1]") {
  check_request(
      "POST /mutate HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}",
      Want{.method = "POST", .path = "/mutate", .content_length = 2U, .expect_continue = true},
      "{}");
  // The expectation is case-insensitive (RFC 9110 10.1.1).
  check_request(
      "POST /mutate HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 2\r\n\r\n{}",
      Want{.method = "POST", .path = "/mutate", .content_length = 2U, .expect_continue = true},
      "{}");
  check_request("POST /mutate HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}",
                Want{.method = "POST", .path = "/mutate", .content_length = 2U}, "{}");

  // The head is complete before the body: the transport answers 100 Continue then.
  RequestParser p({});
  std::string head =
      "POST /mutate HTTP/1.1\r\nHost: h\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n";
  CHECK(p.feed(head) == head.size());
  CHECK(p.state() == State::kBody);
  CHECK(p.head().expect_continue);
}

TEST_CASE("the absolute form of a target is served as its path", "[http1]") {
  // RFC 9112 3.2.2.
  check_request(
      "POST https://host:9443/mutate?x=1 HTTP/1.1\r\nHost: host:9443\r\nContent-Length: "
      "2\r\n\r\n{}",
      Want{.method = "POST", .path = "/mutate", .content_length = 2U}, "{}");
  check_request("GET http://h HTTP/1.1\r\nHost: h\r\n\r\n", Want{.method = "GET", .path = "/"}, "");
  check_request("GET http://h?x=1 HTTP/1.1\r\nHost: h\r\n\r\n", Want{.method = "GET", .path = "/"},
                "");
  // The scheme is case-insensitive (RFC 3986 3.1).
  check_request("GET HTTPS://H/readyz HTTP/1.1\r\nHost: h\r\n\r\n",
                Want{.method = "GET", .path = "/readyz"}, "");
}

TEST_CASE("the query is not part of the path", "[http1]") {
  check_request("POST /validate?timeout=10s HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\n\r\n{}",
                Want{.method = "POST", .path = "/validate", .content_length = 2U}, "{}");
  check_request("GET /?a=1?b HTTP/1.1\r\nHost: h\r\n\r\n", Want{.method = "GET", .path = "/"}, "");
  check_request("GET /metrics? HTTP/1.1\r\nHost: h\r\n\r\n",
                Want{.method = "GET", .path = "/metrics"}, "");
}

TEST_CASE("empty lines before the request line are ignored", "[http1]") {
  // RFC 9112 2.2; they are bytes of the request all the same.
  check_request("\r\n\r\nGET /healthz HTTP/1.1\r\nHost: h\r\n\r\n",
                Want{.method = "GET", .path = "/healthz"}, "");
}

// docs/server.md "Framing": empty lines before a request line are ignored (RFC 9112 2.2), so
// they begin no request.
TEST_CASE("empty lines begin no request; the request line's first byte, or a refusal, does",
          "[http1]") {
  server::http1::RequestParser p(server::http1::Limits{});
  CHECK_FALSE(p.begun());
  CHECK(p.feed("\r\n\r\n\r") == 5);  // the last CR may end a third empty line
  CHECK(p.state() == server::http1::State::kHead);
  CHECK_FALSE(p.begun());
  CHECK(p.feed("\nG") == 2);
  CHECK(p.begun());
  p.reset();
  CHECK_FALSE(p.begun());
  p.feed("\n");  // a bare LF: refused, and the refusal is a request begun
  CHECK(p.state() == server::http1::State::kError);
  CHECK(p.begun());
  server::http1::Limits tight;
  tight.max_head_bytes = 64;
  server::http1::RequestParser endless(tight);
  for (int i = 0; i < 31; ++i) {
    endless.feed("\r\n");
  }
  CHECK_FALSE(endless.begun());
  endless.feed("\r\n\r\n");  // empty lines count toward the head's limit
  CHECK(endless.state() == server::http1::State::kError);
  CHECK(endless.error().status == 431);
}

TEST_CASE("header names are case-insensitive", "[http1]") {
  check_request(
      "POST /mutate HTTP/1.1\r\nhOST: h\r\ncontent-LENGTH: 2\r\nCONTENT-TYPE: application/json\r\n"
      "connection: CLOSE\r\nexpect: 100-continue\r\n\r\n{}",
      Want{.method = "POST",
           .path = "/mutate",
           .content_type = "application/json",
           .content_length = 2U,
           .keep_alive = false,
           .expect_continue = true},
      "{}");
  check_request(
      "POST /m HTTP/1.1\r\nHOST: h\r\ntransfer-ENCODING: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n",
      Want{.method = "POST", .path = "/m", .chunked = true}, "{}");
}

TEST_CASE("identical Content-Length values are one length", "[http1]") {
  // RFC 9110 8.6: a list of identical values may be taken as that one value.
  Want want{.method = "POST", .path = "/mutate", .content_length = 5U};
  check_request(
      "POST /mutate HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
      want, "hello");
  check_request("POST /mutate HTTP/1.1\r\nHost: h\r\nContent-Length: 5, 5\r\n\r\nhello", want,
                "hello");
  check_request("POST /mutate HTTP/1.1\r\nHost: h\r\nContent-Length: 5,5\r\n\r\nhello", want,
                "hello");
}

TEST_CASE("whitespace around a value is not part of it; Content-Type is kept", "[http1]") {
  // RFC 9112 5: OWS before and after a field value.
  check_request(
      "POST /mutate HTTP/1.1\r\nHost:h\r\n"
      "Content-Type: \t application/json; charset=utf-8 \t\r\n"
      "Content-Length:\t5 \r\n\r\nhello",
      Want{.method = "POST",
           .path = "/mutate",
           .content_type = "application/json; charset=utf-8",
           .content_length = 5U},
      "hello");
}

TEST_CASE("Content-Encoding: identity is accepted", "[http1]") {
  Want want{.method = "POST", .path = "/mutate", .content_length = 2U};
  check_request(
      "POST /mutate HTTP/1.1\r\nHost: h\r\nContent-Encoding: identity\r\nContent-Length: "
      "2\r\n\r\n{}",
      want, "{}");
  check_request(
      "POST /mutate HTTP/1.1\r\nHost: h\r\nContent-Encoding: Identity\r\nContent-Length: "
      "2\r\n\r\n{}",
      want, "{}");
}

// ---------------------------------------------------------------------------------------------
// Pipelining, and the feed() protocol.

TEST_CASE("pipelined requests are parsed one after the other", "[http1]") {
  std::string post = "POST /mutate HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello";
  std::string get = "GET /healthz HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n";
  std::string chunked =
      "POST /validate HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3\r\nabc\r\n0\r\n\r\n";
  Want post_head{.method = "POST", .path = "/mutate", .content_length = 5U};
  Want get_head{.method = "GET", .path = "/healthz", .keep_alive = false};
  Want chunked_head{.method = "POST", .path = "/validate", .chunked = true};

  check_requests(post + get,
                 {done(post_head, "hello", post.size()), done(get_head, "", get.size())});
  check_requests(chunked + post + get,
                 {done(chunked_head, "abc", chunked.size()), done(post_head, "hello", post.size()),
                  done(get_head, "", get.size())});
  // An extra CRLF after a body (RFC 9112 2.2) belongs to the next request, which ignores it.
  check_requests(post + "\r\n" + get,
                 {done(post_head, "hello", post.size()), done(get_head, "", get.size() + 2)});
  // A second request that is not complete yet is still in its head.
  std::vector<Parsed> got = drive({post + get.substr(0, 10)}, {});
  REQUIRE(got.size() == 2);
  CHECK(describe(got[0]) == describe(done(post_head, "hello", post.size())));
  CHECK(got[1].state == State::kHead);
  CHECK(got[1].received == 10);
}

TEST_CASE("feed() stops where the head ends, then where the request ends", "[http1]") {
  std::string head = "POST /mutate HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n";
  std::string next = "GET /healthz HTTP/1.1\r\nHost: h\r\n\r\n";
  std::string bytes = head + "hello" + next;
  std::string_view rest = bytes;

  RequestParser p({});
  CHECK(p.feed("") == 0);
  CHECK(p.state() == State::kHead);
  CHECK(p.feed(rest) == head.size());
  CHECK(p.state() == State::kBody);
  CHECK(p.head().content_length == 5U);
  CHECK(p.body().empty());
  CHECK(p.feed("") == 0);
  CHECK(p.state() == State::kBody);
  rest.remove_prefix(head.size());

  CHECK(p.feed(rest) == 5);
  CHECK(p.state() == State::kDone);
  CHECK(p.body() == "hello");
  rest.remove_prefix(5);
  CHECK(rest == next);
  CHECK(p.feed(rest) == 0);  // a finished request takes nothing: the rest is the next request
  CHECK(p.state() == State::kDone);

  p.reset();
  CHECK(p.state() == State::kHead);
  CHECK(p.body().empty());
  CHECK(p.head().method.empty());
  CHECK(p.feed(rest) == next.size());
  CHECK(p.state() == State::kDone);
  CHECK(p.head().method == "GET");
  CHECK(p.head().path == "/healthz");
  CHECK(p.head().content_length == std::nullopt);
}

TEST_CASE("body_remaining()", "[http1]") {
  std::string head = "POST /mutate HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\n";
  RequestParser p({});
  CHECK(p.body_remaining() == 0);
  CHECK(p.feed(std::string_view(head).substr(0, 7)) == 7);
  CHECK(p.state() == State::kHead);
  CHECK(p.body_remaining() == 0);  // the length is not known yet
  CHECK(p.feed(std::string_view(head).substr(7)) == head.size() - 7);
  CHECK(p.state() == State::kBody);
  CHECK(p.body_remaining() == 10);
  CHECK(p.feed("012") == 3);
  CHECK(p.body_remaining() == 7);
  CHECK(p.feed("3456789GET") == 7);  // the next request's bytes are left
  CHECK(p.state() == State::kDone);
  CHECK(p.body_remaining() == 0);
  CHECK(p.body() == "0123456789");
  p.reset();

  // A chunked body's length is not known: 0.
  std::string chunked = "POST /m HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
  CHECK(p.feed(chunked) == chunked.size());
  CHECK(p.state() == State::kBody);
  CHECK(p.body_remaining() == 0);
  CHECK(p.feed("5\r\nhel") == 6);
  CHECK(p.body_remaining() == 0);
}

TEST_CASE("reserve_body() changes nothing the parser answers", "[http1]") {
  RequestParser p({});
  p.reserve_body();  // no head yet
  std::string head = "POST /mutate HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n";
  CHECK(p.feed(head) == head.size());
  p.reserve_body();
  CHECK(p.body_remaining() == 5);
  CHECK(p.feed("hello") == 5);
  CHECK(p.state() == State::kDone);
  CHECK(p.body() == "hello");

  p.reset();
  std::string chunked = "POST /m HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
  CHECK(p.feed(chunked) == chunked.size());
  p.reserve_body();
  CHECK(p.feed("2\r\n{}\r\n0\r\n\r\n") == 12);
  CHECK(p.state() == State::kDone);
  CHECK(p.body() == "{}");

  // A length too large to hold: refused, and reserving must not try to hold it.
  p.reset();
  CHECK(p.feed("POST /m HTTP/1.1\r\nHost: h\r\nContent-Length: 18446744073709551615\r\n\r\n") > 0);
  REQUIRE(p.state() == State::kError);
  CHECK_NOTHROW(p.reserve_body());
  CHECK(p.state() == State::kError);
  CHECK(p.error().status == 413);
}

TEST_CASE("reset() frees what the request took: a kept-alive connection holds none of it",
          "[http1]") {
  RequestParser p({});
  std::string body(256 * 1024, 'x');
  std::string path = "/mutate/" + std::string(200, 'a');  // the query is not kept
  std::string type = "application/json; x=" + std::string(200, 'b');
  std::string request = "POST " + path + " HTTP/1.1\r\nHost: h\r\nContent-Type: " + type +
                        "\r\nContent-Length: " + std::to_string(body.size()) + "\r\n\r\n";
  CHECK(p.feed(request) == request.size());
  p.reserve_body();
  CHECK(p.feed(body) == body.size());
  REQUIRE(p.state() == State::kDone);
  REQUIRE(p.body().capacity() >= body.size());
  REQUIRE(p.head().path == path);
  REQUIRE(p.head().content_type == type);

  p.reset();
  CHECK(p.state() == State::kHead);
  CHECK(p.body().capacity() < 64);  // a short string's own bytes, no buffer
  CHECK(p.head().path.capacity() < 64);
  CHECK(p.head().content_type.capacity() < 64);
}

// ---------------------------------------------------------------------------------------------
// Refusals: each row of the table in lib/server/http1.h (docs/server.md "Framing").

TEST_CASE("400: a malformed request line", "[http1]") {
  std::string rest = "Host: h\r\n\r\n";
  check_refused("GET /mutate\r\n" + rest, 400, "request line");            // no version
  check_refused("GET  /mutate HTTP/1.1\r\n" + rest, 400, "request line");  // two spaces
  check_refused("GET /mutate  HTTP/1.1\r\n" + rest, 400, "request line");
  check_refused("GET /mutate HTTP/1.1 \r\n" + rest, 400, "request line");   // trailing space
  check_refused("GET\t/mutate\tHTTP/1.1\r\n" + rest, 400, "request line");  // tabs
  check_refused("GET /mutate http/1.1\r\n" + rest, 400, "version");         // case-sensitive
  check_refused("GET /mutate HTTP/1\r\n" + rest, 400, "version");
  check_refused("GET /mutate HTTP/1.10\r\n" + rest, 400, "version");
  check_refused(" GET /mutate HTTP/1.1\r\n" + rest, 400, "request line");  // empty method
  check_refused("G@T /mutate HTTP/1.1\r\n" + rest, 400, "method");         // '@' is not a tchar
  check_refused("GET /mu\x01tate HTTP/1.1\r\n" + rest, 400, "target");
  check_refused("GET mutate HTTP/1.1\r\n" + rest, 400, "target");
  check_refused("GET ftp://h/mutate HTTP/1.1\r\n" + rest, 400, "target");
  check_refused("GET https:///mutate HTTP/1.1\r\n" + rest, 400, "host");  // no authority
  check_refused("GET https:// HTTP/1.1\r\n" + rest, 400, "host");
}

TEST_CASE("400: bare LF, and CR inside a line", "[http1]") {
  check_refused("GET / HTTP/1.1\nHost: h\r\n\r\n", 400, "bare LF");
  check_refused("GET / HTTP/1.1\r\nHost: h\n\r\n", 400, "bare LF");
  check_refused("GET / HTTP/1.1\r\nHost: h\r\n\n", 400, "bare LF");
  check_refused("\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", 400, "bare LF");
  check_refused("GET / HTTP/1.1\r\nHost: h\rX-A: b\r\n\r\n", 400, "CR");
  check_refused("GET /\r HTTP/1.1\r\nHost: h\r\n\r\n", 400, "CR");
  check_refused("GET / HTTP/1.1\r\nHost: h\r\r\n\r\n", 400, "CR");
}

TEST_CASE("400: a malformed header line", "[http1]") {
  std::string start = "GET / HTTP/1.1\r\nHost: h\r\n";
  check_refused(start + "X-Long: a\r\n b\r\n\r\n", 400, "obs-fold");  // RFC 9112 5.2
  check_refused(start + "X-Long: a\r\n\tb\r\n\r\n", 400, "obs-fold");
  check_refused("GET / HTTP/1.1\r\n Host: h\r\n\r\n", 400, "obs-fold");  // before the first
  check_refused("GET / HTTP/1.1\r\nHost : h\r\n\r\n", 400, "colon");     // RFC 9112 5.1
  check_refused("GET / HTTP/1.1\r\nHost\t: h\r\n\r\n", 400, "colon");
  check_refused(start + ": v\r\n\r\n", 400, "header");      // empty name
  check_refused(start + "X-A v\r\n\r\n", 400, "header");    // no colon
  check_refused(start + "X(A): v\r\n\r\n", 400, "header");  // not a token
  check_refused(start +
                    "X-A: a\x01"
                    "b\r\n\r\n",
                400, "control");
  check_refused(start + "X-A: a\x7f\r\n\r\n", 400, "control");
  check_refused(start + "X-A: a\0b\r\n\r\n"s, 400, "control");
  check_refused(start + "X-A: a\x1b[0m\r\n\r\n", 400, "control");
}

TEST_CASE("400: a Content-Length that is not digits, or disagrees", "[http1]") {
  std::string start = "POST /mutate HTTP/1.1\r\nHost: h\r\n";
  for (const char* value : {"abc", "-1", "", "1 2", "+5", "0x10", "5;", "5 5"}) {
    CAPTURE(value);
    check_refused(start + "Content-Length: " + value + "\r\n\r\nhello", 400, "Content-Length");
  }
  check_refused(start + "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello", 400,
                "Content-Length");
  check_refused(start + "Content-Length: 5, 6\r\n\r\nhello", 400, "Content-Length");
  // 2^64 + 1 would wrap to 1 in 64 bits: it still disagrees with 1.
  check_refused(start + "Content-Length: 1\r\nContent-Length: 18446744073709551617\r\n\r\nh", 400,
                "Content-Length");
}

TEST_CASE("400: Transfer-Encoding with Content-Length, or in HTTP/1.0", "[http1]") {
  // RFC 9112 6.1 and 6.3.
  check_refused(
      "POST /mutate HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"
      "5\r\nhello\r\n0\r\n\r\n",
      400, "Transfer-Encoding");
  check_refused(
      "POST /mutate HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
      "5\r\nhello\r\n0\r\n\r\n",
      400, "Transfer-Encoding");
  check_refused("POST /mutate HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
                400, "HTTP/1.0");
}

TEST_CASE("400: an HTTP/1.1 request without exactly one Host", "[http1]") {
  // RFC 9112 3.2.
  check_refused("GET / HTTP/1.1\r\n\r\n", 400, "Host");
  check_refused("POST /mutate HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}", 400, "Host");
  check_refused("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "Host");
  check_refused("GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n", 400, "Host");
}

TEST_CASE("400: a malformed chunk", "[http1]") {
  std::string head = "POST /mutate HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
  check_refused(head + "zz\r\nhello\r\n0\r\n\r\n", 400, "chunk");
  check_refused(head + "\r\nhello\r\n0\r\n\r\n", 400, "chunk");  // no size
  check_refused(head + "-1\r\nh\r\n0\r\n\r\n", 400, "chunk");
  check_refused(head + "0x5\r\nhello\r\n0\r\n\r\n", 400, "chunk");
  check_refused(head + "5 x\r\nhello\r\n0\r\n\r\n", 400, "chunk");
  check_refused(head + "5\nhello\r\n0\r\n\r\n", 400, "chunk");  // bare LF
  // Data longer than its size.
  check_refused(head + "3\r\nabcd\r\n0\r\n\r\n", 400, "chunk");
  check_refused(head + "3\r\nabc0\r\n\r\n", 400, "chunk");
  check_refused(head + "3\r\nabc\n0\r\n\r\n", 400, "chunk");
  // Malformed trailers.
  check_refused(head + "0\r\nbad trailer\r\n\r\n", 400, "trailer");
  check_refused(head + "0\r\n: x\r\n\r\n", 400, "trailer");
  check_refused(head + "0\r\nX-A : x\r\n\r\n", 400, "trailer");
}

TEST_CASE("413: a body over max_body_bytes, known before it arrives", "[http1]") {
  Limits limits;
  limits.max_body_bytes = 10;
  std::string start = "POST /mutate HTTP/1.1\r\nHost: h\r\n";
  check_refused(start + "Content-Length: 11\r\n\r\n", 413, "10 bytes", limits);
  // Without 100 Continue: the refusal comes from the head.
  check_refused(start + "Expect: 100-continue\r\nContent-Length: 11\r\n\r\n", 413, "10 bytes",
                limits);
  check_request(start + "Content-Length: 10\r\n\r\n0123456789",
                Want{.method = "POST", .path = "/mutate", .content_length = 10U}, "0123456789",
                limits);
  // Lengths past 64 bits (2^64 + 1 would wrap to 1) are still too large.
  for (const char* value : {"18446744073709551615", "18446744073709551616", "18446744073709551617",
                            "99999999999999999999999999999999"}) {
    CAPTURE(value);
    check_refused(start + "Content-Length: " + value + "\r\n\r\n", 413, "larger");
    RequestParser p({});
    p.feed(start + "Content-Length: " + value + "\r\n\r\n");
    CHECK(p.state() == State::kError);
    CHECK(p.head().body_too_large);
  }
  RequestParser p(limits);
  p.feed(start + "Content-Length: 11\r\n\r\n");
  CHECK(p.error().status == 413);
  CHECK(p.head().body_too_large);
}

TEST_CASE("413: a chunked body whose total goes over max_body_bytes", "[http1]") {
  Limits limits;
  limits.max_body_bytes = 10;
  std::string head = "POST /mutate HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
  // Refused at the size line, before the chunk's data arrives.
  check_refused(head + "b\r\n", 413, "10 bytes", limits);
  check_refused(head + "6\r\nabcdef\r\n5\r\n", 413, "10 bytes", limits);
  check_refused(head + "ffffffffffffffffffff\r\n", 413, "larger", limits);
  check_request(head + "6\r\nabcdef\r\n4\r\nghij\r\n0\r\n\r\n",
                Want{.method = "POST", .path = "/mutate", .chunked = true}, "abcdefghij", limits);
}

TEST_CASE("414: a request line over max_request_line", "[http1]") {
  Limits limits;
  limits.max_request_line = 32;
  // "GET " (4) + target + " HTTP/1.1" (9): a target of 19 bytes makes a 32-byte line.
  std::string at_limit = "GET /" + std::string(18, 'a') + " HTTP/1.1";
  REQUIRE(at_limit.size() == 32);
  check_request(at_limit + "\r\nHost: h\r\n\r\n",
                Want{.method = "GET", .path = "/" + std::string(18, 'a')}, "", limits);
  check_refused("GET /" + std::string(19, 'a') + " HTTP/1.1\r\nHost: h\r\n\r\n", 414,
                "request line", limits);
  // Refused before the line's end arrives.
  check_refused("GET /" + std::string(40, 'a'), 414, "request line", limits);
  check_refused("POST /" + std::string(9000, 'a'), 414, "8192");  // the default limit
}

TEST_CASE("415: a Content-Encoding other than identity", "[http1]") {
  std::string start = "POST /mutate HTTP/1.1\r\nHost: h\r\n";
  check_refused(start + "Content-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}", 415, "gzip");
  check_refused(start + "Content-Encoding: br\r\nContent-Length: 2\r\n\r\n{}", 415, "br");
  check_refused(start + "Content-Encoding: identity, gzip\r\nContent-Length: 2\r\n\r\n{}", 415,
                "gzip");
  check_refused(start + "content-encoding: GZIP\r\nContent-Length: 2\r\n\r\n{}", 415, "gzip");
}

TEST_CASE("417: an Expect other than 100-continue", "[http1]") {
  std::string start = "POST /mutate HTTP/1.1\r\nHost: h\r\n";
  check_refused(start + "Expect: foo\r\nContent-Length: 2\r\n\r\n{}", 417, "foo");
  check_refused(start + "Expect: 200-ok\r\nContent-Length: 2\r\n\r\n{}", 417, "200-ok");
  check_refused(start + "Expect: 100-continue, foo\r\nContent-Length: 2\r\n\r\n{}", 417, "foo");
}

TEST_CASE("431: a head over max_head_bytes, or too many header fields", "[http1]") {
  Limits limits;
  limits.max_head_bytes = 64;
  // Refused before the head's end arrives.
  check_refused("GET / HTTP/1.1\r\nHost: h\r\nX-Padding: " + std::string(60, 'a'), 431, "64",
                limits);
  check_refused("GET / HTTP/1.1\r\nHost: h\r\n" + std::string(60, 'X'), 431, "64", limits);
  // A request line over this limit and max_request_line too: the smaller limit, crossed first,
  // whether the line arrives at once or byte by byte.
  check_refused("POST /" + std::string(9000, 'a'), 431, "64", limits);
  check_refused("POST /" + std::string(9000, 'a') + " HTTP/1.1\r\nHost: h\r\n\r\n", 431, "64",
                limits);

  // More than 100 fields with the default limits.
  std::string head = "GET / HTTP/1.1\r\nHost: h\r\n";
  for (int i = 1; i < 100; ++i) {
    head += "X-" + std::to_string(i) + ": v\r\n";
  }
  check_request(head + "\r\n", Want{.method = "GET", .path = "/"}, "");  // exactly 100
  check_refused(head + "X-100: v\r\n\r\n", 431, "100 header fields");
}

TEST_CASE("501: a method not implemented, a Transfer-Encoding other than chunked", "[http1]") {
  std::string rest = " / HTTP/1.1\r\nHost: h\r\n\r\n";
  check_refused("BREW" + rest, 501, "BREW");
  check_refused("TRACE" + rest, 501, "TRACE");
  check_refused("CONNECT webhook:443 HTTP/1.1\r\nHost: webhook:443\r\n\r\n", 501, "CONNECT");
  check_refused("post" + rest, 501, "post");  // methods are case-sensitive (RFC 9110 9.1)
  std::string start = "POST /mutate HTTP/1.1\r\nHost: h\r\n";
  check_refused(start + "Transfer-Encoding: gzip\r\n\r\n", 501, "gzip");
  check_refused(start + "Transfer-Encoding: gzip, chunked\r\n\r\n", 501, "gzip");
  check_refused(start + "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n\r\n", 501,
                "gzip");
}

TEST_CASE("505: an HTTP version other than 1.0 and 1.1", "[http1]") {
  check_refused("GET / HTTP/2.0\r\nHost: h\r\n\r\n", 505, "2.0");
  check_refused("GET / HTTP/3.0\r\nHost: h\r\n\r\n", 505, "3.0");
  check_refused("GET / HTTP/3\r\nHost: h\r\n\r\n", 505, "version 3");
  check_refused("GET / HTTP/1\r\nHost: h\r\n\r\n", 400, "version");
  check_refused("GET / HTTP/0.9\r\nHost: h\r\n\r\n", 505, "0.9");
}

TEST_CASE("after a refusal nothing more is read as a request", "[http1]") {
  RequestParser p({});
  std::string refused_line = "GET / HTTP/2.0\r\n";
  std::string good = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
  // feed() stops at the refused line: what follows is not consumed.
  CHECK(p.feed(refused_line + "Host: h\r\n\r\n" + good) == refused_line.size());
  REQUIRE(p.state() == State::kError);
  CHECK(p.error().status == 505);
  for (int i = 0; i < 3; ++i) {
    CHECK(p.feed(good) == 0);
    CHECK(p.state() == State::kError);
    CHECK(p.error().status == 505);
  }

  // A 413 from the head: the body that follows is not consumed either.
  Limits limits;
  limits.max_body_bytes = 4;
  RequestParser q(limits);
  std::string head = "POST /mutate HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n";
  CHECK(q.feed(head + "hello") == head.size());
  CHECK(q.state() == State::kError);
  CHECK(q.feed("hello") == 0);
  CHECK(q.body().empty());
}

TEST_CASE("reset() after a refusal starts afresh with the same limits", "[http1]") {
  Limits limits;
  limits.max_body_bytes = 4;
  RequestParser p(limits);
  std::string start = "POST /mutate HTTP/1.1\r\nHost: h\r\n";
  p.feed(start + "Content-Length: 5\r\n\r\n");
  REQUIRE(p.state() == State::kError);
  p.reset();
  CHECK(p.state() == State::kHead);
  CHECK_FALSE(p.head().body_too_large);
  p.feed(start + "Content-Length: 5\r\n\r\n");
  CHECK(p.error().status == 413);  // the limit is still 4
  p.reset();
  std::string ok = start + "Content-Length: 4\r\n\r\n";
  CHECK(p.feed(ok) == ok.size());
  CHECK(p.state() == State::kBody);
  CHECK(p.feed("abcd") == 4);
  CHECK(p.state() == State::kDone);
}

// ---------------------------------------------------------------------------------------------
// The limits, at their edges.

TEST_CASE("a head of exactly max_head_bytes is accepted, one byte more is refused", "[http1]") {
  Limits limits;
  limits.max_head_bytes = 64;
  // "GET / HTTP/1.1\r\n" (16) + "Host: h\r\n" (9) + "X-Pad: " (7) + padding + "\r\n" (2) +
  // "\r\n" (2): 28 bytes of padding make 64, CRLFs included.
  std::string at_limit = "GET / HTTP/1.1\r\nHost: h\r\nX-Pad: " + std::string(28, 'p') + "\r\n\r\n";
  REQUIRE(at_limit.size() == 64);
  check_request(at_limit, Want{.method = "GET", .path = "/"}, "", limits);
  // Each request of a connection has the whole limit.
  Want get{.method = "GET", .path = "/"};
  check_requests(at_limit + at_limit, {done(get, "", 64), done(get, "", 64)}, limits);
  std::string over = "GET / HTTP/1.1\r\nHost: h\r\nX-Pad: " + std::string(29, 'p') + "\r\n\r\n";
  REQUIRE(over.size() == 65);
  check_refused(over, 431, "64", limits);
}

TEST_CASE("exactly max_headers fields are accepted, one more is refused", "[http1]") {
  Limits limits;
  limits.max_headers = 3;
  std::string three = "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n";
  check_request(three + "\r\n", Want{.method = "GET", .path = "/"}, "", limits);
  check_refused(three + "C: 3\r\n\r\n", 431, "3 header fields", limits);
}

TEST_CASE("reason phrases of the answers (RFC 9110 15)", "[http1]") {
  using server::http1::reason_phrase;
  CHECK(reason_phrase(100) == "Continue");
  CHECK(reason_phrase(200) == "OK");
  CHECK(reason_phrase(400) == "Bad Request");
  CHECK(reason_phrase(413) == "Content Too Large");
  CHECK(reason_phrase(414) == "URI Too Long");
  CHECK(reason_phrase(415) == "Unsupported Media Type");
  CHECK(reason_phrase(417) == "Expectation Failed");
  CHECK(reason_phrase(431) == "Request Header Fields Too Large");  // RFC 6585 5
  CHECK(reason_phrase(501) == "Not Implemented");
  CHECK(reason_phrase(505) == "HTTP Version Not Supported");
}

TEST_CASE("a response head: status line, the server's headers, the blank line", "[http1]") {
  using server::http1::write_response_head;
  const std::time_t t = 1796371200;  // 2026-12-04 08:00:00 UTC
  std::string out = "kept|";
  write_response_head(out, {.status = 200, .content_type = "application/json", .content_length = 2},
                      t);
  CHECK(out ==
        "kept|HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
        "Date: Fri, 04 Dec 2026 08:00:00 GMT\r\n\r\n");
  out.clear();
  write_response_head(out,
                      {.status = 405,
                       .content_type = "text/plain",
                       .content_length = 0,
                       .allow_post = true,
                       .close = true},
                      t + 86'400 * 31 + 3'661);
  CHECK(out ==
        "HTTP/1.1 405 Method Not Allowed\r\nContent-Type: text/plain\r\nContent-Length: 0\r\n"
        "Date: Mon, 04 Jan 2027 09:01:01 GMT\r\nAllow: POST\r\nConnection: close\r\n\r\n");
}

// ---------------------------------------------------------------------------------------------
// RFC corner cases, each once got wrong by the parser.

TEST_CASE("Expect: 100-continue in HTTP/1.0 is ignored", "[http1]") {
  // RFC 9110 10.1.1: "A server that receives a 100-continue expectation in an HTTP/1.0 request
  // MUST ignore that expectation": an HTTP/1.0 client cannot read an interim 100.
  check_request("POST /mutate HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n{}",
                Want{.method = "POST",
                     .path = "/mutate",
                     .minor_version = 0,
                     .content_length = 2U,
                     .keep_alive = false,
                     .expect_continue = false},
                "{}");
}

TEST_CASE("a chunk size with 16 or more hex digits of leading zeros", "[http1]") {
  // RFC 9112 7.1: chunk-size = 1*HEXDIG, so "0000000000000005" is 5: the value counts, not the
  // number of digits.
  check_request(
      "POST /m HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
      "0000000000000005\r\nhello\r\n0\r\n\r\n",
      Want{.method = "POST", .path = "/m", .chunked = true}, "hello");
}

TEST_CASE("many small chunks within max_body_bytes", "[http1]") {
  // Chunk framing is bounded per size line, not over the whole body: 4000 one-byte chunks
  // ("1\r\nx\r\n", 20000 framing bytes, more than max_head_bytes) are a 4000-byte body.
  std::string request = "POST /m HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 4000; ++i) {
    request += "1\r\nx\r\n";
  }
  request += "0\r\n\r\n";
  std::string want = describe(done(Want{.method = "POST", .path = "/m", .chunked = true},
                                   std::string(4000, 'x'), request.size()));
  std::vector<std::string> one_byte_each;
  for (char c : request) {
    one_byte_each.emplace_back(1, c);
  }
  for (const auto& pieces : {std::vector<std::string>{request}, one_byte_each}) {
    std::vector<Parsed> got = drive(pieces, {});
    REQUIRE(got.size() == 1);
    INFO("error: " << got[0].error.message);
    CHECK(describe(got[0]) == want);
    CHECK(got[0].body == std::string(4000, 'x'));
  }
}

TEST_CASE("more than one Host in an HTTP/1.0 request", "[http1]") {
  // RFC 9112 3.2: 400 for any request with more than one Host header field line, whatever its
  // version.
  check_refused("GET / HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n", 400, "Host");
}

TEST_CASE("OPTIONS * is the asterisk form; a long chunk-size line or trailer is refused",
          "[http1]") {
  check_request("OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n", Want{.method = "OPTIONS", .path = "*"},
                "");
  check_refused("GET * HTTP/1.1\r\nHost: h\r\n\r\n", 400, "target");
  check_refused("POST /m HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n5;" +
                    std::string(1100, 'e') + "\r\nhello\r\n0\r\n\r\n",
                400, "1024 bytes");
  std::string trailers;
  for (int i = 0; i < 2100; ++i) {  // 16800 bytes, over max_head_bytes (16384)
    trailers += "X-T: v\r\n";
  }
  check_refused(
      "POST /m HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n" + trailers + "\r\n",
      400, "trailers");
}
