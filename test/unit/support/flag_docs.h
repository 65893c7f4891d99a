#pragma once
// The flags a binary documents, read back from the text: in its --help output and in the
// "## Flags" table of its docs/*.md page. Header-only, so both unit test executables can check
// their binary's flag table against both.

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace testing {

// Every --name or -x in `text` (`x` a lowercase letter), such as "-o, --output FORMAT".
inline std::set<std::string> flags_in(const std::string& text) {
  static const std::regex kFlag(R"((^|[\s`,])(--?[a-z][a-z0-9-]*))");
  std::set<std::string> flags;
  for (std::sregex_iterator it(text.begin(), text.end(), kFlag), last; it != last; ++it) {
    flags.insert((*it)[2]);
  }
  return flags;
}

// The flags --help lists: those of each line that starts with two spaces and a dash, up to the
// two spaces before the flag's help text ("  -o, --output FORMAT     ...").
inline std::set<std::string> help_flags(const std::string& help) {
  std::set<std::string> flags;
  std::istringstream lines(help);
  for (std::string line; std::getline(lines, line);) {
    if (line.starts_with("  -")) {
      std::set<std::string> listed = flags_in(line.substr(2, line.find("  ", 2) - 2));
      flags.insert(listed.begin(), listed.end());
    }
  }
  return flags;
}

// The flags in the first column of the table under the page's "## Flags" heading.
inline std::set<std::string> documented_flags(const std::string& markdown_path) {
  std::ifstream file(markdown_path);
  std::set<std::string> flags;
  bool in_section = false;
  for (std::string line; std::getline(file, line);) {
    if (line.starts_with("## ")) {
      in_section = line == "## Flags";
      continue;
    }
    if (!in_section || !line.starts_with("| `")) {
      continue;
    }
    // The first cell ends at the first '|' that is not escaped as "\|".
    std::size_t end = 1;
    while ((end = line.find('|', end)) != std::string::npos && line[end - 1] == '\\') {
      ++end;
    }
    std::string cell = line.substr(1, end == std::string::npos ? std::string::npos : end - 1);
    std::set<std::string> listed = flags_in(cell);
    flags.insert(listed.begin(), listed.end());
  }
  return flags;
}

}  // namespace testing
