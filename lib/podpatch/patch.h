#pragma once
// JSON Patch (RFC 6902) text, written op by op straight into a buffer, and the patch between two
// JSON values.
//
//   std::string text;
//   podpatch::PatchText patch(text);
//   patch.add("/metadata/labels/replicaIndex", "\"tpu-group-0\"");   // the value as JSON text
//   patch.finish();                                   // text ==
//   [{"op":"add","path":...,"value":...}]
//
//   json ops = podpatch::diff(before, after);        // before.patch(ops) == after
//
// The text is byte for byte what webhook::dump_json writes for the same operations as a json
// array ({"op", "path", "value"} in that order), so it compares with a dumped diff.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace podpatch {

using json = nlohmann::json;

class PatchText {
 public:
  explicit PatchText(std::string& out) : out_(out) { out_.push_back('['); }

  // `path` is a JSON Pointer, already escaped (~0, ~1); `value` is JSON text.
  void add(std::string_view path, std::string_view value) { op("add", path, value); }
  void replace(std::string_view path, std::string_view value) { op("replace", path, value); }
  void remove(std::string_view path);
  // Starts an operation whose value the caller then appends to text(); end_value() closes it.
  std::string& begin_value(std::string_view op, std::string_view path);
  void end_value() { out_.push_back('}'); }
  std::string& text() { return out_; }
  bool empty() const { return count_ == 0; }
  // Closes the array.
  void finish() { out_.push_back(']'); }

 private:
  void op(std::string_view name, std::string_view path, std::string_view value);
  void head(std::string_view name, std::string_view path);

  std::string& out_;
  int count_ = 0;
};

// Appends to a JSON Pointer one reference token, '~' and '/' escaped as ~0 and ~1.
void append_pointer_token(std::string& path, std::string_view token);

// Writes the operations turning `source` into `target` at `path` (restored before returning).
// Objects: "remove" for keys only in `source`, recursion for keys in both, "add" for keys only in
// `target` (keys in sorted order). Arrays: element-wise over the common prefix, then "remove" of
// the extra source elements from the last one back, then "add" of the extra target elements at
// "/-". Values of different types, or different scalars: "replace". Exactly the operations
// nlohmann::json::diff gives, in the same order (test/unit/podpatch/patch_test checks it).
void write_diff(const json& source, const json& target, std::string& path, PatchText& out);

// write_diff as a json array.
json diff(const json& source, const json& target);

}  // namespace podpatch
