#include "base/flags/flags.h"

#include <algorithm>
#include <sstream>

#include "base/text/text.h"

namespace webhook::flags {
namespace detail {

std::optional<FlagArg> split_flag(std::string_view arg) {
  if (!arg.starts_with('-') || arg == "-" || arg == "--") {
    return std::nullopt;
  }
  std::size_t dashes = arg.starts_with("--") ? 2 : 1;
  FlagArg flag;
  flag.typed = arg;
  if (std::size_t eq = arg.find('=', dashes); eq != std::string_view::npos) {
    flag.typed = arg.substr(0, eq);
    flag.value = arg.substr(eq + 1);
  }
  flag.name = flag.typed.substr(dashes);
  return flag;
}

Error unexpected_argument(std::string_view arg) {
  return invalid_argument("unexpected argument " + quote(arg) + " (see --help)");
}

Error unknown_flag(const FlagArg& flag) {
  return invalid_argument("unknown flag " + std::string(flag.typed) + " (see --help)");
}

Error needs_value(const FlagArg& flag) {
  return invalid_argument("flag " + std::string(flag.typed) + " needs a value (see --help)");
}

Error bad_value(const FlagArg& flag, std::string_view value, bool secret, const Error& reason) {
  std::string shown(flag.typed);
  if (!secret) {
    // As typed; an empty value read from the next argument is shown as "--flag=".
    shown += (flag.value || value.empty() ? "=" : " ") + std::string(value);
  }
  return {reason.code, shown + ": " + reason.message};
}

Result<bool> boolean_value(const FlagArg& flag) {
  if (!flag.value || *flag.value == "true") {
    return true;
  }
  if (*flag.value == "false") {
    return false;
  }
  return bad_value(flag, *flag.value, false, invalid_argument("expected true or false"));
}

}  // namespace detail

namespace {

// "-o, --output FORMAT" or "--bind-address=HOST:PORT".
std::string synopsis(const FlagDoc& doc, const HelpLayout& layout) {
  std::string out = doc.alias.empty() ? "" : "-" + doc.alias + ", ";
  out += "--" + doc.name;
  if (!doc.value_name.empty()) {
    out += (layout.equals ? "=" : " ") + doc.value_name;
  }
  return out;
}

// `text` wrapped at word boundaries into lines of at most `width` characters (a longer word
// stays whole); "\n" in `text` starts a new line.
std::vector<std::string> wrap(std::string_view text, std::size_t width) {
  std::vector<std::string> lines;
  std::istringstream paragraphs{std::string(text)};
  for (std::string paragraph; std::getline(paragraphs, paragraph);) {
    std::istringstream words(paragraph);
    std::string line;
    for (std::string word; words >> word;) {
      if (!line.empty() && line.size() + 1 + word.size() > width) {
        lines.push_back(std::move(line));
        line.clear();
      }
      line += (line.empty() ? "" : " ") + word;
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

void render_flag(const FlagDoc& doc, const HelpLayout& layout, std::string& out) {
  std::string head = "  " + synopsis(doc, layout);
  std::string indent(layout.column, ' ');
  std::size_t text_width = layout.width > layout.column ? layout.width - layout.column : 20;
  std::vector<std::string> lines = wrap(doc.help, text_width);
  if (head.size() + 1 > layout.column) {
    out += head + "\n";
    head = indent;
  } else {
    head.resize(layout.column, ' ');
  }
  if (lines.empty()) {
    lines.emplace_back("");
  }
  for (const std::string& line : lines) {
    std::string text = head + line;
    text.erase(text.find_last_not_of(' ') + 1);
    out += text + "\n";
    head = indent;
  }
}

}  // namespace

std::string render_help(const std::vector<FlagDoc>& docs, const HelpLayout& layout) {
  std::vector<std::string> order;
  for (const FlagDoc& doc : docs) {
    if (std::find(order.begin(), order.end(), doc.section) == order.end()) {
      order.push_back(doc.section);
    }
  }
  std::string out;
  for (const std::string& section : order) {
    if (!out.empty()) {
      out += "\n";
    }
    if (!section.empty()) {
      out += section + ":\n";
    }
    for (const FlagDoc& doc : docs) {
      if (doc.section == section) {
        render_flag(doc, layout, out);
      }
    }
  }
  return out;
}

}  // namespace webhook::flags
