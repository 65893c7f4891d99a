#include "kube/claim_lease.h"

#include <openssl/evp.h>

#include <algorithm>

namespace kube {
namespace {

using nlohmann::json;
using podpatch::GroupKey;

std::string hex(const unsigned char* data, std::size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(kHex[data[i] >> 4]);
    out.push_back(kHex[data[i] & 15]);
  }
  return out;
}

}  // namespace

std::string claim_object_name(const GroupKey& key) {
  std::string input = key.ns + '\0' + key.cluster + '\0' + key.group;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(input.data(), input.size(), digest, &n, EVP_sha256(), nullptr);
  return "kuberay-tpu-slots-" + hex(digest, std::min<std::size_t>(n, 12));
}

std::string encode_claims(const std::vector<Claim>& claims) {
  json out = json::array();
  for (const Claim& c : claims) {
    out.push_back({{"replica", c.slot.replica},
                   {"host", c.slot.host},
                   {"expires", format_rfc3339(c.expires, 3)},
                   {"pod", c.pod},
                   {"holder", c.holder},
                   {"id", c.id}});
  }
  return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

webhook::Result<std::vector<Claim>> decode_claims(std::string_view text) {
  json j = json::parse(text, nullptr, false);
  if (!j.is_array()) {
    return webhook::invalid_argument(std::string(kClaimsAnnotation) +
                                     ": not a JSON array of claims");
  }
  std::vector<Claim> out;
  for (std::size_t i = 0; i < j.size(); ++i) {
    const json& c = j[i];
    std::string where = std::string(kClaimsAnnotation) + "[" + std::to_string(i) + "]";
    if (!c.is_object()) {
      return webhook::invalid_argument(where + ": not an object");
    }
    auto integer = [&](const char* k) -> std::optional<int> {
      auto it = c.find(k);
      if (it == c.end() || !it->is_number_integer()) {
        return std::nullopt;
      }
      auto v = it->get<long long>();
      return v < 0 || v > 1'000'000 ? std::nullopt : std::optional<int>(static_cast<int>(v));
    };
    auto text_of = [&](const char* k) -> std::optional<std::string> {
      auto it = c.find(k);
      return it == c.end() || !it->is_string() ? std::nullopt
                                               : std::optional<std::string>(it->get<std::string>());
    };
    std::optional<int> replica = integer("replica");
    std::optional<int> host = integer("host");
    std::optional<std::string> expires = text_of("expires");
    std::optional<std::string> id = text_of("id");
    if (!replica || !host) {
      return webhook::invalid_argument(where + ": replica and host must be non-negative integers");
    }
    if (!expires || !id || id->empty()) {
      return webhook::invalid_argument(where + ": expires and id must be strings");
    }
    std::optional<WallTime> when = parse_rfc3339_utc(*expires);
    if (!when) {
      return webhook::invalid_argument(where + ": expires is not an RFC 3339 UTC time");
    }
    out.push_back(Claim{{*replica, *host},
                        *when,
                        text_of("pod").value_or(""),
                        text_of("holder").value_or(""),
                        std::move(*id)});
  }
  return out;
}

webhook::Result<LeaseState> lease_state(const json& lease) {
  const json* md = lease.is_object() && lease.contains("metadata") ? &lease["metadata"] : nullptr;
  if (md == nullptr || !md->is_object()) {
    return webhook::invalid_argument("the Lease has no metadata");
  }
  std::string rv = md->value("resourceVersion", "");
  std::vector<Claim> claims;
  auto ann = md->find("annotations");
  if (ann != md->end() && ann->is_object()) {
    auto c = ann->find(std::string(kClaimsAnnotation));
    if (c != ann->end()) {
      if (!c->is_string()) {
        return webhook::invalid_argument(std::string(kClaimsAnnotation) + " is not a string");
      }
      webhook::Result<std::vector<Claim>> decoded = decode_claims(c->get<std::string>());
      if (!decoded) {
        return decoded.error();
      }
      claims = std::move(*decoded);
    }
  }
  return LeaseState{std::move(rv), std::move(claims)};
}

std::optional<GroupKey> lease_group(const json& lease) {
  if (!lease.is_object() || !lease.contains("metadata") || !lease["metadata"].is_object()) {
    return std::nullopt;
  }
  const json& md = lease["metadata"];
  std::string group;
  if (auto ann = md.find("annotations"); ann != md.end() && ann->is_object()) {
    group = ann->value(std::string(kClaimGroupAnnotation), "");
  }
  std::size_t a = group.find('/');
  std::size_t b = a == std::string::npos ? a : group.find('/', a + 1);
  if (b == std::string::npos) {
    return std::nullopt;
  }
  GroupKey key{group.substr(0, a), group.substr(a + 1, b - a - 1), group.substr(b + 1)};
  if (claim_object_name(key) != md.value("name", "")) {
    return std::nullopt;
  }
  return key;
}

std::string describe_status(const ApiClient::Reply& r) {
  json j = json::parse(r.body, nullptr, false);
  std::string message;
  if (j.is_object()) {
    auto it = j.find("message");
    if (it != j.end() && it->is_string()) {
      message = it->get<std::string>();
    }
  }
  if (message.size() > 200) {
    message = message.substr(0, 200) + "...";
  }
  return "HTTP " + std::to_string(r.status) + (message.empty() ? "" : ": " + message);
}

std::string status_reason(const std::string& body) {
  json j = json::parse(body, nullptr, false);
  if (j.is_object()) {
    auto it = j.find("reason");
    if (it != j.end() && it->is_string()) {
      return it->get<std::string>();
    }
  }
  return "";
}

}  // namespace kube
