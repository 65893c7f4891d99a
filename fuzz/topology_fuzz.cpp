// libFuzzer target (b): topology parsing and Slice creation, with the address lists built from a
// valid Slice. Input: "<accelerator>\n<topology>\n<chips per host>".
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "topology/addresses.h"
#include "topology/names.h"
#include "topology/slice.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  std::size_t a = in.find('\n');
  std::string_view accelerator = in.substr(0, a);
  std::string_view rest = a == std::string_view::npos ? std::string_view() : in.substr(a + 1);
  std::size_t b = rest.find('\n');
  std::string_view topo = rest.substr(0, b);
  int chips_per_host = 4;
  if (b != std::string_view::npos && b + 1 < rest.size()) {
    chips_per_host = static_cast<unsigned char>(rest[b + 1]) % 17;
  }
  webhook::Result<topology::Shape> shape = topology::parse_shape(topo);
  if (shape && (shape->chips() < 1 || shape->chips() > topology::kMaxChips)) {
    __builtin_trap();
  }
  webhook::Result<topology::Slice> slice =
      topology::Slice::create({accelerator, topo, chips_per_host});
  if (!slice) {
    return 0;
  }
  if (slice->hosts() < 1 || slice->hosts() * slice->chips_per_host() < slice->chips()) {
    __builtin_trap();
  }
  std::string svc = topology::headless_service_name(accelerator, {});
  auto hosts = topology::worker_hostnames("g", 0, slice->hosts(), svc);
  std::string list = topology::address_list(hosts, slice->devices_per_host(), 8471);
  (void)topology::torch_tpu_topology(slice->shape(), slice->chiplets());
  (void)slice->advisories();
  (void)topology::check_name(accelerator);
  (void)list;
  return 0;
}
