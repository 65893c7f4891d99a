#pragma once
// A strict, incremental HTTP/1.1 request parser (RFC 9112) for a server that must never be
// confused by what a client sends: no sockets, no allocation beyond the head's fields, every
// size bounded. The transport (server::HttpServer) feeds it bytes as they arrive.
//
//   server::http1::RequestParser p(limits);
//   p.feed(bytes);                          // as often as bytes arrive
//   switch (p.state()) {
//     case State::kHead: ...                // need more bytes
//     case State::kBody: ...                // head done: p.head() is valid; more body to come
//     case State::kDone: ...                // p.head() and p.body() complete; the bytes
//                                           // feed() did not consume are the next request
//     case State::kError: ...               // p.error(): the status and why; answer it, then
//                                           // close the connection without reading more
//   }
//   p.reset();                              // the next request on a keep-alive connection
//
// Refusals (docs/server.md "Framing"), each answered and followed by closing the connection:
//   400  a malformed request line or header line, bare LF, obs-fold, whitespace before a colon,
//        control characters, a Content-Length that is not digits or disagrees with another, a
//        Transfer-Encoding together with Content-Length, an HTTP/1.1 request without a Host or
//        any request with two, a malformed chunk (or a chunk-size line over 1 KiB)
//   413  a Content-Length (or chunked total) over max_body_bytes: known from the head, so the
//        body is never waited for
//   414  a request line longer than max_request_line
//   415  a Content-Encoding other than identity
//   417  an Expect other than 100-continue
//   431  a head longer than max_head_bytes, or more than max_headers fields
//   501  a method this server does not implement, a Transfer-Encoding other than chunked
//   505  an HTTP major version other than 1 (1.2 and later minors are read as 1.1, RFC 9112
//        2.3)

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

namespace server::http1 {

struct Limits {
  std::size_t max_request_line = 8192;
  std::size_t max_head_bytes = 16384;  // request line and header fields, CRLFs included
  int max_headers = 100;
  std::size_t max_body_bytes = std::size_t{7} << 20;
};

struct Head {
  std::string method;
  std::string path;  // the target's path: origin-form as is, absolute-form without scheme/host
  int minor_version = 1;
  std::string content_type;
  std::optional<std::uint64_t> content_length;
  bool chunked = false;
  bool keep_alive = true;        // HTTP/1.1 without "Connection: close", or 1.0 with keep-alive
  bool expect_continue = false;  // "Expect: 100-continue"
  bool body_too_large = false;   // the declared length is over max_body_bytes (state kError)
};

struct ParseError {
  int status = 400;
  std::string message;
};

enum class State { kHead, kBody, kDone, kError };

class RequestParser {
 public:
  explicit RequestParser(Limits limits) : limits_(limits) {}

  // Consumes bytes; stops where the head ends (so the caller can act on it before the body),
  // at the end of the request (kDone) or at the first error. Returns how many bytes of `data`
  // were consumed; feed the rest again (body bytes, or the next request's).
  std::size_t feed(std::string_view data);

  State state() const { return state_; }
  const Head& head() const { return head_; }
  const std::string& body() const { return body_; }
  const ParseError& error() const { return error_; }
  // A request has begun: something other than the empty lines a request line may follow (RFC
  // 9112 2.2, ignored) was consumed.
  bool begun() const {
    return state_ != State::kHead || saw_request_line_ ||
           line_.find_first_not_of('\r') != std::string::npos;
  }
  // The body length still expected when the length is known (Content-Length), else 0.
  std::size_t body_remaining() const;
  // Reserves room for the declared body (the transport calls it once the memory is granted).
  void reserve_body();

  // Forget the request and free what it took, keep the limits.
  void reset();

 private:
  enum class Chunk { kSize, kData, kDataEnd, kTrailer };

  std::size_t feed_head(std::string_view data);
  std::size_t feed_body(std::string_view data);
  std::size_t feed_chunked(std::string_view data);
  // How much of `data` belongs to the current line: through its LF, or all of it.
  static std::size_t line_extent(std::string_view data, bool& has_lf);
  // Takes the completed line_'s CR off; false (parser failed) on a bare LF.
  bool end_line(std::string_view bare_lf);
  void take_line(std::string_view line);
  bool parse_request_line(std::string_view line);
  bool parse_header(std::string_view line);
  bool finish_head();
  bool fail(int status, std::string message);
  void chunk_size_line(std::string_view line);
  void trailer_line(std::string_view line);

  Limits limits_;
  State state_ = State::kHead;
  Head head_;
  std::string body_;
  ParseError error_;
  std::string line_;  // the current line of the head (or chunk framing), without its CRLF
  std::size_t head_bytes_ = 0;
  int header_count_ = 0;
  bool saw_request_line_ = false;
  int host_count_ = 0;
  bool has_transfer_encoding_ = false;
  std::string transfer_encoding_;
  std::string content_encoding_;
  std::string expect_;
  std::string connection_;
  Chunk chunk_ = Chunk::kSize;
  std::uint64_t chunk_left_ = 0;
  std::size_t framing_bytes_ = 0;  // chunk-size lines and trailers, bounded by max_head_bytes
};

// The reason phrase of a status line: "OK", "Content Too Large", ...
std::string_view reason_phrase(int status);

// What a response's head says.
struct ResponseHead {
  int status = 200;
  std::string_view content_type;
  std::size_t content_length = 0;
  bool allow_post = false;  // "Allow: POST" (405)
  bool close = false;       // "Connection: close"
};
// Appends the head: "HTTP/1.1 <status> <reason>", Content-Type, Content-Length, the Date of
// `now` (RFC 9110 5.6.7), Allow and Connection when set, and the blank line.
//   HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n
//   Date: Fri, 04 Dec 2026 08:00:00 GMT\r\n\r\n
void write_response_head(std::string& out, const ResponseHead& head, std::time_t now);

}  // namespace server::http1
