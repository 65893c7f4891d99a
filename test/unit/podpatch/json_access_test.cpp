// lib/podpatch/json_access.h: null-safe reads that never insert into the Pod being read.
#include <catch2/catch.hpp>

#include "podpatch/json_access.h"

using podpatch::json;

TEST_CASE("member: absent, null and non-object give nullptr", "[podpatch][json_access]") {
  const json pod = json::parse(R"({"metadata": {"labels": {"a": "1", "n": 2}, "x": null},
                                   "list": [1, 2], "s": "text"})");
  CHECK(podpatch::member(nullptr, "metadata") == nullptr);
  CHECK(podpatch::member(pod, "missing") == nullptr);
  CHECK(podpatch::member(pod, "list", "0") == nullptr);  // arrays are not objects
  CHECK(podpatch::member(pod, "s", "x") == nullptr);
  CHECK(podpatch::member(pod, "metadata", "x", "y") == nullptr);  // through a null
  REQUIRE(podpatch::member(pod, "metadata", "x") != nullptr);
  CHECK(podpatch::member(pod, "metadata", "x")->is_null());
  const json* labels = podpatch::member(pod, "metadata", "labels");
  REQUIRE(labels != nullptr);
  CHECK(labels == &pod["metadata"]["labels"]);  // a pointer into the json, not a copy
  CHECK(podpatch::member(labels, "a") == &pod["metadata"]["labels"]["a"]);
  CHECK(podpatch::member(&pod, "metadata", "labels", "a")->get<std::string>() == "1");
}

TEST_CASE("string_member: only strings", "[podpatch][json_access]") {
  const json labels = json::parse(R"({"a": "1", "empty": "", "n": 2, "b": true, "o": {},
                                      "null": null})");
  CHECK(podpatch::string_member(&labels, "a") == std::optional<std::string_view>("1"));
  CHECK(podpatch::string_member(&labels, "empty") == std::optional<std::string_view>(""));
  for (const char* key : {"n", "b", "o", "null", "missing"}) {
    CAPTURE(key);
    CHECK_FALSE(podpatch::string_member(&labels, key).has_value());
  }
  CHECK_FALSE(podpatch::string_member(nullptr, "a").has_value());
  const json text = "not an object";
  CHECK_FALSE(podpatch::string_member(&text, "a").has_value());
}

TEST_CASE("reads never insert", "[podpatch][json_access]") {
  const json before = json::parse(R"({"metadata": {}})");
  json pod = before;
  (void)podpatch::member(pod, "metadata", "labels", "x");
  (void)podpatch::string_member(podpatch::member(pod, "spec"), "hostname");
  CHECK(pod == before);
}

TEST_CASE("object_member creates a missing or null member as {}", "[podpatch][json_access]") {
  json pod = json::parse(R"({"metadata": {"labels": {"a": "1"}}, "spec": null})");
  json& labels = podpatch::object_member(pod["metadata"], "labels");
  CHECK(labels == json{{"a", "1"}});
  labels["b"] = "2";  // the existing object, not a copy
  CHECK(pod["metadata"]["labels"]["b"] == "2");
  json& spec = podpatch::object_member(pod, "spec");
  CHECK(spec == json::object());
  spec["hostname"] = "h";
  CHECK(pod["spec"]["hostname"] == "h");
  json& annotations = podpatch::object_member(pod["metadata"], "annotations");
  CHECK(annotations == json::object());
  CHECK(pod["metadata"].contains("annotations"));
}
