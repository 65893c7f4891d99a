#include "topology/accelerator.h"

#include <algorithm>
#include <array>
#include <functional>
#include <string>

namespace topology {
namespace {

constexpr std::array<int, 1> kFourChips = {4};
constexpr std::array<int, 3> kLiteChips = {1, 4, 8};
constexpr std::array<int, 2> kIronwoodChips = {1, 4};

// From the GKE machine types (docs/topology.md §1): ct4p-hightpu-4t, ct5p-hightpu-4t,
// ct5lp-hightpu-{1,4,8}t, ct6e-standard-{1,4,8}t, tpu7x-standard-{1,4}t.
constexpr std::array<Accelerator, 6> kAccelerators = {{
    {"tpu-v4-podslice", "v4", 3, kFourChips, 1, false},
    {"tpu-v5p-slice", "v5p", 3, kFourChips, 1, false},
    {"tpu-v5-lite-podslice", "v5e", 2, kLiteChips, 1, false},
    {"tpu-v5-lite-device", "v5e", 2, kLiteChips, 1, true},
    {"tpu-v6e-slice", "v6e", 2, kLiteChips, 1, false},
    {"tpu7x", "tpu7x", 3, kIronwoodChips, 2, false},
}};

}  // namespace

bool Accelerator::offers_chips_per_host(int chips) const {
  return std::find(chips_per_host.begin(), chips_per_host.end(), chips) != chips_per_host.end();
}

std::span<const Accelerator> accelerators() { return kAccelerators; }

const Accelerator* find_accelerator(std::string_view label) {
  for (const Accelerator& a : kAccelerators) {
    if (a.label == label) {
      return &a;
    }
  }
  return nullptr;
}

bool Accelerator::hosts_slice_with(int chips, int slice_chips) const {
  bool whole_slice = chips == slice_chips;
  bool multi_host = chips == kMultiHostChipsPerVm && slice_chips > chips &&
                    slice_chips % chips == 0 && !single_host_only;
  return offers_chips_per_host(chips) && (whole_slice || multi_host);
}

std::vector<int> Accelerator::chips_per_host_for(int slice_chips) const {
  std::vector<int> out;
  for (int c : chips_per_host) {
    if (hosts_slice_with(c, slice_chips)) {
      out.push_back(c);
    }
  }
  std::sort(out.begin(), out.end(), std::greater<>());
  return out;
}

namespace {

char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }

// Optimal string alignment distance (Levenshtein plus transpositions), case-insensitive, capped
// at `cap` + 1 so a long label costs no more than the short ones.
std::size_t edit_distance(std::string_view a, std::string_view b, std::size_t cap) {
  if ((a.size() > b.size() ? a.size() - b.size() : b.size() - a.size()) > cap) {
    return cap + 1;
  }
  std::vector<std::size_t> before(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) {
    prev[j] = j;
  }
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
          lower(a[i - 2]) == lower(b[j - 1])) {
        cur[j] = std::min(cur[j], before[j - 2] + 1);
      }
    }
    before.swap(prev);
    prev.swap(cur);
  }
  return std::min(prev[b.size()], cap + 1);
}

bool equal_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [](char x, char y) { return lower(x) == lower(y); });
}

// Text that names a generation inside a label someone typed ("tpu-v6e-podslice" is v6e's).
struct GenerationToken {
  std::string_view generation;
  std::string_view token;
};
constexpr std::array<GenerationToken, 8> kGenerationTokens = {{
    {"v4", "v4"},
    {"v5p", "v5p"},
    {"v5e", "v5e"},
    {"v5e", "v5-lite"},
    {"v5e", "v5lite"},
    {"v6e", "v6e"},
    {"tpu7x", "7x"},
    {"tpu7x", "ironwood"},
}};

bool contains_ignoring_case(std::string_view text, std::string_view token) {
  for (std::size_t i = 0; i + token.size() <= text.size(); ++i) {
    if (equal_ignoring_case(text.substr(i, token.size()), token)) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::string_view closest_accelerator(std::string_view label) {
  constexpr std::size_t kMaxLabel = 64;  // longer text is no typo of a label
  if (label.empty() || label.size() > kMaxLabel || find_accelerator(label) != nullptr) {
    return {};
  }
  // "tpu-v9-slice" is more likely new hardware than a typo: a version number no known generation
  // has gets no suggestion.
  for (std::size_t i = 0; i + 1 < label.size(); ++i) {
    if (lower(label[i]) == 'v' && label[i + 1] >= '0' && label[i + 1] <= '9' &&
        (label[i + 1] < '4' || label[i + 1] > '7')) {
      return {};
    }
  }
  // The generation the text names, when it names exactly one, narrows the candidates to its
  // labels and allows more edits ("tpu-v6e-podslice" is two edits from tpu-v4-podslice but
  // means tpu-v6e-slice).
  std::string_view generation;
  for (const GenerationToken& g : kGenerationTokens) {
    if (contains_ignoring_case(label, g.token)) {
      if (!generation.empty() && generation != g.generation) {
        generation = {};
        break;
      }
      generation = g.generation;
    }
  }
  for (const Accelerator& a : kAccelerators) {
    std::string prefixed = "tpu-" + std::string(a.generation);
    if (equal_ignoring_case(label, a.generation) || equal_ignoring_case(label, prefixed)) {
      return a.label;
    }
  }
  std::size_t cap = generation.empty() ? std::clamp<std::size_t>(label.size() / 4, 1, 3)
                                       : std::max<std::size_t>(label.size() / 2, 1);
  std::string_view best;
  std::size_t best_distance = cap + 1;
  for (const Accelerator& a : kAccelerators) {
    if (!generation.empty() && a.generation != generation) {
      continue;
    }
    std::size_t d = edit_distance(label, a.label, cap);
    if (d < best_distance) {
      best = a.label;
      best_distance = d;
    }
  }
  return best;
}

bool is_tpu7x(std::string_view label) { return label.starts_with("tpu7x"); }

int chiplets_per_chip(std::string_view label) { return is_tpu7x(label) ? 2 : 1; }

}  // namespace topology
