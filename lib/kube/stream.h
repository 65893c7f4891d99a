#pragma once
// Reading API responses as they stream in, one object at a time, never the whole body.
//
// A list (`GET /api/v1/pods?limit=500`) can arrive whole even when paged — kube-apiserver serves
// lists from its watch cache without honouring `limit` — and 10,000 Pods are ~10 MiB of JSON. The
// ListScanner cuts each element of "items" out of the byte stream and parses that element alone:
//
//   kube::ListScanner scan(4 << 20, [&](nlohmann::json item) {
//     store(item);
//     return webhook::Status();
//   });
//   for (chunk : body) if (auto s = scan.feed(chunk); !s) return s;  // ResourceExhausted: too big
//   if (auto s = scan.finish(); !s) return s;                         // truncated body
//   scan.resource_version(); scan.continue_token();
//
// A watch is JSON lines (`{"type":"ADDED","object":{...}}\n`); LineSplitter yields each line:
//
//   kube::LineSplitter lines(4 << 20);
//   lines.feed(chunk, [&](std::string_view line) { return handle(line); });
//
// Both refuse an element or line longer than their bound with ResourceExhausted naming the bound,
// without buffering past it.

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "base/status/result.h"

namespace kube {

class LineSplitter {
 public:
  explicit LineSplitter(std::size_t max_line) : max_line_(max_line) {}
  // Calls `on_line` for every complete non-empty line in `bytes` (plus what earlier calls left
  // over), without the newline. Stops at, and returns, the first error `on_line` returns.
  webhook::Status feed(std::string_view bytes,
                       const std::function<webhook::Status(std::string_view)>& on_line);
  // Bytes of an unfinished line (a stream that ended mid-line was cut short).
  std::size_t pending() const { return partial_.size(); }

 private:
  std::size_t max_line_;
  std::string partial_;
};

class ListScanner {
 public:
  using ItemFn = std::function<webhook::Status(nlohmann::json item)>;

  ListScanner(std::size_t max_item, ItemFn on_item)
      : max_item_(max_item), on_item_(std::move(on_item)) {}

  // Scans more of the body. InvalidArgument when it is not a JSON object with an "items" array
  // of objects (or an item does not parse); ResourceExhausted when an item (or the list's
  // metadata) is longer than max_item; else whatever on_item returned.
  webhook::Status feed(std::string_view bytes);
  // InvalidArgument when the body ended before its closing brace.
  webhook::Status finish() const;

  std::size_t items() const { return items_; }
  // From the list's metadata ("" when absent).
  const std::string& resource_version() const { return resource_version_; }
  const std::string& continue_token() const { return continue_; }

 private:
  enum class Capture { kNone, kMetadata, kItem };
  webhook::Status feed_char(char c);
  webhook::Status capture_char(char c);
  void string_char(char c);
  std::optional<webhook::Status> open_string();
  std::optional<webhook::Status> open_value(char c);
  std::optional<webhook::Status> close_value();
  std::optional<webhook::Status> scalar_char() const;
  webhook::Status not_an_object() const;
  webhook::Status end_capture();

  std::size_t max_item_;
  ItemFn on_item_;
  int depth_ = 0;
  bool done_ = false;
  bool in_string_ = false;
  bool escape_ = false;
  bool expect_key_ = false;  // at depth 1: the next string is a key
  bool reading_key_ = false;
  std::string key_;        // the current key at depth 1
  bool in_items_ = false;  // inside the "items" array (depth 2)
  Capture capture_ = Capture::kNone;
  int capture_depth_ = 0;  // depth outside the captured value
  std::string buf_;
  std::size_t items_ = 0;
  std::size_t offset_ = 0;
  std::string resource_version_;
  std::string continue_;
};

}  // namespace kube
