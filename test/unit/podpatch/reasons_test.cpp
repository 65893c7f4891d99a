// lib/podpatch/reasons.h: the one table of denial reasons, and docs/server.md "Denial reasons",
// which must list exactly the same names.
#include "podpatch/reasons.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace {

// The reasons named in the first column of docs/server.md's "Denial reasons" table.
std::set<std::string> documented_reasons() {
  std::ifstream f(std::string(FIXTURE_DIR) + "/../../docs/server.md");
  REQUIRE(f.good());
  std::stringstream text;
  text << f.rdbuf();
  std::string doc = text.str();
  std::size_t start = doc.find("## Denial reasons");
  REQUIRE(start != std::string::npos);
  std::size_t end = doc.find("\n## ", start + 1);
  std::string section = doc.substr(start, end - start);
  std::set<std::string> out;
  std::regex row(R"(\n\| `([a-z_]+)` \|)");
  for (auto it = std::sregex_iterator(section.begin(), section.end(), row);
       it != std::sregex_iterator(); ++it) {
    out.insert((*it)[1].str());
  }
  return out;
}

}  // namespace

TEST_CASE("denial reasons are unique snake_case names", "[podpatch][reasons]") {
  std::set<std::string_view> seen;
  for (std::string_view r : podpatch::reasons::kAll) {
    CAPTURE(r);
    CHECK(std::regex_match(std::string(r), std::regex("[a-z]+(_[a-z]+)*")));
    CHECK(seen.insert(r).second);
  }
  CHECK(seen.size() == 29);  // env_too_long and pod_too_large (docs/spec.md M8)
}

TEST_CASE("docs/server.md lists exactly the denial reasons of the table", "[podpatch][reasons]") {
  std::set<std::string> table(podpatch::reasons::kAll.begin(), podpatch::reasons::kAll.end());
  CHECK(documented_reasons() == table);
}
