#pragma once
// A command line as a table of flags: each flag's name, how it reads its value, and its help
// line. Both binaries parse with it and print their --help from it, so a flag cannot be parsed
// without being documented. The syntax is Go's: `--name=value`, `--name value`, one or two
// dashes; a boolean flag takes no value (or `=true` / `=false`).
//
//   webhook::flags::FlagTable<Options> table;
//   table.section("Flags")
//       .add({.name = "output", .alias = "o", .value_name = "FORMAT", .help = "yaml or json",
//             .apply = [](Options& o, std::string_view v) -> webhook::Status { ... }});
//   Options o;
//   if (webhook::Status st = table.parse(args, o); !st) { std::cerr << st.error().message; }
//   std::cout << webhook::flags::render_help(table.docs(), {.column = 29});
//
// Every error is one InvalidArgument line that quotes the flag as it was typed:
//   unknown flag --bogus (see --help)
//   flag --existing needs a value (see --help)
//   -o xml: expected yaml or json               (the value's reason after the flag and value)

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status/result.h"

namespace webhook::flags {

enum class Kind {
  kValue,    // takes a value: --name=value or --name value
  kBoolean,  // takes none; --name=true and --name=false are accepted
};

// One flag of a table over the options struct T.
template <class T>
struct Flag {
  std::string name{};        // spelled --name or -name
  std::string alias{};       // another name, such as "o" for "output"; empty for none
  std::string value_name{};  // what --help shows for the value: "FILE", "N"; empty for a boolean
  std::string help{};        // --help text; wrapped, "\n" starts a new line
  Kind kind = Kind::kValue;
  // Checks and stores the value ("true" for a boolean flag). An error's message is the reason
  // alone ("expected on or off"); the parser puts the flag and the value before it.
  std::function<Status(T&, std::string_view value)> apply{};
  bool stops = false;     // --help, --version: nothing after it is read
  bool secret = false;    // errors never echo the value (a private key)
  std::string section{};  // the --help heading it is listed under; set by FlagTable::section
};

// What --help shows of one flag.
struct FlagDoc {
  std::string name;
  std::string alias;
  std::string value_name;
  std::string help;
  std::string section;
};

// How render_help lays the flags out.
struct HelpLayout {
  std::size_t column = 34;  // where the help text starts
  std::size_t width = 98;   // longest line
  bool equals = true;       // "--name=VALUE" (true) or "--name VALUE"
};

// The flags under each section heading, in table order:
//   Heading:
//     -o, --output FORMAT       help text, wrapped at `width`
// A section named "" is listed without a heading. Sections are separated by a blank line.
std::string render_help(const std::vector<FlagDoc>& docs, const HelpLayout& layout);

namespace detail {

// An argument that is a flag: starts with '-' and is neither "-" nor "--".
struct FlagArg {
  std::string_view typed;                 // the dashes and the name, as typed: "-o", "--existing"
  std::string_view name;                  // without the dashes
  std::optional<std::string_view> value;  // after '=', when given so
};

std::optional<FlagArg> split_flag(std::string_view arg);
Error unexpected_argument(std::string_view arg);
Error unknown_flag(const FlagArg& flag);
Error needs_value(const FlagArg& flag);
// "<flag>=<value>: <reason>" (or "<flag> <value>: " when the value was the next argument;
// "<flag>: " for a secret).
Error bad_value(const FlagArg& flag, std::string_view value, bool secret, const Error& reason);
// Reads a boolean flag's value: nullopt (no value) and "true" are true, "false" false.
Result<bool> boolean_value(const FlagArg& flag);

}  // namespace detail

template <class T>
class FlagTable {
 public:
  // Every flag added after this call is listed under `heading` in --help.
  FlagTable& section(std::string heading) {
    section_ = std::move(heading);
    return *this;
  }

  FlagTable& add(Flag<T> flag) {
    flag.section = section_;
    flags_.push_back(std::move(flag));
    return *this;
  }

  // Adds flags defined over a member of T, such as the admission::Config inside the options.
  template <class Inner>
  FlagTable& add(std::vector<Flag<Inner>> inner, Inner T::*member) {
    for (Flag<Inner>& f : inner) {
      add({std::move(f.name), std::move(f.alias), std::move(f.value_name), std::move(f.help),
           f.kind,
           [inner_apply = std::move(f.apply), member](T& t, std::string_view v) {
             return inner_apply(t.*member, v);
           },
           f.stops, f.secret, ""});
    }
    return *this;
  }

  // What to do with an argument that is not a flag ("-" is not one). Without a handler such an
  // argument is an error.
  FlagTable& positional(std::function<Status(T&, std::string_view)> handler) {
    positional_ = std::move(handler);
    return *this;
  }

  // "--" ends the flags: every later argument is positional. Without this, "--" is itself
  // handed to the positional handler.
  FlagTable& dash_dash_ends_flags() {
    dash_dash_ends_flags_ = true;
    return *this;
  }

  const Flag<T>* find(std::string_view name) const {
    for (const Flag<T>& f : flags_) {
      if (f.name == name || (!f.alias.empty() && f.alias == name)) {
        return &f;
      }
    }
    return nullptr;
  }

  // Every spelling the parser accepts in its two-dash form for names and one-dash form for
  // aliases ("--output", "-o"), in table order.
  std::vector<std::string> spellings() const {
    std::vector<std::string> out;
    for (const Flag<T>& f : flags_) {
      if (!f.alias.empty()) {
        out.push_back("-" + f.alias);
      }
      out.push_back("--" + f.name);
    }
    return out;
  }

  std::vector<FlagDoc> docs() const {
    std::vector<FlagDoc> out;
    for (const Flag<T>& f : flags_) {
      out.push_back(
          {f.name, f.alias, f.kind == Kind::kBoolean ? "" : f.value_name, f.help, f.section});
    }
    return out;
  }

  // Applies `args` (argv without the program name) to `out`, left to right, stopping at the
  // first error or after a flag that stops. When `given` is set, the name of every flag given
  // is appended to it.
  Status parse(const std::vector<std::string>& args, T& out,
               std::vector<std::string>* given = nullptr) const {
    bool only_positional = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
      std::string_view arg = args[i];
      if (!only_positional && arg == "--" && dash_dash_ends_flags_) {
        only_positional = true;
        continue;
      }
      std::optional<detail::FlagArg> flag;
      if (!only_positional) {
        flag = detail::split_flag(arg);
      }
      if (!flag) {
        if (!positional_) {
          return detail::unexpected_argument(arg);
        }
        if (Status st = positional_(out, arg); !st) {
          return st;
        }
        continue;
      }
      const Flag<T>* spec = find(flag->name);
      if (spec == nullptr) {
        return detail::unknown_flag(*flag);
      }
      if (Status st = apply(*spec, *flag, args, i, out); !st) {
        return st;
      }
      if (given != nullptr) {
        given->push_back(spec->name);
      }
      if (spec->stops && (spec->kind != Kind::kBoolean || *detail::boolean_value(*flag))) {
        return {};
      }
    }
    return {};
  }

 private:
  // Reads the value of `flag` (from args[i + 1] when it was not given with '=', advancing i)
  // and applies it; a boolean flag set to false applies nothing.
  Status apply(const Flag<T>& spec, const detail::FlagArg& flag,
               const std::vector<std::string>& args, std::size_t& i, T& out) const {
    std::optional<std::string_view> value = flag.value;
    if (spec.kind == Kind::kBoolean) {
      Result<bool> on = detail::boolean_value(flag);
      if (!on) {
        return on.error();
      }
      if (!*on) {
        return {};
      }
      value = "true";
    } else if (!value) {
      if (i + 1 >= args.size()) {
        return detail::needs_value(flag);
      }
      value = args[++i];
    }
    if (Status st = spec.apply(out, *value); !st) {
      return detail::bad_value(flag, *value, spec.secret, st.error());
    }
    return {};
  }

  std::vector<Flag<T>> flags_;
  std::string section_;
  std::function<Status(T&, std::string_view)> positional_;
  bool dash_dash_ends_flags_ = false;
};

}  // namespace webhook::flags
