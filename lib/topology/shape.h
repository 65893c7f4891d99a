#pragma once
// A TPU slice topology such as "4x4" or "2x2x2".
//
//   webhook::Result<topology::Shape> s = topology::parse_shape("2x2x4");
//   s->chips();          // 16
//   s->dims3();          // {2, 2, 4}; a 2-D "4x4" gives {4, 4, 1}

#include <array>
#include <string>
#include <string_view>

#include "base/status/result.h"

namespace topology {

// The largest slice GKE offers: a full TPU7x (Ironwood) pod of 9216 chips. Bigger topologies are
// typos, and would make address lists of unbounded size.
inline constexpr int kMaxChips = 9216;

struct Shape {
  std::array<int, 3> dims{1, 1, 1};  // unused trailing dims are 1
  int rank = 0;                      // 2 or 3: how many dims the text had

  int chips() const { return dims[0] * dims[1] * dims[2]; }
  // The dims as 3 numbers: a 2-D shape gets a trailing 1.
  const std::array<int, 3>& dims3() const { return dims; }
  // "4x4" or "2x2x2", exactly as parsed.
  std::string text() const;

  friend bool operator==(const Shape&, const Shape&) = default;
};

// Parses a topology (docs/spec.md M2). Strict: 2 or 3 dimensions separated by a lowercase 'x', each
// only digits and greater than 0, at most kMaxChips chips in all; no signs, spaces or other
// characters. On bad input returns InvalidArgument naming the offending token and saying what a
// valid topology looks like.
webhook::Result<Shape> parse_shape(std::string_view text);

}  // namespace topology
