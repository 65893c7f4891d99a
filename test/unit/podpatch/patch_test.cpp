// podpatch::diff must give exactly nlohmann::json::diff's operations (M6: the patches the webhook
// sends do not change with the faster diff).
#include "podpatch/patch.h"

#include <catch2/catch.hpp>
#include <random>

#include "support/test_support.h"

using testing::json;

namespace {

// A deterministic random JSON value of limited depth.
json random_json(std::mt19937& rng, int depth) {
  std::uniform_int_distribution<int> kind(0, depth > 0 ? 7 : 4);
  std::uniform_int_distribution<int> small(0, 4);
  switch (kind(rng)) {
    case 0:
      return nullptr;
    case 1:
      return small(rng) % 2 == 0;
    case 2:
      return small(rng);
    case 3:
      return small(rng) + 0.5;
    case 4:
      return std::string(1, static_cast<char>('a' + small(rng)));
    case 5:
    case 6: {
      json o = json::object();
      for (int i = small(rng); i > 0; --i) {
        std::string key = std::string(1, static_cast<char>('a' + small(rng)));
        if (small(rng) == 0) {
          key += "/~";  // needs escaping in paths
        }
        o[key] = random_json(rng, depth - 1);
      }
      return o;
    }
    default: {
      json a = json::array();
      for (int i = small(rng); i > 0; --i) {
        a.push_back(random_json(rng, depth - 1));
      }
      return a;
    }
  }
}

// A variant of `v`: some values changed, removed or added.
json mutate_randomly(const json& v, std::mt19937& rng) {
  std::uniform_int_distribution<int> pick(0, 5);
  if (pick(rng) == 0) {
    return random_json(rng, 2);
  }
  json out = v;
  if (out.is_object()) {
    for (auto& [k, child] : v.items()) {
      int p = pick(rng);
      if (p == 1) {
        out.erase(k);
      } else if (p == 2) {
        out[k] = mutate_randomly(child, rng);
      }
    }
    if (pick(rng) == 3) {
      out["new/" + std::to_string(pick(rng))] = random_json(rng, 1);
    }
  } else if (out.is_array()) {
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (pick(rng) == 2) {
        out[i] = mutate_randomly(out[i], rng);
      }
    }
    int p = pick(rng);
    if (p == 1 && !out.empty()) {
      out.erase(out.size() - 1);
    } else if (p == 3) {
      out.push_back(random_json(rng, 1));
    }
  }
  return out;
}

}  // namespace

TEST_CASE("M6: podpatch::diff equals nlohmann's diff on hand-picked cases", "[podpatch][patch]") {
  auto [source, target] = GENERATE(table<json, json>({
      {json(nullptr), json(nullptr)},
      {json(1), json(1.0)},
      {json(1), json(2)},
      {json::object(), json::array()},
      {json({{"a", 1}}), json({{"a", 1}, {"b/c", {1, 2}}, {"d~e", "x"}})},
      {json({{"a", 1}, {"b", 2}}), json({{"b", 3}})},
      {json({1, 2, 3, 4, 5}), json({1, 9})},
      {json({1, 2}), json({1, 2, {{"x", json::array()}}, 4})},
      {json({{"env", {{{"name", "A"}, {"value", ""}}}}}),
       json({{"env", {{{"name", "A"}, {"value", "3"}}, {{"name", "B"}}}}})},
  }));
  CAPTURE(source.dump(), target.dump());
  json ours = podpatch::diff(source, target);
  CHECK(ours == json::diff(source, target));
  CHECK(source.patch(ours) == target);
}

TEST_CASE("M6: podpatch::diff equals nlohmann's diff on 2,000 random pairs", "[podpatch][patch]") {
  std::mt19937 rng(20261130);
  for (int i = 0; i < 2000; ++i) {
    json source = random_json(rng, 4);
    json target = mutate_randomly(source, rng);
    CAPTURE(i, source.dump(), target.dump());
    json ours = podpatch::diff(source, target);
    REQUIRE(ours == json::diff(source, target));
    REQUIRE(source.patch(ours) == target);
  }
}
