#include "podpatch/patch.h"

#include <string>

namespace podpatch {
namespace {

void append_escaped(std::string& path, const std::string& key) {
  path.push_back('/');
  for (char c : key) {
    if (c == '~') {
      path += "~0";
    } else if (c == '/') {
      path += "~1";
    } else {
      path.push_back(c);
    }
  }
}

json op(const char* name, const std::string& path) {
  json o = json::object();
  o["op"] = name;
  o["path"] = path;
  return o;
}

bool is_container(const json& v) { return v.is_object() || v.is_array(); }

// Appends to `out` the operations turning `source` into `target` at `path`; `path` is restored
// before returning.
void diff_into(const json& source, const json& target, std::string& path, json& out) {
  if (!is_container(source) || !is_container(target) || source.type() != target.type()) {
    if (source != target) {  // json's == also equates 1 and 1.0, as nlohmann's diff does
      json o = op("replace", path);
      o["value"] = target;
      out.push_back(std::move(o));
    }
    return;
  }
  const std::size_t base = path.size();
  if (source.is_array()) {
    std::size_t i = 0;
    for (; i < source.size() && i < target.size(); ++i) {
      path += '/';
      path += std::to_string(i);
      diff_into(source[i], target[i], path, out);
      path.resize(base);
    }
    for (std::size_t k = source.size(); k > i; --k) {  // removes, last element first
      path += '/';
      path += std::to_string(k - 1);
      out.push_back(op("remove", path));
      path.resize(base);
    }
    for (; i < target.size(); ++i) {
      json o = op("add", path + "/-");
      o["value"] = target[i];
      out.push_back(std::move(o));
    }
    return;
  }
  for (auto it = source.cbegin(); it != source.cend(); ++it) {
    append_escaped(path, it.key());
    auto t = target.find(it.key());
    if (t != target.end()) {
      diff_into(it.value(), *t, path, out);
    } else {
      out.push_back(op("remove", path));
    }
    path.resize(base);
  }
  for (auto it = target.cbegin(); it != target.cend(); ++it) {
    if (!source.contains(it.key())) {
      append_escaped(path, it.key());
      json o = op("add", path);
      o["value"] = it.value();
      out.push_back(std::move(o));
      path.resize(base);
    }
  }
}

}  // namespace

json diff(const json& source, const json& target) {
  json out = json::array();
  std::string path;
  path.reserve(128);
  diff_into(source, target, path, out);
  return out;
}

}  // namespace podpatch
