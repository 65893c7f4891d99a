// lib/base/flags: the flag table both binaries parse with. Go's forms (--name=value, --name
// value, one or two dashes), booleans, flags that stop parsing, positional arguments, "--", the
// error wording that quotes the flag as typed, and the --help layout.
#include "base/flags/flags.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

namespace {

using webhook::flags::Flag;
using webhook::flags::FlagTable;
using webhook::flags::Kind;

struct Inner {
  int port = 80;
};

struct Opts {
  std::string output;
  std::vector<std::string> files;
  bool verbose = false;
  bool help = false;
  std::string key;
  Inner inner;
};

Flag<Inner> port_flag() {
  return {.name = "port",
          .value_name = "N",
          .help = "the port (default 80)",
          .apply = [](Inner& i, std::string_view v) -> webhook::Status {
            if (v.empty() || v.find_first_not_of("0123456789") != std::string_view::npos) {
              return webhook::invalid_argument("expected a number");
            }
            i.port = std::stoi(std::string(v));
            return {};
          }};
}

FlagTable<Opts> make_table(bool with_positional) {
  FlagTable<Opts> t;
  t.section("Main")
      .add({.name = "output",
            .alias = "o",
            .value_name = "FORMAT",
            .help = "yaml or json",
            .apply = [](Opts& o, std::string_view v) -> webhook::Status {
              if (v != "yaml" && v != "json") {
                return webhook::invalid_argument("expected yaml or json");
              }
              o.output = std::string(v);
              return {};
            }})
      .add({.name = "verbose",
            .help = "say more",
            .kind = Kind::kBoolean,
            .apply = [](Opts& o, std::string_view) -> webhook::Status {
              o.verbose = true;
              return {};
            }})
      .add({.name = "key",
            .value_name = "BASE64",
            .help = "a secret",
            .apply = [](Opts& o, std::string_view v) -> webhook::Status {
              if (v.size() < 4) {
                return webhook::invalid_argument("too short");
              }
              o.key = std::string(v);
              return {};
            },
            .secret = true})
      .add(std::vector<Flag<Inner>>{port_flag()}, &Opts::inner);
  t.section("").add({.name = "help",
                     .alias = "h",
                     .help = "this text",
                     .kind = Kind::kBoolean,
                     .apply = [](Opts& o, std::string_view) -> webhook::Status {
                       o.help = true;
                       return {};
                     },
                     .stops = true});
  if (with_positional) {
    t.positional([](Opts& o, std::string_view file) -> webhook::Status {
       o.files.emplace_back(file);
       return {};
     }).dash_dash_ends_flags();
  }
  return t;
}

Opts parse_ok(const std::vector<std::string>& args, bool with_positional = true) {
  Opts o;
  webhook::Status st = make_table(with_positional).parse(args, o);
  if (!st) {
    FAIL("unexpected error: " << st.error().message);
  }
  return o;
}

std::string parse_error(const std::vector<std::string>& args, bool with_positional = true) {
  Opts o;
  webhook::Status st = make_table(with_positional).parse(args, o);
  REQUIRE_FALSE(st.ok());
  CHECK(st.error().code == webhook::ErrorCode::kInvalidArgument);
  return st.error().message;
}

}  // namespace

TEST_CASE("flags: a value is read in each of Go's forms", "[base][flags]") {
  auto args = GENERATE(
      as<std::vector<std::string>>{}, std::vector<std::string>{"--output=json"},
      std::vector<std::string>{"--output", "json"}, std::vector<std::string>{"-output=json"},
      std::vector<std::string>{"-output", "json"}, std::vector<std::string>{"-o", "json"},
      std::vector<std::string>{"-o=json"}, std::vector<std::string>{"--o", "json"});
  CAPTURE(args);
  CHECK(parse_ok(args).output == "json");
}

TEST_CASE("flags: a value may start with a dash or contain '='", "[base][flags]") {
  Opts o = parse_ok({"--key", "-abc=d", "--port=8080"});
  CHECK(o.key == "-abc=d");
  CHECK(o.inner.port == 8080);  // a flag of a member, added with add(flags, &Opts::inner)
}

TEST_CASE("flags: a boolean takes no value, or =true / =false", "[base][flags]") {
  CHECK(parse_ok({"--verbose"}).verbose);
  CHECK(parse_ok({"-verbose=true"}).verbose);
  CHECK_FALSE(parse_ok({"--verbose=false"}).verbose);
  // A boolean never takes the next argument: it stays positional.
  Opts o = parse_ok({"--verbose", "false"});
  CHECK(o.verbose);
  CHECK(o.files == std::vector<std::string>{"false"});
}

TEST_CASE("flags: a flag that stops ends parsing, later errors unseen", "[base][flags]") {
  Opts o = parse_ok({"--output=yaml", "-h", "--bogus", "--output=xml"});
  CHECK(o.help);
  CHECK(o.output == "yaml");
  CHECK_FALSE(parse_ok({"--help=false", "x"}).help);
  CHECK(parse_error({"--bogus", "--help"}) == "unknown flag --bogus (see --help)");
}

TEST_CASE("flags: positional arguments, \"-\" and \"--\"", "[base][flags]") {
  Opts o = parse_ok({"a.yaml", "-", "--output=json", "b.yaml", "--", "--verbose", "-o"});
  CHECK(o.files == std::vector<std::string>{"a.yaml", "-", "b.yaml", "--verbose", "-o"});
  CHECK(o.output == "json");
  CHECK_FALSE(o.verbose);
  CHECK(parse_error({"a.yaml"}, false) == "unexpected argument \"a.yaml\" (see --help)");
  // Without dash_dash_ends_flags(), "--" is an argument like any other.
  CHECK(parse_error({"--"}, false) == "unexpected argument \"--\" (see --help)");
}

TEST_CASE("flags: every error is one line quoting the flag as typed", "[base][flags]") {
  auto [args, expected] = GENERATE(table<std::vector<std::string>, std::string>({
      {{"--bogus=1"}, "unknown flag --bogus (see --help)"},
      {{"-bogus"}, "unknown flag -bogus (see --help)"},
      {{"--output"}, "flag --output needs a value (see --help)"},
      {{"x", "-o"}, "flag -o needs a value (see --help)"},
      {{"--output=xml"}, "--output=xml: expected yaml or json"},
      {{"-o", "xml"}, "-o xml: expected yaml or json"},
      {{"-o", ""}, "-o=: expected yaml or json"},
      {{"--port=http"}, "--port=http: expected a number"},
      {{"--verbose=yes"}, "--verbose=yes: expected true or false"},
      {{"--key=abc"}, "--key: too short"},  // a secret value is never echoed
      {{"--key", "abc"}, "--key: too short"},
  }));
  CAPTURE(args);
  CHECK(parse_error(args) == expected);
}

TEST_CASE("flags: given lists every flag read, by its name", "[base][flags]") {
  Opts o;
  std::vector<std::string> given;
  REQUIRE(make_table(true).parse({"-o", "json", "f", "--port=1", "--verbose=false"}, o, &given));
  CHECK(given == std::vector<std::string>{"output", "port", "verbose"});
}

TEST_CASE("flags: spellings and docs follow the table", "[base][flags]") {
  FlagTable<Opts> t = make_table(true);
  CHECK(t.spellings() ==
        std::vector<std::string>{"-o", "--output", "--verbose", "--key", "--port", "-h", "--help"});
  REQUIRE(t.find("o") == t.find("output"));
  CHECK(t.find("port")->section == "Main");
  CHECK(t.find("nope") == nullptr);
}

TEST_CASE("flags: --help lists each section's flags, wrapped under a column", "[base][flags]") {
  FlagTable<Opts> t = make_table(true);
  CHECK(webhook::flags::render_help(t.docs(), {.column = 24, .width = 60, .equals = true}) ==
        "Main:\n"
        "  -o, --output=FORMAT   yaml or json\n"
        "  --verbose             say more\n"
        "  --key=BASE64          a secret\n"
        "  --port=N              the port (default 80)\n"
        "\n"
        "  -h, --help            this text\n");
  std::vector<webhook::flags::FlagDoc> docs = {
      {"a-very-long-flag-name", "", "VALUE",
       "one two three four five six seven eight nine ten eleven\nnew line", "Flags"}};
  CHECK(webhook::flags::render_help(docs, {.column = 20, .width = 40, .equals = false}) ==
        "Flags:\n"
        "  --a-very-long-flag-name VALUE\n"
        "                    one two three four\n"
        "                    five six seven eight\n"
        "                    nine ten eleven\n"
        "                    new line\n");
}
