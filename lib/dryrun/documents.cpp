#include "dryrun/documents.h"

#include <charconv>
#include <cmath>
#include <cstring>

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include "admission/review.h"

namespace dryrun {
namespace {

constexpr std::string_view kStrTag = "tag:yaml.org,2002:str";

// kubectl's YAML decoder (go-yaml, YAML 1.1) resolves these plain scalars to booleans.
std::optional<bool> yaml_bool(std::string_view s) {
  for (std::string_view t : {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON", "y", "Y"}) {
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
  if (auto [p, ec] = std::from_chars(digits, last, d); ec == std::errc() && p == last &&
                                                        std::isfinite(d)) {
    return d;
  }
  return s;
}

class Converter {
 public:
  explicit Converter(std::size_t budget) : budget_(budget) {}

  webhook::Result<json> convert(const YAML::Node& node, int depth) {
    if (++count_ > budget_) {
      return webhook::Error{webhook::ErrorCode::kResourceExhausted,
                            "YAML aliases expand to more than " + std::to_string(budget_) +
                                " values, far more than the text holds; refusing it (an alias "
                                "bomb?)"};
    }
    if (depth > admission::kMaxJsonDepth) {
      return webhook::Error{webhook::ErrorCode::kResourceExhausted,
                            "YAML nesting is deeper than " +
                                std::to_string(admission::kMaxJsonDepth) +
                                " levels; a Kubernetes object is far shallower"};
    }
    switch (node.Type()) {
      case YAML::NodeType::Undefined:
      case YAML::NodeType::Null:
        return json(nullptr);
      case YAML::NodeType::Scalar:
        if (node.Tag() == "!" || node.Tag() == kStrTag) {
          return json(node.Scalar());  // quoted or explicitly a string
        }
        return plain_scalar(node.Scalar());
      case YAML::NodeType::Sequence: {
        json out = json::array();
        for (const YAML::Node& item : node) {
          webhook::Result<json> v = convert(item, depth + 1);
          if (!v) {
            return v.error();
          }
          out.push_back(std::move(v).value());
        }
        return out;
      }
      case YAML::NodeType::Map: {
        json out = json::object();
        for (const auto& kv : node) {
          if (!kv.first.IsScalar()) {
            return webhook::invalid_argument(
                "line " + std::to_string(kv.first.Mark().line + 1) +
                ": a map key is not a plain string; Kubernetes objects use string keys");
          }
          webhook::Result<json> v = convert(kv.second, depth + 1);
          if (!v) {
            return v.error();
          }
          out[kv.first.Scalar()] = std::move(v).value();
        }
        return out;
      }
    }
    return json(nullptr);
  }

 private:
  std::size_t budget_;
  std::size_t count_ = 0;
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
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(std::string(text));
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
  // Aliases may repeat nodes; a document can hold at most a few values per byte of text.
  Converter converter(4 * text.size() + 10'000);
  std::vector<json> out;
  for (const YAML::Node& d : docs) {
    webhook::Result<json> v = converter.convert(d, 0);
    if (!v) {
      return v.error();
    }
    if (!v->is_null()) {
      out.push_back(std::move(v).value());
    }
  }
  return out;
}

}  // namespace

bool reads_back_as_string(const std::string& text) { return plain_scalar(text).is_string(); }

webhook::Result<std::vector<json>> parse_documents(std::string_view text) {
  if (const void* nul = std::memchr(text.data(), '\0', text.size())) {
    return webhook::invalid_argument(
        "binary data (a NUL byte at offset " +
        std::to_string(static_cast<const char*>(nul) - text.data()) +
        "); expected YAML or JSON text");
  }
  std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    return webhook::invalid_argument("empty input; expected YAML or JSON with a Kubernetes object");
  }
  webhook::Result<std::vector<json>> docs =
      (text[first] == '{' || text[first] == '[') ? parse_json(text) : parse_yaml(text);
  if (docs && docs->empty()) {
    return webhook::invalid_argument("no documents; expected YAML or JSON with a Kubernetes object");
  }
  return docs;
}

}  // namespace dryrun
