#include "podpatch/patch.h"

#include <string>

#include "base/json/access.h"
#include "base/json/write.h"

namespace podpatch {
namespace {

bool is_container(const json& v) { return v.is_object() || v.is_array(); }

void append_value(PatchText& out, std::string_view op, const std::string& path, const json& v) {
  out.begin_value(op, path) += webhook::dump_json(v);
  out.end_value();
}

}  // namespace

void append_pointer_token(std::string& path, std::string_view token) {
  path.push_back('/');
  for (char c : token) {
    if (c == '~') {
      path += "~0";
    } else if (c == '/') {
      path += "~1";
    } else {
      path.push_back(c);
    }
  }
}

void PatchText::head(std::string_view name, std::string_view path) {
  if (count_++ > 0) {
    out_.push_back(',');
  }
  out_ += R"({"op":")";
  out_ += name;
  out_ += R"(","path":)";
  webhook::append_json_string(out_, path);
}

void PatchText::op(std::string_view name, std::string_view path, std::string_view value) {
  head(name, path);
  out_ += R"(,"value":)";
  out_ += value;
  out_.push_back('}');
}

void PatchText::remove(std::string_view path) {
  head("remove", path);
  out_.push_back('}');
}

std::string& PatchText::begin_value(std::string_view op, std::string_view path) {
  head(op, path);
  out_ += R"(,"value":)";
  return out_;
}

void write_diff(const json& source, const json& target, std::string& path, PatchText& out) {
  if (!is_container(source) || !is_container(target) || source.type() != target.type()) {
    if (source != target) {  // json's == also equates 1 and 1.0, as nlohmann's diff does
      append_value(out, "replace", path, target);
    }
    return;
  }
  const std::size_t base = path.size();
  if (source.is_array()) {
    std::size_t i = 0;
    for (; i < source.size() && i < target.size(); ++i) {
      path += '/';
      path += std::to_string(i);
      write_diff(source[i], target[i], path, out);
      path.resize(base);
    }
    for (std::size_t k = source.size(); k > i; --k) {  // removes, last element first
      path += '/';
      path += std::to_string(k - 1);
      out.remove(path);
      path.resize(base);
    }
    path += "/-";
    for (; i < target.size(); ++i) {
      append_value(out, "add", path, target[i]);
    }
    path.resize(base);
    return;
  }
  for (auto it = source.cbegin(); it != source.cend(); ++it) {
    append_pointer_token(path, it.key());
    auto t = target.find(it.key());
    if (t != target.end()) {
      write_diff(it.value(), *t, path, out);
    } else {
      out.remove(path);
    }
    path.resize(base);
  }
  for (auto it = target.cbegin(); it != target.cend(); ++it) {
    if (!source.contains(it.key())) {
      append_pointer_token(path, it.key());
      append_value(out, "add", path, it.value());
      path.resize(base);
    }
  }
}

json diff(const json& source, const json& target) {
  std::string text;
  PatchText out(text);
  std::string path;
  write_diff(source, target, path, out);
  out.finish();
  return json::parse(text);
}

}  // namespace podpatch
