// lib/podpatch/env: docs/spec.md Terms "Env var present" (a non-empty value or a valueFrom; the
// last entry of a name is the one Kubernetes uses) and setting a var by replacing a not-present
// entry in place (better than upstream, which appended a duplicate name).
#include "podpatch/env.h"

#include <catch2/catch.hpp>
#include <string>

#include "support/test_support.h"

using podpatch::json;

namespace {

const json kFieldRef = {{"fieldRef", {{"fieldPath", "status.hostIP"}}}};

json container_with(json env) { return {{"name", "ray-worker"}, {"env", std::move(env)}}; }

// A TPU Pod around `container`, so a change to it can be recorded as a patch.
json pod_with(const json& container) {
  json c = container;
  c["resources"] = {{"limits", {{"google.com/tpu", "4"}}}};
  return {{"apiVersion", "v1"},
          {"kind", "Pod"},
          {"metadata", {{"name", "env-test"}, {"namespace", "default"}}},
          {"spec", {{"containers", json::array({c})}}}};
}

// Runs `edit` on the Pod's container, records the patch, and returns the edited container.
template <class Edit>
json edit_and_record(const std::string& name, const json& container, Edit edit) {
  const json original = pod_with(container);
  json mutated = original;
  edit(mutated["spec"]["containers"][0]);
  json patch = json::diff(original, mutated);
  CHECK(original.patch(patch) == mutated);
  testing::record_patch("unit-env-" + name, original, patch);
  return mutated["spec"]["containers"][0];
}

}  // namespace

TEST_CASE("Terms/present: is_present and literal_value", "[podpatch][env]") {
  auto [entry, present, literal] = GENERATE(table<json, bool, std::string>({
      // Present.
      {json{{"name", "A"}, {"value", "1"}}, true, "1"},
      {json{{"name", "A"}, {"value", "localhost"}}, true, "localhost"},
      {json{{"name", "A"}, {"value", " "}}, true, " "},
      {json{{"name", "A"}, {"valueFrom", kFieldRef}}, true, ""},
      {json{{"name", "A"}, {"value", ""}, {"valueFrom", kFieldRef}}, true, ""},
      {json{{"name", "A"}, {"valueFrom", json::object()}}, true, ""},
      // Not present.
      {json{{"name", "A"}, {"value", ""}}, false, ""},
      {json{{"name", "A"}}, false, ""},
      {json{{"name", "A"}, {"value", nullptr}}, false, ""},
      {json{{"name", "A"}, {"valueFrom", nullptr}}, false, ""},
      {json{{"name", "A"}, {"value", ""}, {"valueFrom", nullptr}}, false, ""},
  }));
  CAPTURE(entry.dump());
  CHECK(podpatch::is_present(entry) == present);
  std::optional<std::string_view> lit = podpatch::literal_value(entry);
  CHECK(lit.has_value() == !literal.empty());
  if (lit) {
    CHECK(*lit == literal);
  }
}

TEST_CASE("Terms/present: find_env finds the last entry of a name", "[podpatch][env]") {
  auto [env, index, present, literal] = GENERATE(table<json, int, bool, std::string>({
      // Absent.
      {json::array(), -1, false, ""},
      {json::parse(R"([{"name": "B", "value": "1"}])"), -1, false, ""},
      {json::parse(R"([{"name": "a", "value": "1"}])"), -1, false, ""},  // names are case-sensitive
      // Once.
      {json::parse(R"([{"name": "B", "value": "1"}, {"name": "A", "value": "2"}])"), 1, true, "2"},
      {json::parse(R"([{"name": "A", "value": ""}])"), 0, false, ""},
      {json::parse(R"([{"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}])"), 0, true,
       ""},
      // Duplicates: the last entry wins, whatever the earlier ones say.
      {json::parse(R"([{"name": "A", "value": "1"}, {"name": "A", "value": "2"}])"), 1, true, "2"},
      {json::parse(R"([{"name": "A", "value": "1"}, {"name": "A", "value": ""}])"), 1, false, ""},
      {json::parse(R"([{"name": "A", "value": ""}, {"name": "A", "value": "3"}, {"name": "B"}])"),
       1, true, "3"},
      {json::parse(R"([{"name": "A", "value": "1"}, {"name": "A", "valueFrom": {"x": 1}}])"), 1,
       true, ""},
  }));
  CAPTURE(env.dump());
  json c = container_with(env);
  std::optional<podpatch::EnvRef> e = podpatch::find_env(c, "A");
  CHECK(e.has_value() == (index >= 0));
  if (e) {
    CHECK(static_cast<int>(e->index) == index);
    CHECK(e->entry == &c["env"][e->index]);
  }
  CHECK(podpatch::env_present(c, "A") == present);
  std::optional<std::string_view> lit = podpatch::env_literal(c, "A");
  CHECK(lit.has_value() == !literal.empty());
  if (lit) {
    CHECK(*lit == literal);
  }
}

TEST_CASE("Terms/present: a container without env has nothing present", "[podpatch][env]") {
  for (const json& c : {json{{"name", "c"}}, json{{"name", "c"}, {"env", nullptr}},
                        json{{"name", "c"}, {"env", json::object()}}}) {
    CAPTURE(c.dump());
    CHECK_FALSE(podpatch::find_env(c, "A").has_value());
    CHECK_FALSE(podpatch::env_present(c, "A"));
    CHECK_FALSE(podpatch::env_literal(c, "A").has_value());
  }
}

TEST_CASE("Terms/present: set_env replaces a not-present entry in place (better than upstream)",
          "[podpatch][env]") {
  auto [row, env, fields, want] = GENERATE(table<std::string, json, json, json>({
      {"empty-value",
       json::parse(R"([{"name": "X", "value": "1"}, {"name": "A", "value": ""}, {"name": "Y"}])"),
       json{{"value", "7"}},
       json::parse(R"([{"name": "X", "value": "1"}, {"name": "A", "value": "7"}, {"name": "Y"}])")},
      {"name-only", json::parse(R"([{"name": "A"}, {"name": "Y", "value": "2"}])"),
       json{{"value", "7"}},
       json::parse(R"([{"name": "A", "value": "7"}, {"name": "Y", "value": "2"}])")},
      {"empty-to-valuefrom", json::parse(R"([{"name": "A", "value": ""}])"),
       json{{"valueFrom", kFieldRef}}, json::array({{{"name", "A"}, {"valueFrom", kFieldRef}}})},
      {"null-valuefrom", json::parse(R"([{"name": "A", "value": "", "valueFrom": null}])"),
       json{{"value", "7"}}, json::parse(R"([{"name": "A", "value": "7"}])")},
      // Duplicates: the last, not-present entry is the one replaced.
      {"duplicate-last-empty",
       json::parse(R"([{"name": "A", "value": "1"}, {"name": "A", "value": ""}])"),
       json{{"value", "7"}},
       json::parse(R"([{"name": "A", "value": "1"}, {"name": "A", "value": "7"}])")},
  }));
  CAPTURE(row);
  json c = edit_and_record("set-in-place-" + row, container_with(env),
                           [&](json& container) { podpatch::set_env(container, "A", fields); });
  CHECK(c["env"] == want);
  CHECK(podpatch::env_present(c, "A"));
}

TEST_CASE("Terms/present: set_env appends when the name is absent or present", "[podpatch][env]") {
  auto [row, container, want_env] = GENERATE(table<std::string, json, json>({
      {"no-env", json{{"name", "ray-worker"}}, json::parse(R"([{"name": "A", "value": "7"}])")},
      {"null-env", json{{"name", "ray-worker"}, {"env", nullptr}},
       json::parse(R"([{"name": "A", "value": "7"}])")},
      {"other-names", container_with(json::parse(R"([{"name": "B", "value": "1"}])")),
       json::parse(R"([{"name": "B", "value": "1"}, {"name": "A", "value": "7"}])")},
      // set_env does not decide whether to set: the caller checks presence first. A present
      // entry is left alone and the new one goes last, where Kubernetes takes it from.
      {"present", container_with(json::parse(R"([{"name": "A", "value": "1"}])")),
       json::parse(R"([{"name": "A", "value": "1"}, {"name": "A", "value": "7"}])")},
  }));
  CAPTURE(row);
  json c = edit_and_record("append-" + row, container, [](json& ctr) {
    podpatch::set_env(ctr, "A", {{"value", "7"}});
  });
  CHECK(c["env"] == want_env);
  CHECK(podpatch::env_literal(c, "A") == std::optional<std::string_view>("7"));
}

TEST_CASE("Terms/present: an entry replaced in place keeps its other fields and position",
          "[podpatch][env]") {
  json c = edit_and_record(
      "keeps-position",
      container_with(json::parse(R"([{"name": "A", "value": ""}, {"name": "B", "value": "b"}])")),
      [](json& ctr) {
        podpatch::set_env(ctr, "A", {{"valueFrom", kFieldRef}});
      });
  REQUIRE(c["env"].size() == 2);
  CHECK(c["env"][0] == json{{"name", "A"}, {"valueFrom", kFieldRef}});  // no stale "value"
  CHECK(c["env"][1] == json{{"name", "B"}, {"value", "b"}});
}

TEST_CASE("M5.4: replace_env_value rewrites one literal in place", "[podpatch][env]") {
  json c = edit_and_record(
      "replace-value",
      container_with(json::parse(
          R"([{"name": "TPU_WORKER_ID", "value": "0"}, {"name": "TPU_WORKER_ID", "value": "0"}])")),
      [](json& ctr) { podpatch::replace_env_value(ctr, 1, "3"); });
  CHECK(c["env"] == json::parse(R"([{"name": "TPU_WORKER_ID", "value": "0"},
                                   {"name": "TPU_WORKER_ID", "value": "3"}])"));
  CHECK(podpatch::env_literal(c, "TPU_WORKER_ID") == std::optional<std::string_view>("3"));
}
