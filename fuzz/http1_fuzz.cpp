// libFuzzer target (e): bytes -> server::http1::RequestParser, fed whole and split where the
// first byte says. Properties checked on every input: no crash, no sanitizer report; feed()
// never consumes more than it is given; the same bytes give the same outcome however they are
// split; after an error nothing more is consumed; a body never exceeds max_body_bytes; a
// request has begun (begun()) once the head holds a byte other than CR and LF, or the parser has
// left the head, and not before.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/http1.h"

namespace {

struct Outcome {
  server::http1::State state;
  int status;
  std::string method, path, body;
  std::size_t requests;
};

Outcome run(std::string_view bytes, std::size_t split) {
  server::http1::Limits limits;
  limits.max_head_bytes = 4096;
  limits.max_request_line = 1024;
  limits.max_body_bytes = 65536;
  server::http1::RequestParser p(limits);
  Outcome out{server::http1::State::kHead, 0, "", "", "", 0};
  std::string_view pieces[2] = {bytes.substr(0, split), bytes.substr(split)};
  bool content = false;  // a byte other than CR and LF consumed since the last reset
  for (std::string_view piece : pieces) {
    while (!piece.empty()) {
      std::size_t used = p.feed(piece);
      if (used > piece.size() || p.body().size() > limits.max_body_bytes) {
        __builtin_trap();
      }
      content = content || piece.substr(0, used).find_first_not_of("\r\n") != piece.npos;
      if (p.begun() != (content || p.state() != server::http1::State::kHead)) {
        __builtin_trap();
      }
      piece.remove_prefix(used);
      if (p.state() == server::http1::State::kError) {
        if (!piece.empty() && p.feed(piece) != 0) {
          __builtin_trap();  // nothing after a refused head is parsed
        }
        out.state = p.state();
        out.status = p.error().status;
        return out;
      }
      if (p.state() == server::http1::State::kDone) {
        ++out.requests;
        out.method = p.head().method;
        out.path = p.head().path;
        out.body = p.body();
        p.reset();
        content = false;
      } else if (used == 0) {
        __builtin_trap();  // needs more bytes yet consumed none
      }
    }
  }
  out.state = p.state();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) {
    return 0;
  }
  std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  Outcome whole = run(bytes, bytes.size());
  Outcome split = run(bytes, data[0] % (bytes.size() + 1));
  if (whole.state != split.state || whole.status != split.status ||
      whole.requests != split.requests || whole.method != split.method ||
      whole.path != split.path || whole.body != split.body) {
    __builtin_trap();
  }
  return 0;
}
