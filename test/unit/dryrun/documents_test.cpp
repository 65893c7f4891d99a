// webhook-dryrun's input reader: YAML typed as kubectl types it, JSON, and bounded inputs.
#include "dryrun/documents.h"

#include <catch2/catch.hpp>

using nlohmann::json;

TEST_CASE("YAML scalars are typed as kubectl's decoder types them", "[dryrun][documents]") {
  auto docs = dryrun::parse_documents(R"(
int: 4
quoted: "4"
single: '4'
float: 1.5
neg: -3
big: 18446744073709551615
hex: 0x1f
yes_word: yes
y_word: y
n_word: N
on_word: on
true_word: true
null_word: null
tilde: ~
empty:
text: 4x4
port: "8471"
version: 1.10
str_tag: !!str 12
)");
  REQUIRE(docs);
  REQUIRE(docs->size() == 1);
  const json& d = docs->front();
  CHECK(d["int"] == 4);
  CHECK(d["quoted"] == "4");
  CHECK(d["single"] == "4");
  CHECK(d["float"] == 1.5);
  CHECK(d["neg"] == -3);
  CHECK(d["big"].is_number_unsigned());
  CHECK(d["hex"] == 31);
  CHECK(d["yes_word"] == true);
  CHECK(d["y_word"] == true);  // YAML 1.1, as kubectl reads it
  CHECK(d["n_word"] == false);
  CHECK(d["on_word"] == true);
  CHECK(d["true_word"] == true);
  CHECK(d["null_word"].is_null());
  CHECK(d["tilde"].is_null());
  CHECK(d["empty"].is_null());
  CHECK(d["text"] == "4x4");
  CHECK(d["port"] == "8471");
  CHECK(d["version"] == 1.1);
  CHECK(d["str_tag"] == "12");
}

TEST_CASE("multi-document YAML gives one object per non-empty document", "[dryrun][documents]") {
  auto docs = dryrun::parse_documents("---\na: 1\n---\n---\nb: [x, z]\n...\n");
  REQUIRE(docs);
  REQUIRE(docs->size() == 2);
  CHECK((*docs)[0] == json({{"a", 1}}));
  CHECK((*docs)[1] == json({{"b", {"x", "z"}}}));
}

TEST_CASE("JSON input is parsed as JSON", "[dryrun][documents]") {
  auto docs = dryrun::parse_documents("  \n{\"a\": \"on\", \"b\": [1, 2.5]}");
  REQUIRE(docs);
  CHECK(docs->front() == json({{"a", "on"}, {"b", {1, 2.5}}}));
}

TEST_CASE("reads_back_as_string tells which strings need quotes in YAML", "[dryrun][documents]") {
  for (const char* s : {"4", "true", "on", "null", "", "~", "1.5", "0x10", "-7"}) {
    CAPTURE(s);
    CHECK_FALSE(dryrun::reads_back_as_string(s));
  }
  for (const char* s : {"4x4", "tpu-v6e-slice", "v6e-16-0", "$(TPU_DEVICE_PLUGIN_HOST_IP):2112"}) {
    CAPTURE(s);
    CHECK(dryrun::reads_back_as_string(s));
  }
}

TEST_CASE("bad inputs are refused with a clear message, never a crash",
          "[dryrun][documents][bounds]") {
  std::string deep_flow(200'000, '[');
  std::string deep_json = "{\"a\":" + std::string(200'000, '[');
  std::string deep_block;
  for (int i = 0; i < 150; ++i) {
    deep_block += std::string(static_cast<std::size_t>(i) * 2, ' ') + "k:\n";
  }
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'j'; ++c) {
    std::string prev(1, static_cast<char>(c - 1));
    bomb += std::string(1, c) + ": &" + std::string(1, c) + " [*" + prev + ", *" + prev + ", *" +
            prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev + ", *" + prev +
            ", *" + prev + ", *" + prev + "]\n";
  }
  auto [name, text, message] = GENERATE_COPY(table<std::string, std::string, std::string>({
      {"empty", "", "empty input"},
      {"blank", " \n\t\n", "empty input"},
      {"only separators", "---\n---\n", "no documents"},
      {"truncated JSON", "{\"kind\": \"Pod\", \"metadata\": {", "not valid JSON: line 1"},
      {"broken YAML", "kind: Pod\nmetadata: [unclosed\n", "not valid YAML: line"},
      {"tab indentation", "a:\n\t- b\n", "not valid YAML"},
      {"binary",
       std::string("\x7f"
                   "ELF\x02\x01\x01\0\0\0",
                   10),
       "binary data"},
      {"200k-deep flow nesting", deep_flow, "deeper than"},
      {"200k-deep JSON", deep_json, "deeper than 100"},
      {"150-deep block nesting", deep_block, "deeper than 100"},
      {"alias bomb", bomb, "alias"},
      {"complex key", "? [a, b]\n: c\n", "not a plain string"},
      // Found by fuzz/documents_fuzz: yaml-cpp 0.7's LoadAll repeats one document forever.
      {"yaml-cpp endless document", " \"Pod\",\n  \"a\"adata\":Ve {\n   ", "cannot be parsed"},
      // Found by fuzz/documents_fuzz: invalid UTF-8 made json::dump throw in a denial message.
      {"invalid UTF-8", "kind: Pod\nmetadata:\n  name: \"a\x9f\"\n",
       "not UTF-8 text (an invalid byte at offset 30)"},
      {"overlong UTF-8", "a: \xc0\xaf\n", "offset 3"},
      {"UTF-16 surrogate", "a: \xed\xa0\x80\n", "offset 3"},
      {"recursive alias", "a: &x [1, *x]\n", "not valid YAML"},
  }));
  CAPTURE(name);
  auto docs = dryrun::parse_documents(text);
  REQUIRE_FALSE(docs);
  CHECK_THAT(docs.error().message, Catch::Contains(message));
  CHECK(docs.error().message.find('\n') == std::string::npos);
}
