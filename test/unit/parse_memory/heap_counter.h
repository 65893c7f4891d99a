#pragma once
// What the tests of this executable measure with: heap_counter.cpp replaces the global operator
// new and delete to count the bytes every allocation holds (its malloc chunk), so this executable
// holds no other test. Also the JSON shapes that are costliest per byte to parse.

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace heap {

// True when the counter counts glibc's malloc chunks; false when this executable is linked with
// jemalloc, the server's allocator, whose size classes round differently. Every bound must hold
// under both.
#if defined(HEAP_COUNTER_JEMALLOC)
inline constexpr bool kGlibcChunks = false;
#else
inline constexpr bool kGlibcChunks = true;
#endif

// The most bytes held at once while `work` runs, above what was held when it started.
std::size_t peak_of(const std::function<void()>& work);

// The bytes held now.
std::size_t live();

// The whole text of the file at `path`.
std::string read_text(const std::string& path);
// The AdmissionReview fixtures in `dir` (test/fixtures/admission), without their .config.json.
std::vector<std::string> admission_fixtures(const std::string& dir);

// `item` n times, comma-separated, in `open` `close`.
std::string repeat(const std::string& item, std::size_t n, const std::string& open = "[",
                   const std::string& close = "]");

// An object of n members with distinct short keys, each holding `value`.
std::string members(const std::string& value, std::size_t n);

// A named JSON text of n items: the shapes whose parse costs the most heap per body byte, and a
// few that decode refuses.
using Shape = std::pair<std::string, std::function<std::string(std::size_t)>>;
const std::vector<Shape>& shapes();

}  // namespace heap
