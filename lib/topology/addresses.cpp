#include "topology/addresses.h"

#include <algorithm>

#include "topology/names.h"

namespace topology {

std::string worker_hostnames(std::string_view group, int replica, int hosts, std::string_view svc) {
  std::string out;
  out.reserve(worker_hostnames_size(group.size(), replica, hosts, svc.size()));
  for (int h = 0; h < hosts; ++h) {
    if (h > 0) {
      out.push_back(',');
    }
    append_host_dns_name(out, group, replica, h, svc);
  }
  return out;
}

std::size_t list_size(std::string_view text) {
  return text.empty() ? 0 : static_cast<std::size_t>(std::count(text.begin(), text.end(), ',')) + 1;
}

bool list_has_empty_item(std::string_view text) {
  return !text.empty() &&
         (text.front() == ',' || text.back() == ',' || text.find(",,") != std::string_view::npos);
}

std::string address_list(std::string_view entries, int ports_per_entry, int port_base) {
  std::size_t count = list_size(entries);
  std::string out;
  if (count == 0 || ports_per_entry <= 0) {
    return out;
  }
  out.reserve(address_list_size(entries.size() - (count - 1), count, ports_per_entry, port_base));
  std::size_t start = 0;
  for (std::size_t i = 0; i < count; ++i) {
    std::size_t comma = std::min(entries.find(',', start), entries.size());
    std::string_view entry = entries.substr(start, comma - start);
    for (int p = 0; p < ports_per_entry; ++p) {
      if (!out.empty()) {
        out.push_back(',');
      }
      out.append(entry).push_back(':');
      out.append(std::to_string(port_base + p));
    }
    start = comma + 1;
  }
  return out;
}

std::size_t decimal_digits(long long n) {
  std::size_t digits = 1;
  for (; n >= 10; n /= 10) {
    ++digits;
  }
  return digits;
}

std::size_t worker_hostnames_size(std::size_t group_bytes, int replica, int hosts,
                                  std::size_t svc_bytes) {
  if (hosts <= 0) {
    return 0;
  }
  // Each "<g>-<r>-<h>.<svc>" and the comma before every entry but the first.
  std::size_t fixed = group_bytes + 1 + decimal_digits(replica) + 1 + 1 + svc_bytes;
  std::size_t size = static_cast<std::size_t>(hosts) * fixed + static_cast<std::size_t>(hosts - 1);
  for (int h = 0; h < hosts; ++h) {
    size += decimal_digits(h);
  }
  return size;
}

std::size_t address_list_size(std::size_t entry_bytes, std::size_t count, int ports_per_entry,
                              int port_base) {
  if (count == 0 || ports_per_entry <= 0) {
    return 0;
  }
  auto ports = static_cast<std::size_t>(ports_per_entry);
  // Every entry once per port, each address's ":<port>", and a comma between addresses.
  std::size_t size = ports * entry_bytes + count * ports - 1;
  for (int p = 0; p < ports_per_entry; ++p) {
    size += count * (1 + decimal_digits(static_cast<long long>(port_base) + p));
  }
  return size;
}

std::string torch_tpu_topology(const Shape& shape, int chiplets) {
  const auto& d = shape.dims3();
  std::string out = std::to_string(d[0]) + "," + std::to_string(d[1]) + "," + std::to_string(d[2]);
  if (chiplets == 2) {
    out += ",2";
  }
  return out;
}

std::string megascale_coordinator(std::string_view group, std::string_view svc, bool tpu7x,
                                  int megascale_base) {
  std::string out = host_dns_name(group, 0, 0, svc);
  if (tpu7x) {
    out += ':';
    out += std::to_string(megascale_base);
  }
  return out;
}

}  // namespace topology
