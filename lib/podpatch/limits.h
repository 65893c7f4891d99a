#pragma once
// The limits a mutated Pod must stay under to start and to be stored (docs/spec.md M8), and the
// sizes of the lists M5 writes, computed from the names before any list is built.
//
//   podpatch::env_string_fits(name.size(), value.size());       // M8.1: execve takes it
//   podpatch::ListSizes s = podpatch::list_sizes(slice, group.size(), 0, svc.size(), 1, ports);
//   if (s.hostnames > podpatch::kMaxEnvStringBytes) ...          // denied: JAX needs it

#include <cstddef>
#include <string>
#include <string_view>

#include "base/status/result.h"
#include "topology/addresses.h"
#include "topology/slice.h"

namespace podpatch {

// Linux refuses to execve a program one of whose environment strings "NAME=value", with its
// terminating NUL, is longer than MAX_ARG_STRLEN: 32 pages (include/uapi/linux/binfmts.h),
// 131,072 bytes with the 4 KiB pages of x86-64 VMs. execve(2) then fails with E2BIG, which the
// container runtime reports as "argument list too long", and the container never starts. The
// NUL counts: the kernel measures each string with strnlen_user, which includes it, and refuses
// a length above the limit, so "NAME=value" may have at most 131,071 bytes.
inline constexpr std::size_t kMaxEnvStringBytes = 131072;

// What execve copies for one environment variable: "NAME=value" and its NUL.
constexpr std::size_t env_string_bytes(std::size_t name_bytes, std::size_t value_bytes) {
  return name_bytes + 1 + value_bytes + 1;
}
constexpr bool env_string_fits(std::size_t name_bytes, std::size_t value_bytes) {
  return env_string_bytes(name_bytes, value_bytes) <= kMaxEnvStringBytes;
}

// The budget of a mutated Pod (M8.3): its JSON as sent plus the webhook's JSON Patch text, an
// upper bound of the Pod kube-apiserver stores. etcd refuses a write over its --max-request-bytes
// (1.5 MiB by default) and kube-apiserver a request body over 3 MiB; the budget leaves half a MiB
// of the smaller for what the API server and the kubelet add later (status, managedFields).
inline constexpr std::size_t kMaxPodBytes = std::size_t{1} << 20;

// The environment strings (env_string_bytes) of the lists M5 writes into each TPU container of a
// Pod of `slice`, replica `replica`, a group name of `group_bytes` and a Service name of
// `svc_bytes` bytes, with `tpu_containers` TPU containers; 0 for a list the Pod does not get.
struct ListSizes {
  std::size_t hostnames = 0;          // TPU_WORKER_HOSTNAMES (multi-host)
  std::size_t process_addresses = 0;  // TPU_PROCESS_ADDRESSES (TPU7x, M5.2)
  std::size_t slicebuilder = 0;       // TORCH_TPU_SLICEBUILDER_ADDRESSES, from the webhook's list
  std::size_t hosts = 1;              // entries of TPU_WORKER_HOSTNAMES
  std::size_t process_entries = 0;    // entries of TPU_PROCESS_ADDRESSES: hosts x containers
};
ListSizes list_sizes(const topology::Slice& slice, std::size_t group_bytes, int replica,
                     std::size_t svc_bytes, int tpu_containers, const topology::Ports& ports);

// The characters the group and Service names must lose together for a list of `entries` entries,
// each holding both names, to fit one environment string when it would be `bytes` long (M8.1).
// Of several lists over the limit, the one with the largest cut is the one to report: cutting
// that much fits them all.
std::size_t names_cut(std::size_t bytes, std::size_t entries);

// The denial of a host list JAX needs whose environment string would be `bytes` long (M8.1):
// the numbers, and by how many characters to shorten the group and Service names, each of
// which appears in every one of the list's `entries` entries. Reason env_too_long.
webhook::Error env_too_long(std::string_view var, std::size_t bytes, std::size_t entries,
                            std::string_view group, std::string_view svc, std::string_view cluster);

// 1234567 as "1,234,567".
std::string with_commas(std::size_t n);

}  // namespace podpatch
