#include "dryrun/documents.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/yaml.h>

#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>

#include "admission/review.h"

namespace dryrun {
namespace {

constexpr std::string_view kStrTag = "tag:yaml.org,2002:str";

// kubectl's YAML decoder (go-yaml, YAML 1.1) resolves these plain scalars to booleans.
std::optional<bool> yaml_bool(std::string_view s) {
  for (std::string_view t :
       {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y"}) {
    if (s == t) {
      return true;
    }
  }
  for (std::string_view f :
       {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF", "n", "N"}) {
    if (s == f) {
      return false;
    }
  }
  return std::nullopt;
}

bool is_yaml_null(std::string_view s) {
  return s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL";
}

// A plain scalar typed as YAML resolves it: null, bool, integer, float, else string.
json plain_scalar(const std::string& s) {
  if (is_yaml_null(s)) {
    return nullptr;
  }
  if (std::optional<bool> b = yaml_bool(s)) {
    return *b;
  }
  const char* first = s.data();
  const char* last = s.data() + s.size();
  bool numeric_start = (s[0] >= '0' && s[0] <= '9') || s[0] == '-' || s[0] == '+' || s[0] == '.';
  if (!numeric_start) {
    return s;
  }
  const char* digits = (s[0] == '+') ? first + 1 : first;
  std::int64_t i = 0;
  if (auto [p, ec] = std::from_chars(digits, last, i); ec == std::errc() && p == last) {
    return i;
  }
  std::uint64_t u = 0;
  if (auto [p, ec] = std::from_chars(digits, last, u); ec == std::errc() && p == last) {
    return u;
  }
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'o')) {
    int base = s[1] == 'x' ? 16 : 8;
    if (auto [p, ec] = std::from_chars(first + 2, last, i, base); ec == std::errc() && p == last) {
      return i;
    }
  }
  if (s == ".inf" || s == "+.inf" || s == "-.inf" || s == ".nan") {
    return s;  // JSON has no infinities or NaN; keep the text
  }
  double d = 0;
  if (auto [p, ec] = std::from_chars(digits, last, d);
      ec == std::errc() && p == last && std::isfinite(d)) {
    return d;
  }
  return s;
}

// Raised inside yaml-cpp's callbacks to stop parsing; caught in parse_yaml.
struct StopParsing {
  webhook::Error error;
};

// Builds nlohmann::json straight from yaml-cpp's parse events (no YAML::Node graph), with the
// bounds: nesting depth, and a budget of values that alias copies also spend.
class JsonBuilder : public YAML::EventHandler {
 public:
  explicit JsonBuilder(std::size_t budget) : budget_(budget) {}

  // The finished document; null for an empty one.
  json take() { return std::move(root_); }
  // Where the last document started, in bytes and lines.
  int document_start() const { return start_.pos; }
  int document_line() const { return start_.line; }

  void OnDocumentStart(const YAML::Mark& mark) override {
    root_ = nullptr;
    start_ = mark;
  }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    spend(1, mark);
    add(json(nullptr), anchor, 1, mark);
  }
  void OnAlias(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    auto it = anchors_.find(anchor);
    if (it == anchors_.end()) {
      fail(mark, "an alias refers to an anchor that is not complete (a recursive alias?)",
           webhook::ErrorCode::kInvalidArgument);
    }
    spend(it->second.second, mark);  // an alias costs as much as the value it copies
    add(it->second.first, 0, it->second.second, mark);
  }
  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    bool as_string = tag == "!" || tag == kStrTag;  // quoted, or explicitly a string
    spend(1, mark);
    add(as_string ? json(value) : plain_scalar(value), anchor, 1, mark);
  }
  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    open(json::array(), anchor, mark);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    open(json::object(), anchor, mark);
  }
  void OnMapEnd() override { close(); }

 private:
  struct Frame {
    json value;
    YAML::anchor_t anchor = 0;
    std::size_t nodes = 1;
    std::optional<std::string> key;  // maps: the key waiting for its value
  };

  [[noreturn]] static void fail(const YAML::Mark& mark, const std::string& what,
                                webhook::ErrorCode code) {
    throw StopParsing{{code, (code == webhook::ErrorCode::kInvalidArgument
                                  ? "not valid YAML: line " + std::to_string(mark.line + 1) + ": "
                                  : std::string()) +
                                 what}};
  }

  void spend(std::size_t nodes, const YAML::Mark& mark) {
    count_ += nodes;
    if (count_ > budget_) {
      fail(mark,
           "YAML aliases expand to more than " + std::to_string(budget_) +
               " values, far more than the text holds; refusing it (an alias bomb?)",
           webhook::ErrorCode::kResourceExhausted);
    }
  }

  void open(json value, YAML::anchor_t anchor, const YAML::Mark& mark) {
    if (stack_.size() >= static_cast<std::size_t>(admission::kMaxJsonDepth)) {
      fail(mark,
           "YAML nesting is deeper than " + std::to_string(admission::kMaxJsonDepth) +
               " levels; a Kubernetes object is far shallower",
           webhook::ErrorCode::kResourceExhausted);
    }
    spend(1, mark);
    stack_.push_back({std::move(value), anchor, 1, std::nullopt});
  }

  void close() {
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    add(std::move(f.value), f.anchor, f.nodes, YAML::Mark());
  }

  // Places a finished value (already paid for) into its parent, or as the document root.
  void add(json value, YAML::anchor_t anchor, std::size_t nodes, const YAML::Mark& mark) {
    if (anchor != 0) {
      anchors_[anchor] = {value, nodes};
    }
    if (stack_.empty()) {
      root_ = std::move(value);
      return;
    }
    Frame& parent = stack_.back();
    parent.nodes += nodes;
    if (parent.value.is_array()) {
      parent.value.push_back(std::move(value));
      return;
    }
    if (!parent.key) {
      if (!value.is_string() && !value.is_number() && !value.is_boolean() && !value.is_null()) {
        fail(mark, "a map key is not a plain string; Kubernetes objects use string keys",
             webhook::ErrorCode::kInvalidArgument);
      }
      parent.key = value.is_string() ? value.get<std::string>() : webhook::dump_json(value);
      return;
    }
    parent.value[*parent.key] = std::move(value);
    parent.key.reset();
  }

  std::size_t budget_;
  std::size_t count_ = 0;
  std::vector<Frame> stack_;
  std::map<YAML::anchor_t, std::pair<json, std::size_t>> anchors_;
  json root_;
  YAML::Mark start_;
};

webhook::Result<std::vector<json>> parse_json(std::string_view text) {
  if (webhook::Status s = admission::check_json_depth(text, admission::kMaxJsonDepth); !s) {
    return s.error();
  }
  try {
    std::vector<json> out;
    out.push_back(json::parse(text));
    return out;
  } catch (const json::exception& e) {
    std::string what = e.what();
    // "[json.exception.parse_error.101] parse error at line 1, column 5: ..." -> from "line".
    std::size_t at = what.find("line ");
    return webhook::invalid_argument("not valid JSON: " +
                                     (at == std::string::npos ? what : what.substr(at)));
  }
}

webhook::Result<std::vector<json>> parse_yaml(std::string_view text) {
  constexpr std::size_t kMaxDocuments = 10'000;
  std::istringstream in{std::string(text)};
  // Aliases may repeat values; a document holds at most a few values per byte of text.
  JsonBuilder builder(4 * text.size() + 10'000);
  std::vector<json> out;
  try {
    YAML::Parser parser(in);
    std::size_t documents = 0;
    int last_start = -1;
    while (parser.HandleNextDocument(builder)) {
      // yaml-cpp 0.7 can report the same document forever on some malformed input (LoadAll
      // hangs on it): stop when a document starts where the previous one did.
      if (builder.document_start() == last_start) {
        return webhook::invalid_argument("not valid YAML: line " +
                                         std::to_string(builder.document_line() + 1) +
                                         ": the document cannot be parsed");
      }
      last_start = builder.document_start();
      if (++documents > kMaxDocuments) {
        return webhook::Error{webhook::ErrorCode::kResourceExhausted,
                              "more than " + std::to_string(kMaxDocuments) + " YAML documents"};
      }
      json doc = builder.take();
      if (!doc.is_null()) {
        out.push_back(std::move(doc));
      }
    }
  } catch (const StopParsing& stop) {
    return stop.error;
  } catch (const YAML::DeepRecursion&) {
    return webhook::Error{webhook::ErrorCode::kResourceExhausted,
                          "YAML nesting is deeper than " +
                              std::to_string(admission::kMaxJsonDepth) +
                              " levels; a Kubernetes object is far shallower"};
  } catch (const YAML::Exception& e) {
    return webhook::invalid_argument("not valid YAML: line " + std::to_string(e.mark.line + 1) +
                                     ", column " + std::to_string(e.mark.column + 1) + ": " +
                                     e.msg);
  }
  return out;
}

}  // namespace

bool reads_back_as_string(const std::string& text) { return plain_scalar(text).is_string(); }

// The offset of the first byte that is not part of a well-formed UTF-8 sequence, or npos.
std::size_t invalid_utf8_at(std::string_view text) {
  std::size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    std::size_t len = c < 0x80           ? 1
                      : (c >> 5) == 0x6  ? 2
                      : (c >> 4) == 0xE  ? 3
                      : (c >> 3) == 0x1E ? 4
                                         : 0;
    if (len == 0 || (len == 2 && c < 0xC2) || i + len > text.size()) {
      return i;
    }
    for (std::size_t k = 1; k < len; ++k) {
      if ((static_cast<unsigned char>(text[i + k]) & 0xC0) != 0x80) {
        return i;
      }
    }
    if (len == 3) {  // no overlong forms, no UTF-16 surrogates
      auto c1 = static_cast<unsigned char>(text[i + 1]);
      if ((c == 0xE0 && c1 < 0xA0) || (c == 0xED && c1 >= 0xA0)) {
        return i;
      }
    }
    if (len == 4) {  // no overlong forms, nothing above U+10FFFF
      auto c1 = static_cast<unsigned char>(text[i + 1]);
      if ((c == 0xF0 && c1 < 0x90) || (c == 0xF4 && c1 >= 0x90) || c > 0xF4) {
        return i;
      }
    }
    i += len;
  }
  return std::string_view::npos;
}

webhook::Result<std::vector<json>> parse_documents(std::string_view text) {
  if (const void* nul = std::memchr(text.data(), '\0', text.size())) {
    return webhook::invalid_argument("binary data (a NUL byte at offset " +
                                     std::to_string(static_cast<const char*>(nul) - text.data()) +
                                     "); expected YAML or JSON text");
  }
  if (std::size_t bad = invalid_utf8_at(text); bad != std::string_view::npos) {
    return webhook::invalid_argument("not UTF-8 text (an invalid byte at offset " +
                                     std::to_string(bad) + "); YAML and JSON inputs are UTF-8");
  }
  std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    return webhook::invalid_argument("empty input; expected YAML or JSON with a Kubernetes object");
  }
  webhook::Result<std::vector<json>> docs =
      (text[first] == '{' || text[first] == '[') ? parse_json(text) : parse_yaml(text);
  if (docs && docs->empty()) {
    return webhook::invalid_argument(
        "no documents; expected YAML or JSON with a Kubernetes object");
  }
  return docs;
}

}  // namespace dryrun
