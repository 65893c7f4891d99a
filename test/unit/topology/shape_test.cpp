#include <catch2/catch.hpp>
#include "topology/shape.h"
TEST_CASE("placeholder") { REQUIRE(topology::parse_shape("4x4")->chips() == 16); }
