#include "heap_counter.h"

#include <malloc.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <new>
#include <sstream>

#include "base/memory/heap_limit.h"

namespace {

std::size_t live_bytes = 0;
std::size_t peak_bytes = 0;

#if defined(HEAP_COUNTER_JEMALLOC)
// What an allocation holds under jemalloc (linked in: malloc_usable_size is its own): its size
// class. jemalloc keeps no header beside an allocation; its metadata lives per extent.
std::size_t held(void* p) { return malloc_usable_size(p); }
#else
// What an allocation holds under glibc: its usable size and the chunk header (a mapped chunk has
// two words).
std::size_t held(void* p) {
  std::size_t usable = malloc_usable_size(p);
  return usable + ((usable + 16) % 4096 == 0 ? 16 : 8);
}
#endif

// These replace base/memory/heap_limit.cpp's allocation functions (theirs are weak), so they tell
// the thread's HeapLimit of each allocation as those do; the counts here are this file's own.
void* counted_new(std::size_t n) {
  webhook::HeapLimit::before_allocate(n);
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) {
    throw std::bad_alloc();
  }
  webhook::HeapLimit::allocated(p);
  live_bytes += held(p);
  peak_bytes = std::max(peak_bytes, live_bytes);
  return p;
}

void counted_delete(void* p) noexcept {
  if (p != nullptr) {
    webhook::HeapLimit::freed(p);
    live_bytes -= held(p);
    std::free(p);
  }
}

}  // namespace

void* operator new(std::size_t n) { return counted_new(n); }
void* operator new[](std::size_t n) { return counted_new(n); }
void operator delete(void* p) noexcept { counted_delete(p); }
void operator delete[](void* p) noexcept { counted_delete(p); }
void operator delete(void* p, std::size_t /*size*/) noexcept { counted_delete(p); }
void operator delete[](void* p, std::size_t /*size*/) noexcept { counted_delete(p); }
void* operator new(std::size_t n, const std::nothrow_t& /*tag*/) noexcept {
  try {
    return counted_new(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& tag) noexcept {
  return operator new(n, tag);
}
void operator delete(void* p, const std::nothrow_t& /*tag*/) noexcept { counted_delete(p); }
void operator delete[](void* p, const std::nothrow_t& /*tag*/) noexcept { counted_delete(p); }

namespace heap {

std::size_t peak_of(const std::function<void()>& work) {
  std::size_t start = live_bytes;
  peak_bytes = live_bytes;
  work();
  return peak_bytes - start;
}

std::size_t live() { return live_bytes; }

std::vector<std::string> admission_fixtures(const std::string& dir) {
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::string name = entry.path().filename().string();
    if (name.ends_with(".json") && !name.ends_with(".config.json")) {
      files.push_back(entry.path().string());
    }
  }
  return files;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string repeat(const std::string& item, std::size_t n, const std::string& open,
                   const std::string& close) {
  std::string s = open;
  for (std::size_t i = 0; i < n; ++i) {
    s += (i > 0 ? "," : "") + item;
  }
  return s + close;
}

std::string members(const std::string& value, std::size_t n) {
  std::string s = "{";
  for (std::size_t i = 0; i < n; ++i) {
    std::string key;
    for (std::size_t k = i; key.empty() || k > 0; k /= 26) {
      key += static_cast<char>('a' + k % 26);
    }
    s += (i > 0 ? ",\"" : "\"") + key + "\":" + value;
  }
  return s + "}";
}

const std::vector<Shape>& shapes() {
  static const std::vector<Shape> kShapes = {
      {"[{}]", [](std::size_t n) { return repeat("{}", n); }},
      {"[[]]", [](std::size_t n) { return repeat("[]", n); }},
      {"[0]", [](std::size_t n) { return repeat("0", n); }},
      {"[true]", [](std::size_t n) { return repeat("true", n); }},
      {"[\"\"]", [](std::size_t n) { return repeat("\"\"", n); }},
      {"[[0]]", [](std::size_t n) { return repeat("[0]", n); }},
      {"[[0,0]]", [](std::size_t n) { return repeat("[0,0]", n); }},
      {"[[0 x8]]", [](std::size_t n) { return repeat("[0,0,0,0,0,0,0,0]", n); }},
      {"[{a:0}]", [](std::size_t n) { return repeat(R"({"a":0})", n); }},
      {"{k:{}}", [](std::size_t n) { return members("{}", n); }},
      {"{k:0}", [](std::size_t n) { return members("0", n); }},
      {"{k:[]}", [](std::size_t n) { return members("[]", n); }},
      {"{k:\"\"}", [](std::size_t n) { return members("\"\"", n); }},
      {"[16-byte strings]", [](std::size_t n) { return repeat("\"0123456789abcdef\"", n); }},
      {"one string", [](std::size_t n) { return "\"" + std::string(3 * n, 'x') + "\""; }},
      {"one number", [](std::size_t n) { return std::string(3 * n, '7'); }},
      {"[{}] cut short", [](std::size_t n) { return repeat("{}", n).substr(0, 3 * n - 1); }},
      {"a string with a control byte",
       [](std::size_t n) { return "\"" + std::string(3 * n, 'x') + "\x01\""; }},
  };
  return kShapes;
}

}  // namespace heap
