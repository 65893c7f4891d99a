#include "podpatch/limits.h"

#include "base/text/text.h"
#include "podpatch/keys.h"
#include "podpatch/reasons.h"

namespace podpatch {

std::string with_commas(std::size_t n) {
  std::string digits = std::to_string(n);
  std::string out;
  for (std::size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) {
      out.push_back(',');
    }
    out.push_back(digits[i]);
  }
  return out;
}

ListSizes list_sizes(const topology::Slice& slice, std::size_t group_bytes, int replica,
                     std::size_t svc_bytes, int tpu_containers, const topology::Ports& ports) {
  ListSizes s;
  // The host list: the DNS names of the replica's hosts, or "localhost" on one host.
  std::size_t entries = 1;
  std::size_t entry_bytes = 9;  // localhost
  if (slice.multi_host()) {
    entries = static_cast<std::size_t>(slice.hosts());
    std::size_t joined =
        topology::worker_hostnames_size(group_bytes, replica, slice.hosts(), svc_bytes);
    entry_bytes = joined - (entries - 1);
    s.hostnames = env_string_bytes(keys::kWorkerHostnames.size(), joined);
  }
  s.hosts = entries;
  if (slice.tpu7x() && (slice.multi_host() || tpu_containers > 1)) {
    s.process_entries = entries * static_cast<std::size_t>(tpu_containers);
    s.process_addresses = env_string_bytes(
        keys::kProcessAddresses.size(),
        topology::address_list_size(entry_bytes, entries, tpu_containers, ports.tpu_process_base));
  }
  int per_entry = slice.chips() / static_cast<int>(entries) * slice.chiplets();
  s.slicebuilder = env_string_bytes(
      keys::kTorchSlicebuilder.size(),
      topology::address_list_size(entry_bytes, entries, per_entry, ports.tpu_process_base));
  return s;
}

std::size_t names_cut(std::size_t bytes, std::size_t entries) {
  std::size_t over = bytes > kMaxEnvStringBytes ? bytes - kMaxEnvStringBytes : 0;
  std::size_t per_char = entries > 0 ? entries : 1;
  return (over + per_char - 1) / per_char;
}

webhook::Error env_too_long(std::string_view var, std::size_t bytes, std::size_t entries,
                            std::string_view group, std::string_view svc,
                            std::string_view cluster) {
  std::size_t cut = names_cut(bytes, entries);
  // The Service is named after the RayCluster ("<cluster>-headless"): only the cluster's part
  // can be shortened, down to one character.
  std::size_t svc_fixed =
      svc.starts_with(cluster) && !cluster.empty() ? svc.size() - cluster.size() : 0;
  std::size_t can_cut = (group.size() > 1 ? group.size() - 1 : 0) +
                        (svc.size() > svc_fixed + 1 ? svc.size() - svc_fixed - 1 : 0);
  std::string message =
      std::string(var) + " would be " + with_commas(bytes) + " bytes as NAME=value (" +
      with_commas(entries) + " entries, each holding the worker group name and the headless " +
      "Service name), over Linux's limit of " + with_commas(kMaxEnvStringBytes) +
      " bytes for one environment string (MAX_ARG_STRLEN): every TPU container of the slice "
      "would fail to start with \"argument list too long\"; ";
  if (cut <= can_cut) {
    message += "shorten the worker group name " + webhook::quote_bounded(group) + " (" +
               std::to_string(group.size()) + " characters) and the headless Service name " +
               webhook::quote_bounded(svc) + " (" + std::to_string(svc.size()) +
               " characters, named after RayCluster " + webhook::quote_bounded(cluster) +
               ") by at least " + std::to_string(cut) + " character" + (cut == 1 ? "" : "s") +
               " in total";
  } else {
    message +=
        "even one-character worker group and RayCluster names would not fit it; use a smaller "
        "slice (several slices with "
        "MEGASCALE_NUM_SLICES) or fewer TPU containers per Pod";
  }
  return webhook::invalid_argument(std::move(message)).with_reason(reasons::kEnvTooLong);
}

}  // namespace podpatch
