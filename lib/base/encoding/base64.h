#pragma once
// Standard base64 (RFC 4648, with padding): encoded by a table of character pairs, decoded by
// OpenSSL's EVP_DecodeBlock.

#include <optional>
#include <string>
#include <string_view>

namespace webhook {

std::string base64_encode(std::string_view bytes);
// Appends the encoding of `bytes` to `out` (no copy in between).
void append_base64(std::string& out, std::string_view bytes);

// nullopt when `text` is not valid padded base64.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace webhook
