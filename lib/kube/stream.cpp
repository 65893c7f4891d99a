#include "kube/stream.h"

namespace kube {
namespace {

constexpr std::size_t kMaxKey = 256;

webhook::Status too_big(std::string_view what, std::size_t limit) {
  return webhook::Error{webhook::ErrorCode::kResourceExhausted,
                        std::string(what) + " is larger than the " + std::to_string(limit) +
                            "-byte bound on one object; refused"};
}

}  // namespace

webhook::Status LineSplitter::feed(
    std::string_view bytes, const std::function<webhook::Status(std::string_view)>& on_line) {
  while (!bytes.empty()) {
    std::size_t nl = bytes.find('\n');
    std::string_view part = bytes.substr(0, nl);
    if (partial_.size() + part.size() > max_line_) {
      partial_.clear();
      partial_.shrink_to_fit();
      return too_big("a watch event", max_line_);
    }
    if (nl == std::string_view::npos) {
      partial_.append(part);
      return {};
    }
    bytes.remove_prefix(nl + 1);
    std::string_view line = part;
    if (!partial_.empty()) {
      partial_.append(part);
      line = partial_;
    }
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) {
      line.remove_suffix(1);
    }
    webhook::Status s = line.empty() ? webhook::Status() : on_line(line);
    partial_.clear();
    if (!s) {
      return s;
    }
  }
  return {};
}

webhook::Status ListScanner::feed(std::string_view bytes) {
  for (char c : bytes) {
    if (webhook::Status s = feed_char(c); !s) {
      return s;
    }
    ++offset_;
  }
  return {};
}

webhook::Status ListScanner::finish() const {
  if (!done_) {
    return webhook::invalid_argument("the list response ended after " + std::to_string(offset_) +
                                     " bytes, before its closing brace (cut short)");
  }
  return {};
}

webhook::Status ListScanner::end_capture() {
  Capture what = capture_;
  capture_ = Capture::kNone;
  nlohmann::json value = nlohmann::json::parse(buf_, nullptr, /*allow_exceptions=*/false);
  std::string().swap(buf_);  // release an item's worth of memory at once
  if (value.is_discarded()) {
    return webhook::invalid_argument("item " + std::to_string(items_) +
                                     " of the list is not valid JSON");
  }
  if (what == Capture::kMetadata) {
    if (auto it = value.find("resourceVersion"); it != value.end() && it->is_string()) {
      resource_version_ = it->get<std::string>();
    }
    if (auto it = value.find("continue"); it != value.end() && it->is_string()) {
      continue_ = it->get<std::string>();
    }
    return {};
  }
  ++items_;
  return on_item_(std::move(value));
}

// One byte of the list: captured when inside the metadata or an item, then read by the scanner.
webhook::Status ListScanner::feed_char(char c) {
  if (webhook::Status s = capture_char(c); !s) {
    return s;
  }
  if (in_string_) {
    string_char(c);
    return {};
  }
  std::optional<webhook::Status> read;  // nullopt: `c` has no place here
  switch (c) {
    case ' ':
    case '\n':
    case '\r':
    case '\t':
      return {};
    case '"':
      read = open_string();
      break;
    case '{':
    case '[':
      read = open_value(c);
      break;
    case '}':
    case ']':
      read = close_value();
      break;
    case ':':
    case ',':
      if (depth_ == 1) {
        expect_key_ = c == ',';
      }
      return {};
    default:
      read = scalar_char();
      break;
  }
  if (read) {
    return *read;
  }
  return webhook::invalid_argument("the list response is not a JSON object (unexpected " +
                                   std::string(1, c) + " at byte " + std::to_string(offset_) + ")");
}

// Keeps `c` in the value being captured, within max_item.
webhook::Status ListScanner::capture_char(char c) {
  if (capture_ == Capture::kNone) {
    return {};
  }
  if (buf_.size() >= max_item_) {
    bool metadata = capture_ == Capture::kMetadata;
    capture_ = Capture::kNone;
    std::string().swap(buf_);
    return too_big(
        metadata ? "the list's metadata" : "item " + std::to_string(items_) + " of the list",
        max_item_);
  }
  buf_.push_back(c);
  return {};
}

// A byte inside a string: kept when the string is a key at depth 1; an unescaped quote ends it.
void ListScanner::string_char(char c) {
  if (reading_key_ && key_.size() < kMaxKey && (escape_ || c != '"')) {
    key_.push_back(c);
  }
  if (escape_) {
    escape_ = false;
  } else if (c == '\\') {
    escape_ = true;
  } else if (c == '"') {
    in_string_ = false;
    reading_key_ = false;
  }
}

webhook::Status ListScanner::not_an_object() const {
  return webhook::invalid_argument("item " + std::to_string(items_) +
                                   " of the list is not an object");
}

std::optional<webhook::Status> ListScanner::open_string() {
  if (done_) {
    return std::nullopt;
  }
  in_string_ = true;
  if (depth_ == 1 && expect_key_) {
    reading_key_ = true;
    key_.clear();
  } else if (depth_ == 2 && in_items_ && capture_ == Capture::kNone) {
    return not_an_object();
  }
  return webhook::Status{};
}

// `{` or `[`: the list's metadata and each item are captured; "items" opens the items.
std::optional<webhook::Status> ListScanner::open_value(char c) {
  if (done_ || (depth_ == 0 && c != '{')) {
    return std::nullopt;
  }
  if (depth_ == 1 && !expect_key_) {
    if (key_ == "metadata" && c == '{') {
      capture_ = Capture::kMetadata;
      capture_depth_ = depth_;
      buf_.assign(1, c);
    } else if (key_ == "items" && c == '[') {
      in_items_ = true;
    }
  } else if (depth_ == 2 && in_items_ && capture_ == Capture::kNone) {
    if (c != '{') {
      return not_an_object();
    }
    capture_ = Capture::kItem;
    capture_depth_ = depth_;
    buf_.assign(1, c);
  }
  ++depth_;
  if (depth_ == 1) {
    expect_key_ = true;
  }
  return webhook::Status{};
}

// `}` or `]`: ends a capture, the items, or the list.
std::optional<webhook::Status> ListScanner::close_value() {
  if (depth_ == 0) {
    return std::nullopt;
  }
  --depth_;
  if (capture_ != Capture::kNone && depth_ == capture_depth_) {
    return end_capture();
  }
  if (depth_ == 1 && in_items_) {
    in_items_ = false;
  }
  if (depth_ == 0) {
    done_ = true;
  }
  return webhook::Status{};
}

// Any other byte: part of a number, true, false or null; never an item.
std::optional<webhook::Status> ListScanner::scalar_char() const {
  if (depth_ == 0) {
    return std::nullopt;
  }
  if (depth_ == 2 && in_items_ && capture_ == Capture::kNone) {
    return not_an_object();
  }
  return webhook::Status{};
}

}  // namespace kube
