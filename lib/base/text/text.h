#pragma once
// Small text helpers shared by every room.

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace webhook {

// `s` in double quotes, as messages show user values: quote("4x") == "\"4x\"".
inline std::string quote(std::string_view s) {
  std::string out;
  out.reserve(s.size() + 2);
  out.push_back('"');
  out.append(s);
  out.push_back('"');
  return out;
}

// The most bytes of a user-given name a message shows: a DNS subdomain's limit, so that every
// valid Kubernetes name is shown whole.
inline constexpr std::size_t kMaxShownBytes = 253;

// The length of the longest start of `s` of at most kMaxShownBytes bytes that does not end
// inside a UTF-8 sequence (a message stays valid UTF-8).
inline std::size_t shown_length(std::string_view s) {
  if (s.size() <= kMaxShownBytes) {
    return s.size();
  }
  std::size_t n = kMaxShownBytes;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0U) == 0x80U) {
    --n;  // s[n] continues the sequence before it: cut before that sequence
  }
  return n;
}

// What a cut name is followed by: "…(<its length> bytes)".
inline std::string cut_marker(std::size_t bytes) {
  return "\u2026(" + std::to_string(bytes) + " bytes)";
}

// `s` as a message shows a name: whole when at most kMaxShownBytes bytes, else its start and
// cut_marker: bounded(a 1000-byte name) == "<its first 253 bytes>…(1000 bytes)".
inline std::string bounded(std::string_view s) {
  std::size_t n = shown_length(s);
  return n == s.size() ? std::string(s) : std::string(s.substr(0, n)) + cut_marker(s.size());
}

// quote(s) for a name that may be long: quote_bounded(a 1000-byte name) ==
// "\"<its first 253 bytes>\"…(1000 bytes)".
inline std::string quote_bounded(std::string_view s) {
  std::size_t n = shown_length(s);
  return n == s.size() ? quote(s) : quote(s.substr(0, n)) + cut_marker(s.size());
}

// The rows as lines of columns padded to align (two spaces between columns, none after the
// last), each line after `indent`: the tables webhook-dryrun and kubectl-tpu_slice print.
inline std::string aligned_columns(const std::vector<std::vector<std::string>>& rows,
                                   std::string_view indent = "") {
  std::vector<std::size_t> width;
  for (const auto& row : rows) {
    width.resize(std::max(width.size(), row.size()));
    for (std::size_t i = 0; i < row.size(); ++i) {
      width[i] = std::max(width[i], row[i].size());
    }
  }
  std::string out;
  for (const auto& row : rows) {
    out += indent;
    for (std::size_t i = 0; i < row.size(); ++i) {
      out += row[i];
      if (i + 1 < row.size()) {
        out.append(width[i] - row[i].size() + 2, ' ');
      }
    }
    out += '\n';
  }
  return out;
}

}  // namespace webhook
