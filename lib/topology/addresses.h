#pragma once
// The address lists a slice's processes use to find each other (docs/topology.md §2).
//
//   std::string hosts = topology::worker_hostnames("v6e-16", 0, 4, "c-headless");
//                                                     // TPU_WORKER_HOSTNAMES
//   topology::address_list(hosts, 4, 8471);           // TORCH_TPU_SLICEBUILDER_ADDRESSES (v6e)
//   topology::address_list(hosts, 1, 8471);           // TPU_PROCESS_ADDRESSES (1 container)
//   topology::torch_tpu_topology(shape, 2);           // "2,2,2,2" on TPU7x 2x2x2

#include <cstddef>
#include <string>
#include <string_view>

#include "topology/shape.h"

namespace topology {

// Port bases; each is a flag of both binaries.
struct Ports {
  int tpu_process_base = 8471;  // slicebuilder and TPU process ports: base, base+1, ...
  int megascale_base = 8081;    // MEGASCALE_PORT (TPU7x: + container index)
  int device_plugin = 2112;     // TPU_DEVICE_PLUGIN_ADDR port
};

// The DNS names of hosts 0..hosts-1 of replica `replica` of `group`, behind Service `svc`,
// comma-joined (TPU_WORKER_HOSTNAMES): one string of worker_hostnames_size bytes, made at once
// (a 2,304-host slice is one allocation, not one per host).
std::string worker_hostnames(std::string_view group, int replica, int hosts, std::string_view svc);

// How many items the comma-separated `text` holds, without splitting it: 0 for "", else
// commas + 1 (an empty item counts; items are not trimmed).
std::size_t list_size(std::string_view text);

// Whether the comma-separated `text` holds an empty item: it starts or ends with a comma or
// holds ",,".
bool list_has_empty_item(std::string_view text);

// "<entry>:<port>" for each entry of the comma-separated `entries` (in order), for ports port_base .. port_base+ports_per_entry-1: host-major, port ascending,
// comma-joined, made at once. Slicebuilder addresses use one port per device of a host; TPU
// process addresses one per TPU container.
std::string address_list(std::string_view entries, int ports_per_entry, int port_base);

// The decimal digits of n >= 0 (1 for 0).
std::size_t decimal_digits(long long n);

// worker_hostnames(group, replica, hosts, svc).size() for a group name of `group_bytes`
// and a Service name of `svc_bytes` bytes, computed without making the list: the limits of
// docs/spec.md M8 are checked before a list is built.
std::size_t worker_hostnames_size(std::size_t group_bytes, int replica, int hosts,
                                  std::size_t svc_bytes);

// address_list(entries, ports_per_entry, port_base).size() for `count` entries of `entry_bytes`
// bytes in all (their commas not counted), computed without making the list.
std::size_t address_list_size(std::size_t entry_bytes, std::size_t count, int ports_per_entry,
                              int port_base);

// TORCH_TPU_TOPOLOGY: the three dims joined by ',' (2-D gets ",1"), plus ",2" when a chip has
// two chiplets: v6e 4x4 -> "4,4,1"; TPU7x 2x2x2 -> "2,2,2,2".
std::string torch_tpu_topology(const Shape& shape, int chiplets);

// MEGASCALE_COORDINATOR_ADDRESS: host 0 of replica 0, "<g>-0-0.<svc>", with ":<megascale_base>"
// on TPU7x.
std::string megascale_coordinator(std::string_view group, std::string_view svc, bool tpu7x,
                                  int megascale_base);

}  // namespace topology
