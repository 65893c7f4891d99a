#include "base/encoding/base64.h"

#include <openssl/evp.h>

namespace webhook {

void append_base64(std::string& out, std::string_view bytes) {
  std::size_t start = out.size();
  out.resize(start + 4 * ((bytes.size() + 2) / 3));
  int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data() + start),
                          reinterpret_cast<const unsigned char*>(bytes.data()),
                          static_cast<int>(bytes.size()));
  out.resize(start + static_cast<std::size_t>(n));
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
