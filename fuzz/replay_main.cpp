// Replays inputs through a fuzz target's LLVMFuzzerTestOneInput without libFuzzer, so that every
// target also builds with g++ as an ordinary program and CTest runs it over its seed corpus and
// fuzz/regressions/<target>/ (fuzz/CMakeLists.txt). A property the target checks traps (or a
// sanitizer reports) exactly as under libFuzzer; the file being replayed is named on stderr first.
//   <target>_replay PATH...   every regular file under each PATH (directories recursively, in
//                             name order; names starting with '.' are skipped)
// Exit status: 0 when every input ran, 2 when a PATH is missing or no PATH held an input (a renamed
// fixture folder must not turn a replay into a no-op). A directory may be empty (a target without
// past findings has an empty fuzz/regressions/<target>/, kept in git by a hidden .gitkeep).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;

bool hidden(const fs::path& p) { return p.filename().string().starts_with('.'); }

std::vector<fs::path> inputs_under(const fs::path& root) {
  std::vector<fs::path> files;
  if (fs::is_regular_file(root)) {
    files.push_back(root);
    return files;
  }
  for (auto it = fs::recursive_directory_iterator(root); it != fs::recursive_directory_iterator();
       ++it) {
    if (hidden(it->path())) {
      if (it->is_directory()) {
        it.disable_recursion_pending();
      }
      continue;
    }
    if (it->is_regular_file()) {
      files.push_back(it->path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: " << argv[0] << " PATH... (files or directories of inputs)\n";
    return 2;
  }
  std::size_t total = 0;
  for (int i = 1; i < argc; ++i) {
    fs::path root(argv[i]);
    std::error_code ec;
    if (!fs::exists(root, ec)) {
      std::cerr << argv[0] << ": " << root.string() << ": no such file or directory\n";
      return 2;
    }
    std::vector<fs::path> files = inputs_under(root);
    for (const fs::path& f : files) {
      std::ifstream in(f, std::ios::binary);
      std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      std::cerr << "replay " << f.string() << " (" << bytes.size() << " bytes)\n";
      (void)LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()),
                                   bytes.size());
    }
    std::cout << root.string() << ": " << files.size() << " inputs\n";
    total += files.size();
  }
  if (total == 0) {
    std::cerr << argv[0] << ": no input under any PATH\n";
    return 2;
  }
  std::cout << total << " inputs replayed, none failed\n";
  return 0;
}
