#pragma once
// The Kubernetes quantities webhook-dryrun reads, under the names its code uses: the parser is
// the one every room shares (base/text/quantity.h).

#include "base/text/quantity.h"

namespace dryrun {

using webhook::go_pow10;
using webhook::parse_quantity;
using webhook::Quantity;

}  // namespace dryrun
