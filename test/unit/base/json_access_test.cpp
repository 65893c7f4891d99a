// lib/base/json/access.h: null-safe reads that never insert into the Pod being read.
#include <catch2/catch.hpp>

#include "base/json/access.h"

using webhook::json;

TEST_CASE("member: absent, null and non-object give nullptr", "[base][json_access]") {
  const json pod = json::parse(R"({"metadata": {"labels": {"a": "1", "n": 2}, "x": null},
                                   "list": [1, 2], "s": "text"})");
  CHECK(webhook::member(nullptr, "metadata") == nullptr);
  CHECK(webhook::member(pod, "missing") == nullptr);
  CHECK(webhook::member(pod, "list", "0") == nullptr);  // arrays are not objects
  CHECK(webhook::member(pod, "s", "x") == nullptr);
  CHECK(webhook::member(pod, "metadata", "x", "y") == nullptr);  // through a null
  REQUIRE(webhook::member(pod, "metadata", "x") != nullptr);
  CHECK(webhook::member(pod, "metadata", "x")->is_null());
  const json* labels = webhook::member(pod, "metadata", "labels");
  REQUIRE(labels != nullptr);
  CHECK(labels == &pod["metadata"]["labels"]);  // a pointer into the json, not a copy
  CHECK(webhook::member(labels, "a") == &pod["metadata"]["labels"]["a"]);
  CHECK(webhook::member(&pod, "metadata", "labels", "a")->get<std::string>() == "1");
}

TEST_CASE("string_member: only strings", "[base][json_access]") {
  const json labels = json::parse(R"({"a": "1", "empty": "", "n": 2, "b": true, "o": {},
                                      "null": null})");
  CHECK(webhook::string_member(&labels, "a") == std::optional<std::string_view>("1"));
  CHECK(webhook::string_member(&labels, "empty") == std::optional<std::string_view>(""));
  for (const char* key : {"n", "b", "o", "null", "missing"}) {
    CAPTURE(key);
    CHECK_FALSE(webhook::string_member(&labels, key).has_value());
  }
  CHECK_FALSE(webhook::string_member(nullptr, "a").has_value());
  const json text = "not an object";
  CHECK_FALSE(webhook::string_member(&text, "a").has_value());
}

TEST_CASE("reads never insert", "[base][json_access]") {
  const json before = json::parse(R"({"metadata": {}})");
  json pod = before;
  (void)webhook::member(pod, "metadata", "labels", "x");
  (void)webhook::string_member(webhook::member(pod, "spec"), "hostname");
  CHECK(pod == before);
}

TEST_CASE("object_member creates a missing or null member as {}", "[base][json_access]") {
  json pod = json::parse(R"({"metadata": {"labels": {"a": "1"}}, "spec": null})");
  json& labels = webhook::object_member(pod["metadata"], "labels");
  CHECK(labels == json{{"a", "1"}});
  labels["b"] = "2";  // the existing object, not a copy
  CHECK(pod["metadata"]["labels"]["b"] == "2");
  json& spec = webhook::object_member(pod, "spec");
  CHECK(spec == json::object());
  spec["hostname"] = "h";
  CHECK(pod["spec"]["hostname"] == "h");
  json& annotations = webhook::object_member(pod["metadata"], "annotations");
  CHECK(annotations == json::object());
  CHECK(pod["metadata"].contains("annotations"));
}
