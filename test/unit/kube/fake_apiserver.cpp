#include "fake_apiserver.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <climits>
#include <cstdio>
#include <ctime>
#include <stdexcept>

namespace testing {
namespace {

using nlohmann::json;

// What kube-apiserver's registry says about each resource served here.
struct ResourceInfo {
  std::string kind;
  std::string api_version;
  std::string group;  // empty: the core group
  bool namespaced;
  bool create_on_update;       // a PUT of a missing object creates it
  bool unconditional_update;   // a PUT without metadata.resourceVersion overwrites
  bool return_deleted_object;  // DELETE answers the object rather than a Status
};

const ResourceInfo& info_of(const std::string& resource) {
  static const ResourceInfo pods{"Pod", "v1", "", true, false, true, true};
  static const ResourceInfo nodes{"Node", "v1", "", false, false, true, false};
  static const ResourceInfo services{"Service", "v1", "", true, false, true, true};
  // The Lease strategy: AllowCreateOnUpdate true, AllowUnconditionalUpdate false.
  static const ResourceInfo leases{
      "Lease", "coordination.k8s.io/v1", "coordination.k8s.io", true, true, false, false};
  // Secrets and the webhook configurations: the strategies' defaults (no create on update,
  // unconditional update allowed, DELETE answers a Status).
  static const ResourceInfo secrets{"Secret", "v1", "", true, false, true, false};
  static const ResourceInfo mutating{"MutatingWebhookConfiguration",
                                     "admissionregistration.k8s.io/v1",
                                     "admissionregistration.k8s.io",
                                     false,
                                     false,
                                     true,
                                     false};
  static const ResourceInfo validating{"ValidatingWebhookConfiguration",
                                       "admissionregistration.k8s.io/v1",
                                       "admissionregistration.k8s.io",
                                       false,
                                       false,
                                       true,
                                       false};
  if (resource == "secrets") {
    return secrets;
  }
  if (resource == "mutatingwebhookconfigurations") {
    return mutating;
  }
  if (resource == "validatingwebhookconfigurations") {
    return validating;
  }
  if (resource == "pods") {
    return pods;
  }
  if (resource == "nodes") {
    return nodes;
  }
  // Read-only here (list, watch, get): what kubectl-tpu_slice reads besides the core kinds.
  static const ResourceInfo rayclusters{"RayCluster", "ray.io/v1", "ray.io", true,
                                        false,        true,        true};
  static const ResourceInfo endpointslices{
      "EndpointSlice", "discovery.k8s.io/v1", "discovery.k8s.io", true, false, true, true};
  if (resource == "leases") {
    return leases;
  }
  if (resource == "rayclusters") {
    return rayclusters;
  }
  if (resource == "endpointslices") {
    return endpointslices;
  }
  return services;
}

const std::string& kind_of(const std::string& resource) { return info_of(resource).kind; }

// "leases.coordination.k8s.io", "pods": how kube names a resource in its messages.
std::string qualified(const std::string& resource) {
  const ResourceInfo& info = info_of(resource);
  return info.group.empty() ? resource : resource + "." + info.group;
}

// "Lease.coordination.k8s.io", "Pod": how kube names a kind in validation messages.
std::string qualified_kind(const std::string& resource) {
  const ResourceInfo& info = info_of(resource);
  return info.group.empty() ? info.kind : info.kind + "." + info.group;
}

std::string key_of(const json& object) {
  const json& md = object.at("metadata");
  std::string ns = md.value("namespace", "");
  return ns.empty() ? md.value("name", "") : ns + "/" + md.value("name", "");
}

std::string key_of(const std::string& ns, const std::string& name) {
  return ns.empty() ? name : ns + "/" + name;
}

// metadata.<field> when it is a string, else "".
std::string meta_string(const json& object, const char* field) {
  auto md = object.find("metadata");
  if (md == object.end() || !md->is_object()) {
    return "";
  }
  auto it = md->find(field);
  return it != md->end() && it->is_string() ? it->get<std::string>() : "";
}

json status_body(int code, const std::string& reason, const std::string& message) {
  return {{"kind", "Status"},    {"apiVersion", "v1"}, {"metadata", json::object()},
          {"status", "Failure"}, {"message", message}, {"reason", reason},
          {"code", code}};
}

void answer_status(httplib::Response& res, int code, const std::string& reason,
                   const std::string& message) {
  res.status = code;
  res.set_content(status_body(code, reason, message).dump(), "application/json");
}

const json* labels_of(const json& object) {
  auto md = object.find("metadata");
  if (md == object.end() || !md->is_object()) {
    return nullptr;
  }
  auto labels = md->find("labels");
  return labels == md->end() ? nullptr : &*labels;
}

std::string bearer_of(const httplib::Request& req) {
  std::string auth = req.get_header_value("Authorization");
  return auth.rfind("Bearer ", 0) == 0 ? auth.substr(7) : "";
}

// ---- Status objects as kube-apiserver writes them -------------------------------------------

using Reply = FakeApiReply;

json details_of(const std::string& resource, const std::string& name) {
  json d = {{"name", name}, {"kind", resource}};
  if (!info_of(resource).group.empty()) {
    d["group"] = info_of(resource).group;
  }
  return d;
}

Reply failure(int code, const std::string& reason, const std::string& message,
              json details = nullptr) {
  json body = status_body(code, reason, message);
  if (!details.is_null()) {
    body["details"] = std::move(details);
  }
  return {code, std::move(body)};
}

Reply bad_request(const std::string& message) { return failure(400, "BadRequest", message); }

Reply not_found(const std::string& resource, const std::string& name) {
  return failure(404, "NotFound", qualified(resource) + " \"" + name + "\" not found",
                 details_of(resource, name));
}

Reply already_exists(const std::string& resource, const std::string& name) {
  return failure(409, "AlreadyExists", qualified(resource) + " \"" + name + "\" already exists",
                 details_of(resource, name));
}

Reply conflict(const std::string& resource, const std::string& name, const std::string& why) {
  return failure(
      409, "Conflict",
      "Operation cannot be fulfilled on " + qualified(resource) + " \"" + name + "\": " + why,
      details_of(resource, name));
}

const char* const kOptimisticLock =
    "the object has been modified; please apply your changes to the latest version and try again";

// A 422: one field error. `kind_name` is how the message names the kind
// ("Lease.coordination.k8s.io" for validation, "leases.coordination.k8s.io" for a missing
// resourceVersion, as kube does).
Reply invalid(const std::string& resource, const std::string& kind_name, const std::string& name,
              const std::string& field, const std::string& cause_reason,
              const std::string& detail) {
  json d = details_of(resource, name);
  std::size_t dot = kind_name.find('.');
  d["kind"] = kind_name.substr(0, dot);
  d["causes"] = json::array({{{"reason", cause_reason}, {"message", detail}, {"field", field}}});
  return failure(422, "Invalid",
                 kind_name + " \"" + name + "\" is invalid: " + field + ": " + detail,
                 std::move(d));
}

// The 403 of RBAC's authorizer, worded as kube-apiserver words it.
Reply rbac_denied(const std::string& resource, const std::string& user, const std::string& verb,
                  const std::string& ns, const std::string& name) {
  const ResourceInfo& info = info_of(resource);
  std::string scope = ns.empty() ? "at the cluster scope" : "in the namespace \"" + ns + "\"";
  std::string subject =
      name.empty() ? qualified(resource) : qualified(resource) + " \"" + name + "\"";
  json d = {{"group", info.group}, {"kind", resource}};
  if (!name.empty()) {
    d["name"] = name;
  }
  return failure(403, "Forbidden",
                 subject + " is forbidden: User \"" + user + "\" cannot " + verb + " resource \"" +
                     resource + "\" in API group \"" + info.group + "\" " + scope,
                 std::move(d));
}

// The Status of an injected write failure.
Reply injected(const std::string& resource, const std::string& name, int code) {
  switch (code) {
    case 409:
      return conflict(resource, name, kOptimisticLock);
    case 404:
      return not_found(resource, name);
    case 400:
      return bad_request("injected failure");
    case 401:
      return failure(401, "Unauthorized", "Unauthorized");
    case 403:
      return failure(403, "Forbidden", "injected failure", details_of(resource, name));
    case 422:
      return failure(422, "Invalid", "injected failure", details_of(resource, name));
    case 429: {
      json d = details_of(resource, name);
      d["retryAfterSeconds"] = 1;
      return failure(429, "TooManyRequests",
                     "the server has received too many requests and has asked us to try again "
                     "later",
                     std::move(d));
    }
    case 500:
      return failure(500, "InternalError", "Internal error occurred: injected failure",
                     json{{"causes", json::array({{{"message", "injected failure"}}})}});
    case 503:
      return failure(503, "ServiceUnavailable",
                     "the server is currently unable to handle the request");
    case 504:
      return failure(504, "Timeout",
                     "the server was unable to return a response in the time allotted, but may "
                     "still be processing the request",
                     details_of(resource, name));
    default:
      return failure(code, "", "injected failure " + std::to_string(code));
  }
}

// ---- Decoding and validation ----------------------------------------------------------------

std::string rfc3339_now() {
  std::time_t t = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

bool digits_at(const std::string& s, std::size_t pos, std::size_t n, int& value) {
  if (pos + n > s.size()) {
    return false;
  }
  value = 0;
  for (std::size_t i = pos; i < pos + n; ++i) {
    if (std::isdigit(static_cast<unsigned char>(s[i])) == 0) {
      return false;
    }
    value = value * 10 + (s[i] - '0');
  }
  return true;
}

// A metav1.MicroTime as kube-apiserver decodes it (Go's time.Parse with
// "2006-01-02T15:04:05.000000Z07:00": exactly six fractional digits, "Z" or a ±hh:mm offset),
// given back in UTC as it is stored; nullopt when the decoder would refuse it.
std::optional<std::string> normalize_micro_time(const std::string& s) {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0, micros = 0;
  if (s.size() < 27 || !digits_at(s, 0, 4, year) || s[4] != '-' || !digits_at(s, 5, 2, month) ||
      s[7] != '-' || !digits_at(s, 8, 2, day) || s[10] != 'T' || !digits_at(s, 11, 2, hour) ||
      s[13] != ':' || !digits_at(s, 14, 2, minute) || s[16] != ':' ||
      !digits_at(s, 17, 2, second) || s[19] != '.' || !digits_at(s, 20, 6, micros)) {
    return std::nullopt;
  }
  static const int kDays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  bool leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
  if (month < 1 || month > 12 || day < 1 || day > kDays[month - 1] + (month == 2 && leap ? 1 : 0) ||
      hour > 23 || minute > 59 || second > 59) {
    return std::nullopt;
  }
  int offset_seconds = 0;
  if (s.size() == 27 && s[26] == 'Z') {
    offset_seconds = 0;
  } else if (s.size() == 32 && (s[26] == '+' || s[26] == '-') && s[29] == ':') {
    int oh = 0, om = 0;
    if (!digits_at(s, 27, 2, oh) || !digits_at(s, 30, 2, om) || oh > 23 || om > 59) {
      return std::nullopt;
    }
    offset_seconds = (s[26] == '+' ? 1 : -1) * (oh * 3600 + om * 60);
  } else {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  std::time_t t = timegm(&tm) - offset_seconds;
  std::tm utc{};
  gmtime_r(&t, &utc);
  char buf[40];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &utc);
  char frac[16];
  std::snprintf(frac, sizeof frac, ".%06dZ", micros);
  return std::string(buf) + frac;
}

const char* json_type(const json& v) {
  if (v.is_string()) {
    return "string";
  }
  if (v.is_boolean()) {
    return "bool";
  }
  if (v.is_number()) {
    return "number";
  }
  if (v.is_array()) {
    return "array";
  }
  return "object";
}

// kube-apiserver's decoding of a Lease's spec (a 400 when the JSON does not fit the Go types),
// normalizing its MicroTimes. nullopt when it decodes.
std::optional<std::string> decode_lease(json& lease) {
  const std::string prefix = "Lease in version \"v1\" cannot be handled as a Lease: ";
  auto spec = lease.find("spec");
  if (spec == lease.end() || spec->is_null()) {
    return std::nullopt;
  }
  if (!spec->is_object()) {
    return prefix + "json: cannot unmarshal " + json_type(*spec) +
           " into Go struct field Lease.spec of type v1.LeaseSpec";
  }
  for (auto& [field, value] : spec->items()) {
    if (value.is_null()) {
      continue;
    }
    auto wrong = [&](const std::string& go_type) {
      return prefix + "json: cannot unmarshal " + json_type(value) +
             " into Go struct field LeaseSpec.spec." + field + " of type " + go_type;
    };
    if (field == "holderIdentity" || field == "preferredHolder" || field == "strategy") {
      if (!value.is_string()) {
        return wrong("string");
      }
    } else if (field == "leaseDurationSeconds" || field == "leaseTransitions") {
      if (!value.is_number_integer() ||
          (value.is_number_unsigned() && value.get<std::uint64_t>() > INT32_MAX) ||
          (!value.is_number_unsigned() &&
           (value.get<std::int64_t>() > INT32_MAX || value.get<std::int64_t>() < INT32_MIN))) {
        return wrong("int32");
      }
    } else if (field == "acquireTime" || field == "renewTime") {
      if (!value.is_string()) {
        return wrong("string");
      }
      std::optional<std::string> t = normalize_micro_time(value.get<std::string>());
      if (!t) {
        return prefix + "parsing time \"" + value.get<std::string>() +
               "\" as \"2006-01-02T15:04:05.000000Z07:00\": not RFC 3339 with exactly six "
               "fractional digits";
      }
      value = *t;
    }
  }
  return std::nullopt;
}

// kube's validation of a Lease's spec: a 422 or nothing.
std::optional<Reply> validate_lease(const json& lease, const std::string& name) {
  auto spec = lease.find("spec");
  if (spec == lease.end() || !spec->is_object()) {
    return std::nullopt;
  }
  auto d = spec->find("leaseDurationSeconds");
  if (d != spec->end() && d->is_number_integer() && d->get<std::int64_t>() <= 0) {
    return invalid("leases", qualified_kind("leases"), name, "spec.leaseDurationSeconds",
                   "FieldValueInvalid", "Invalid value: " + d->dump() + ": must be greater than 0");
  }
  auto t = spec->find("leaseTransitions");
  if (t != spec->end() && t->is_number_integer() && t->get<std::int64_t>() < 0) {
    return invalid("leases", qualified_kind("leases"), name, "spec.leaseTransitions",
                   "FieldValueInvalid",
                   "Invalid value: " + t->dump() + ": must be greater than or equal to 0");
  }
  return std::nullopt;
}

bool is_dns_subdomain(const std::string& name) {
  if (name.empty() || name.size() > 253) {
    return false;
  }
  std::size_t start = 0;
  while (true) {
    std::size_t dot = name.find('.', start);
    std::string label =
        name.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (label.empty()) {
      return false;
    }
    for (char c : label) {
      if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) {
        return false;
      }
    }
    if (label.front() == '-' || label.back() == '-') {
      return false;
    }
    if (dot == std::string::npos) {
      return true;
    }
    start = dot + 1;
  }
}

std::optional<Reply> validate_name(const std::string& resource, const std::string& name) {
  if (is_dns_subdomain(name)) {
    return std::nullopt;
  }
  return invalid(resource, qualified_kind(resource), name, "metadata.name", "FieldValueInvalid",
                 "Invalid value: " + json(name).dump() +
                     ": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                     "characters, '-' or '.', and must start and end with an alphanumeric "
                     "character (e.g. 'example.com', regex used for validation is "
                     "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
}

// Standard padded base64, as Go's encoding/base64 decodes a Secret's data.
bool base64_ok(const std::string& s) {
  if (s.size() % 4 != 0) {
    return false;
  }
  for (std::size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    bool pad = c == '=' && i + 2 >= s.size() && (i + 1 == s.size() || s[i + 1] == '=');
    if (std::isalnum(c) == 0 && c != '+' && c != '/' && !pad) {
      return false;
    }
  }
  return true;
}

// The body's kind and apiVersion must be the resource's (they default to it when missing);
// metadata must be an object (it defaults to an empty one).
std::optional<Reply> check_type_meta(const std::string& resource, json& object) {
  const ResourceInfo& info = info_of(resource);
  if (!object.is_object()) {
    return bad_request(info.kind + " in version \"" + info.api_version +
                       "\" cannot be handled as a " + info.kind + ": json: cannot unmarshal " +
                       json_type(object) + " into Go value of type " + info.kind);
  }
  auto version = object.find("apiVersion");
  if (version != object.end() && !version->is_null()) {
    if (!version->is_string() || version->get<std::string>() != info.api_version) {
      return bad_request("the API version in the data (" +
                         (version->is_string() ? version->get<std::string>() : version->dump()) +
                         ") does not match the expected API version (" + info.api_version + ")");
    }
  }
  auto kind = object.find("kind");
  if (kind != object.end() && !kind->is_null()) {
    if (!kind->is_string() || kind->get<std::string>() != info.kind) {
      return bad_request("the kind in the data (" +
                         (kind->is_string() ? kind->get<std::string>() : kind->dump()) +
                         ") does not match the expected kind (" + info.kind + ")");
    }
  }
  object["apiVersion"] = info.api_version;
  object["kind"] = info.kind;
  auto md = object.find("metadata");
  if (md == object.end() || md->is_null()) {
    object["metadata"] = json::object();
  } else if (md->is_object() && !info.namespaced) {
    md->erase("namespace");  // a cluster-scoped object has none: kube clears it
  } else if (!md->is_object()) {
    return bad_request(info.kind + " in version \"" + info.api_version +
                       "\" cannot be handled as a " + info.kind + ": json: cannot unmarshal " +
                       json_type(*md) + " into Go struct field " + info.kind +
                       ".metadata of type v1.ObjectMeta");
  }
  for (const char* field : {"name", "generateName", "namespace", "uid", "resourceVersion"}) {
    auto it = object["metadata"].find(field);
    if (it != object["metadata"].end() && !it->is_null() && !it->is_string()) {
      return bad_request(info.kind + " in version \"" + info.api_version +
                         "\" cannot be handled as a " + info.kind + ": json: cannot unmarshal " +
                         json_type(*it) + " into Go struct field ObjectMeta.metadata." + field +
                         " of type string");
    }
  }
  if (resource == "leases") {
    if (std::optional<std::string> error = decode_lease(object)) {
      return bad_request(*error);
    }
  }
  return std::nullopt;
}

// A Secret as its validation checks it: every data value base64 (the decoder's 400), the type
// immutable, and a kubernetes.io/tls Secret holding tls.crt and tls.key.
std::optional<Reply> validate_secret(const json& object, const std::string& name,
                                     const json* stored) {
  if (auto data = object.find("data"); data != object.end() && data->is_object()) {
    for (const auto& [key, value] : data->items()) {
      if (!value.is_string() || !base64_ok(value.get<std::string>())) {
        return bad_request(
            "Secret in version \"v1\" cannot be handled as a Secret: illegal "
            "base64 data in data." +
            key);
      }
    }
  }
  std::string type = object.value("type", "Opaque");
  if (stored != nullptr && type != stored->value("type", "Opaque")) {
    return invalid("secrets", "Secret", name, "type", "FieldValueInvalid",
                   "Invalid value: " + json(type).dump() + ": field is immutable");
  }
  if (type == "kubernetes.io/tls") {
    for (const char* key : {"tls.crt", "tls.key"}) {
      const json* data = object.contains("data") ? &object["data"] : nullptr;
      if (data == nullptr || !data->is_object() || !data->contains(key)) {
        return invalid("secrets", "Secret", name, std::string("data[") + key + "]",
                       "FieldValueRequired", "Required value");
      }
    }
  }
  return std::nullopt;
}

const char* const kNamespaceMismatch =
    "the namespace of the provided object does not match the namespace sent on the request";

std::string media_type(const std::string& content_type) {
  std::string t = content_type.substr(0, content_type.find(';'));
  t.erase(0, t.find_first_not_of(" \t"));
  t.erase(t.find_last_not_of(" \t") + 1);
  std::transform(t.begin(), t.end(), t.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return t;
}

// metadata.name and metadata.namespace terms of a fieldSelector; other fields are not filtered.
struct FieldFilter {
  std::string name;
  std::string ns;
};

FieldFilter field_filter(const std::string& selector) {
  FieldFilter f;
  std::size_t start = 0;
  while (start < selector.size()) {
    std::size_t comma = selector.find(',', start);
    std::string term =
        selector.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? selector.size() : comma + 1;
    std::size_t eq = term.find('=');
    if (eq == std::string::npos || (eq > 0 && term[eq - 1] == '!')) {
      continue;
    }
    std::string value = term.substr(eq + 1);
    if (!value.empty() && value[0] == '=') {
      value.erase(0, 1);
    }
    std::string field = term.substr(0, eq);
    if (field == "metadata.name") {
      f.name = value;
    } else if (field == "metadata.namespace") {
      f.ns = value;
    }
  }
  return f;
}

}  // namespace

bool selector_matches(const std::string& selector, const json* labels) {
  std::size_t start = 0;
  while (start <= selector.size()) {
    std::size_t comma = selector.find(',', start);
    std::string term =
        selector.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    start = comma == std::string::npos ? selector.size() + 1 : comma + 1;
    if (term.empty()) {
      continue;
    }
    std::size_t eq = term.find('=');
    std::string key = term.substr(0, eq);
    if (labels == nullptr || !labels->is_object() || !labels->contains(key)) {
      return false;
    }
    if (eq != std::string::npos && labels->at(key) != term.substr(eq + 1)) {
      return false;
    }
  }
  return true;
}

struct FakeApiServer::Watch {
  std::string resource;
  std::string selector;
  std::string ns;    // empty: every namespace
  std::string name;  // from fieldSelector=metadata.name=...; empty: every object
  std::string token;
  std::int64_t rv = 0;
  std::chrono::steady_clock::time_point deadline;
  std::uint64_t drop_generation = 0;
  std::uint64_t bookmark_generation = 0;
  std::uint64_t partition_cuts = 0;
  bool none = false;  // the path's namespace and the field selector's disagree: no object
  bool checked_gone = false;
  bool counted = false;
  FakeApiServer* server = nullptr;
  ~Watch() {
    if (counted) {
      std::lock_guard lock(server->mu_);
      --server->open_watches_;
    }
  }
};

FakeApiServer::FakeApiServer(Options options) : options_(std::move(options)) {
  if (!options_.tls_cert_file.empty()) {
    server_ = std::make_unique<httplib::SSLServer>(
        options_.tls_cert_file.c_str(), options_.tls_key_file.c_str(),
        options_.tls_client_ca_file.empty() ? nullptr : options_.tls_client_ca_file.c_str());
  } else {
    server_ = std::make_unique<httplib::Server>();
  }
  if (!server_->is_valid()) {
    throw std::runtime_error("fake API server: cannot load the TLS certificate");
  }
  server_->new_task_queue = [] { return new httplib::ThreadPool(48); };
  server_->set_tcp_nodelay(true);  // as Go's net/http (kube-apiserver) does
  if (options_.extra_routes) {
    options_.extra_routes(*server_, *this);
  }
  auto read = [this](int ns_group, int resource_group, int name_group) {
    return [this, ns_group, resource_group, name_group](const httplib::Request& req,
                                                        httplib::Response& res) {
      auto group = [&](int i) {
        return i < 0 ? std::string() : std::string(req.matches[static_cast<std::size_t>(i)]);
      };
      handle_read(group(resource_group), group(ns_group), group(name_group), req, res);
    };
  };
  auto write = [this](const httplib::Request& req, httplib::Response& res) {
    handle_write(req.matches[2], req.matches[1],
                 req.matches.size() > 3 ? std::string(req.matches[3]) : std::string(), req, res);
  };
  const std::string core = R"(/api/v1/namespaces/([^/]+)/(pods|services|secrets))";
  const std::string leases = R"(/apis/coordination\.k8s\.io/v1/namespaces/([^/]+)/(leases))";
  server_->Get(R"(/api/v1/(pods|nodes|services|secrets))", read(-1, 1, -1));
  // Cluster-scoped and written: the admission webhook configurations.
  const std::string webhooks =
      R"(/apis/admissionregistration\.k8s\.io/v1/(mutatingwebhookconfigurations|validatingwebhookconfigurations))";
  auto cluster_write = [this](const httplib::Request& req, httplib::Response& res) {
    handle_write(req.matches[1], "",
                 req.matches.size() > 2 ? std::string(req.matches[2]) : std::string(), req, res);
  };
  server_->Get(webhooks, read(-1, 1, -1));
  server_->Get(webhooks + "/([^/]+)", read(-1, 1, 2));
  server_->Post(webhooks, cluster_write);
  server_->Put(webhooks + "/([^/]+)", cluster_write);
  server_->Patch(webhooks + "/([^/]+)", cluster_write);
  server_->Delete(webhooks + "/([^/]+)", cluster_write);
  server_->Get(R"(/apis/coordination\.k8s\.io/v1/(leases))", read(-1, 1, -1));
  const std::string ray = R"(/apis/ray\.io/v1/namespaces/([^/]+)/(rayclusters))";
  const std::string slices = R"(/apis/discovery\.k8s\.io/v1/namespaces/([^/]+)/(endpointslices))";
  server_->Get(R"(/apis/ray\.io/v1/(rayclusters))", read(-1, 1, -1));
  server_->Get(R"(/apis/discovery\.k8s\.io/v1/(endpointslices))", read(-1, 1, -1));
  for (const std::string& collection : {ray, slices}) {
    server_->Get(collection, read(1, 2, -1));
    server_->Get(collection + "/([^/]+)", read(1, 2, 3));
  }
  for (const std::string& collection : {core, leases}) {
    const std::string item = collection + "/([^/]+)";
    server_->Get(collection, read(1, 2, -1));
    server_->Get(item, read(1, 2, 3));
    server_->Post(collection, write);
    server_->Put(item, write);
    server_->Patch(item, write);
    server_->Delete(item, write);
  }
  if (options_.port != 0) {
    if (!server_->bind_to_port("127.0.0.1", options_.port)) {
      throw std::runtime_error("fake API server: cannot bind 127.0.0.1:" +
                               std::to_string(options_.port));
    }
    port_ = options_.port;
  } else {
    port_ = server_->bind_to_any_port("127.0.0.1");
  }
  if (port_ <= 0) {
    throw std::runtime_error("fake API server: cannot bind 127.0.0.1");
  }
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  while (!server_->is_running()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

FakeApiServer::~FakeApiServer() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  server_->stop();
  thread_.join();
}

void FakeApiServer::set_record_events(bool record) {
  std::lock_guard lock(mu_);
  options_.record_events = record;
}

void FakeApiServer::record(const std::string& resource, const std::string& type,
                           const json& object) {
  if (options_.record_events) {
    events_.push_back({rv_, resource, type, object});
  }
  cv_.notify_all();
}

json FakeApiServer::create(const std::string& resource, json object) {
  std::lock_guard lock(mu_);
  json& md = object["metadata"];
  if (info_of(resource).namespaced &&
      (!md.contains("namespace") || md["namespace"].get<std::string>().empty())) {
    md["namespace"] = "default";
  }
  if (!md.contains("name") || md["name"].get<std::string>().empty()) {
    std::string base = md.value("generateName", resource + "-");
    md["name"] = base + std::to_string(10000 + next_uid_);
  }
  md["uid"] = "uid-" + std::to_string(next_uid_++);
  md["resourceVersion"] = std::to_string(++rv_);
  object["kind"] = kind_of(resource);
  object["apiVersion"] = info_of(resource).api_version;
  objects_[resource][key_of(object)] = object;
  record(resource, "ADDED", object);
  return object;
}

bool FakeApiServer::update(const std::string& resource, json object) {
  std::lock_guard lock(mu_);
  auto& objects = objects_[resource];
  auto it = objects.find(key_of(object));
  if (it == objects.end()) {
    return false;
  }
  object["metadata"]["uid"] = it->second["metadata"]["uid"];
  if (const auto created = it->second["metadata"].find("creationTimestamp");
      created != it->second["metadata"].end()) {
    object["metadata"]["creationTimestamp"] = *created;
  }
  object["metadata"]["resourceVersion"] = std::to_string(++rv_);
  it->second = object;
  record(resource, "MODIFIED", object);
  return true;
}

bool FakeApiServer::remove(const std::string& resource, const std::string& ns,
                           const std::string& name) {
  std::lock_guard lock(mu_);
  auto& objects = objects_[resource];
  auto it = objects.find(key_of(ns, name));
  if (it == objects.end()) {
    return false;
  }
  json object = std::move(it->second);
  objects.erase(it);
  object["metadata"]["resourceVersion"] = std::to_string(++rv_);
  record(resource, "DELETED", object);
  return true;
}

std::vector<json> FakeApiServer::objects(const std::string& resource) const {
  std::lock_guard lock(mu_);
  std::vector<json> out;
  if (auto it = objects_.find(resource); it != objects_.end()) {
    for (const auto& [k, v] : it->second) {
      out.push_back(v);
    }
  }
  return out;
}

std::optional<json> FakeApiServer::get(const std::string& resource, const std::string& ns,
                                       const std::string& name) const {
  std::lock_guard lock(mu_);
  auto r = objects_.find(resource);
  if (r == objects_.end()) {
    return std::nullopt;
  }
  auto it = r->second.find(key_of(ns, name));
  if (it == r->second.end()) {
    return std::nullopt;
  }
  return it->second;
}

std::int64_t FakeApiServer::resource_version() const {
  std::lock_guard lock(mu_);
  return rv_;
}

void FakeApiServer::drop_watches() {
  std::lock_guard lock(mu_);
  ++drop_generation_;
  cv_.notify_all();
}

void FakeApiServer::compact() {
  std::lock_guard lock(mu_);
  compacted_ = rv_;
  events_.clear();
  cv_.notify_all();
}

void FakeApiServer::send_bookmarks() {
  std::lock_guard lock(mu_);
  ++bookmark_generation_;
  cv_.notify_all();
}

void FakeApiServer::forbid(const std::string& resource, const std::string& user) {
  std::lock_guard lock(mu_);
  forbidden_[resource] = user;
}

void FakeApiServer::forbid_writes(const std::string& resource, const std::string& user) {
  std::lock_guard lock(mu_);
  forbidden_writes_[resource] = user;
}

void FakeApiServer::fail_next(const std::string& resource, int status, int count) {
  std::lock_guard lock(mu_);
  for (int i = 0; i < count; ++i) {
    failures_[resource].push_back(status);
  }
}

void FakeApiServer::fail_next_watch(const std::string& resource, int status, int count) {
  fail_next(resource + "#watch", status, count);
}

void FakeApiServer::fail_next_writes(const std::string& resource, int status, int count) {
  std::lock_guard lock(mu_);
  for (int i = 0; i < count; ++i) {
    write_failures_[resource].push_back(status);
  }
}

void FakeApiServer::set_write_delay(std::chrono::milliseconds delay) {
  std::lock_guard lock(mu_);
  write_delay_ = delay;
}

void FakeApiServer::partition(const std::string& token) {
  std::lock_guard lock(mu_);
  partitioned_.insert(token);
  ++partition_cuts_[token];
  cv_.notify_all();
}

void FakeApiServer::heal() {
  std::lock_guard lock(mu_);
  partitioned_.clear();
}

void FakeApiServer::set_tokens(std::set<std::string> tokens) {
  std::lock_guard lock(mu_);
  options_.tokens = std::move(tokens);
}

void FakeApiServer::set_ignore_limit(bool ignore) {
  std::lock_guard lock(mu_);
  options_.ignore_limit = ignore;
}

int FakeApiServer::lists(const std::string& resource) const {
  std::lock_guard lock(mu_);
  auto it = lists_.find(resource);
  return it == lists_.end() ? 0 : it->second;
}

int FakeApiServer::watches(const std::string& resource) const {
  std::lock_guard lock(mu_);
  auto it = watches_.find(resource);
  return it == watches_.end() ? 0 : it->second;
}

int FakeApiServer::open_watches() const {
  std::lock_guard lock(mu_);
  return open_watches_;
}

std::vector<std::string> FakeApiServer::queries() const {
  std::lock_guard lock(mu_);
  return queries_;
}

bool FakeApiServer::authenticated_locked(const httplib::Request& req, const std::string& token) {
  if (!options_.tls_client_ca_file.empty() && req.ssl != nullptr) {
    // The handshake verified the certificate against the client CA: its CN is the user.
    X509* peer = SSL_get_peer_certificate(req.ssl);
    if (peer != nullptr) {
      char cn[256] = {0};
      X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, cn, sizeof cn);
      X509_free(peer);
      client_subjects_seen_.insert(cn);
      return true;
    }
  }
  return options_.tokens.empty() || options_.tokens.contains(token);
}

std::set<std::string> FakeApiServer::client_subjects_seen() const {
  std::lock_guard lock(mu_);
  return client_subjects_seen_;
}

std::set<std::string> FakeApiServer::tokens_seen() const {
  std::lock_guard lock(mu_);
  return tokens_seen_;
}

FakeApiServer::WriteStats FakeApiServer::write_stats(const std::string& resource) const {
  std::lock_guard lock(mu_);
  auto it = write_stats_.find(resource);
  return it == write_stats_.end() ? WriteStats{} : it->second;
}

std::map<std::string, FakeApiServer::WriteStats> FakeApiServer::write_stats() const {
  std::lock_guard lock(mu_);
  return write_stats_;
}

// ---- Reads ----------------------------------------------------------------------------------

void FakeApiServer::handle_read(const std::string& resource, const std::string& ns,
                                const std::string& name, const httplib::Request& req,
                                httplib::Response& res) {
  std::string token = bearer_of(req);
  bool watch = req.get_param_value("watch") == "1" || req.get_param_value("watch") == "true";
  {
    std::lock_guard lock(mu_);
    std::string q;
    for (const auto& [k, v] : req.params) {
      q += (q.empty() ? "?" : "&") + k + "=" + v;
    }
    queries_.push_back(req.path + q);
    if (!token.empty()) {
      tokens_seen_.insert(token);
    }
    if (partitioned_.contains(token)) {
      answer_status(res, 503, "ServiceUnavailable",
                    "the server is currently unable to handle the request");
      return;
    }
    if (!authenticated_locked(req, token)) {
      answer_status(res, 401, "Unauthorized", "Unauthorized");
      return;
    }
    if (auto denied = forbidden_.find(resource); denied != forbidden_.end()) {
      Reply r = rbac_denied(resource, denied->second,
                            watch          ? "watch"
                            : name.empty() ? "list"
                                           : "get",
                            ns, name);
      res.status = r.status;
      res.set_content(r.body.dump(), "application/json");
      return;
    }
    if (!name.empty()) {
      auto& objects = objects_[resource];
      auto it = objects.find(key_of(ns, name));
      Reply r = it == objects.end() ? not_found(resource, name) : Reply{200, it->second};
      res.status = r.status;
      res.set_content(r.body.dump(), "application/json");
      return;
    }
    auto& watch_f = failures_[resource + (watch ? "#watch" : "#list")];
    auto& f = watch_f.empty() ? failures_[resource] : watch_f;
    if (!f.empty()) {
      int code = f.front();
      f.pop_front();
      answer_status(res, code, code == 410 ? "Expired" : "InternalError",
                    "injected failure " + std::to_string(code));
      return;
    }
    ++(watch ? watches_ : lists_)[resource];
  }
  if (watch) {
    serve_watch(resource, ns, token, req, res);
  } else {
    serve_list(resource, ns, req, res);
  }
}

void FakeApiServer::serve_list(const std::string& resource, const std::string& path_ns,
                               const httplib::Request& req, httplib::Response& res) {
  std::string selector = req.get_param_value("labelSelector");
  FieldFilter fields = field_filter(req.get_param_value("fieldSelector"));
  std::string ns = path_ns;
  bool none = false;  // the path's namespace and the field selector's disagree
  if (!fields.ns.empty()) {
    none = !ns.empty() && ns != fields.ns;
    ns = fields.ns;
  }
  std::string cont = req.get_param_value("continue");
  std::size_t limit = 0;
  if (req.has_param("limit")) {
    limit = static_cast<std::size_t>(std::stoul(req.get_param_value("limit")));
  }
  auto page = std::make_shared<std::vector<std::string>>();  // serialized items
  std::string rv;
  std::string next;
  {
    std::lock_guard lock(mu_);
    std::string after;
    std::int64_t list_rv = rv_;
    if (!cont.empty()) {
      std::size_t bar = cont.find('|');
      list_rv = std::stoll(cont.substr(0, bar));
      after = cont.substr(bar + 1);
      if (list_rv < compacted_) {
        answer_status(res, 410, "Expired",
                      "The provided continue parameter is too old to display a consistent list "
                      "result. You can start a new list without the continue parameter.");
        return;
      }
    }
    rv = std::to_string(list_rv);
    std::string last;
    if (options_.ignore_limit) {
      limit = 0;
    }
    const auto& objects = objects_[resource];
    // Keys are namespace/name, so one namespace's objects are one run of the map.
    const std::string prefix = ns.empty() ? "" : ns + "/";
    auto it = !after.empty()   ? objects.upper_bound(after)
              : prefix.empty() ? objects.begin()
                               : objects.lower_bound(prefix);
    for (; !none && it != objects.end(); ++it) {
      if (!prefix.empty() && it->first.compare(0, prefix.size(), prefix) != 0) {
        break;
      }
      if (!selector_matches(selector, labels_of(it->second)) ||
          (!fields.name.empty() && meta_string(it->second, "name") != fields.name)) {
        continue;
      }
      if (limit != 0 && page->size() == limit) {
        next = rv + "|" + last;
        break;
      }
      page->push_back(it->second.dump());
      last = it->first;
    }
  }
  json metadata = {{"resourceVersion", rv}};
  if (!next.empty()) {
    metadata["continue"] = next;
  }
  auto head = std::make_shared<std::string>(
      R"({"kind":")" + kind_of(resource) + R"(List","apiVersion":")" +
      info_of(resource).api_version + R"(","metadata":)" + metadata.dump() + R"(,"items":[)");
  res.set_chunked_content_provider(
      "application/json",
      [head, page, i = std::size_t{0}](std::size_t, httplib::DataSink& sink) mutable {
        if (i == 0 && !head->empty()) {
          sink.write(head->data(), head->size());
          head->clear();
        }
        // A few items per chunk, as a server flushing its buffer would.
        std::string out;
        for (int n = 0; n < 16 && i < page->size(); ++n, ++i) {
          if (i > 0) {
            out += ",";
          }
          out += (*page)[i];
          std::string().swap((*page)[i]);
        }
        if (i == page->size()) {
          out += "]}";
          sink.write(out.data(), out.size());
          sink.done();
          return true;
        }
        sink.write(out.data(), out.size());
        return true;
      });
}

void FakeApiServer::serve_watch(const std::string& resource, const std::string& path_ns,
                                const std::string& token, const httplib::Request& req,
                                httplib::Response& res) {
  auto w = std::make_shared<Watch>();
  w->resource = resource;
  w->selector = req.get_param_value("labelSelector");
  FieldFilter fields = field_filter(req.get_param_value("fieldSelector"));
  w->ns = path_ns;
  w->name = fields.name;
  if (!fields.ns.empty()) {
    w->none = !w->ns.empty() && w->ns != fields.ns;
    w->ns = fields.ns;
  }
  w->token = token;
  w->rv = req.has_param("resourceVersion") ? std::stoll(req.get_param_value("resourceVersion")) : 0;
  int timeout =
      req.has_param("timeoutSeconds") ? std::stoi(req.get_param_value("timeoutSeconds")) : 1800;
  w->deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
  w->server = this;
  {
    std::lock_guard lock(mu_);
    if (options_.gone_as_status && w->rv < compacted_) {
      answer_status(res, 410, "Expired",
                    "too old resource version: " + std::to_string(w->rv) + " (" +
                        std::to_string(compacted_) + ")");
      return;
    }
    w->drop_generation = drop_generation_;
    w->bookmark_generation = bookmark_generation_;
    auto cuts = partition_cuts_.find(token);
    w->partition_cuts = cuts == partition_cuts_.end() ? 0 : cuts->second;
    ++open_watches_;
    w->counted = true;
  }
  res.set_chunked_content_provider("application/json", [this, w](std::size_t,
                                                                 httplib::DataSink& sink) {
    std::string out;
    bool end = false;
    {
      std::unique_lock lock(mu_);
      for (int round = 0; round < 2 && out.empty() && !end; ++round) {
        auto cuts = partition_cuts_.find(w->token);
        if (stopping_ || w->drop_generation != drop_generation_ ||
            (cuts != partition_cuts_.end() && cuts->second != w->partition_cuts)) {
          return false;  // cut without the terminating chunk
        }
        if (!w->checked_gone) {
          w->checked_gone = true;
          if (w->rv < compacted_) {
            out = json{{"type", "ERROR"},
                       {"object", status_body(410, "Expired",
                                              "too old resource version: " + std::to_string(w->rv) +
                                                  " (" + std::to_string(compacted_) + ")")}}
                      .dump() +
                  "\n";
            end = true;
            break;
          }
        }
        // events_ is in resourceVersion order: start after the last one this watch saw.
        auto first = std::upper_bound(events_.begin(), events_.end(), w->rv,
                                      [](std::int64_t rv, const Event& e) { return rv < e.rv; });
        for (auto it = first; it != events_.end(); ++it) {
          const Event& e = *it;
          if (e.resource != w->resource) {
            w->rv = e.rv;
            continue;
          }
          w->rv = e.rv;
          if (w->none || (!w->ns.empty() && meta_string(e.object, "namespace") != w->ns) ||
              (!w->name.empty() && meta_string(e.object, "name") != w->name)) {
            continue;
          }
          if (selector_matches(w->selector, labels_of(e.object))) {
            out += json{{"type", e.type}, {"object", e.object}}.dump() + "\n";
          }
        }
        if (w->bookmark_generation != bookmark_generation_) {
          w->bookmark_generation = bookmark_generation_;
          w->rv = std::max(w->rv, rv_);
          out += json{{"type", "BOOKMARK"},
                      {"object",
                       {{"kind", kind_of(w->resource)},
                        {"apiVersion", info_of(w->resource).api_version},
                        {"metadata", {{"resourceVersion", std::to_string(w->rv)}}}}}}
                     .dump() +
                 "\n";
        }
        if (std::chrono::steady_clock::now() >= w->deadline) {
          end = true;
        }
        if (out.empty() && !end && round == 0) {
          cv_.wait_for(lock, std::chrono::milliseconds(50));
        }
      }
    }
    if (!out.empty() && !sink.write(out.data(), out.size())) {
      return false;
    }
    if (end) {
      sink.done();
    }
    return true;
  });
}

// ---- Writes ---------------------------------------------------------------------------------

void FakeApiServer::handle_write(const std::string& resource, const std::string& ns,
                                 const std::string& name, const httplib::Request& req,
                                 httplib::Response& res) {
  std::string token = bearer_of(req);
  Reply reply{0, nullptr};
  {
    std::unique_lock lock(mu_);
    if (!token.empty()) {
      tokens_seen_.insert(token);
    }
    WriteStats& stats = write_stats_[resource];
    ++stats.attempts;
    if (partitioned_.contains(token)) {
      reply = failure(503, "ServiceUnavailable",
                      "the server is currently unable to handle the request");
    } else if (!authenticated_locked(req, token)) {
      reply = failure(401, "Unauthorized", "Unauthorized");
    } else if (auto denied = forbidden_writes_.find(resource); denied != forbidden_writes_.end()) {
      std::string verb = req.method == "POST"    ? "create"
                         : req.method == "PUT"   ? "update"
                         : req.method == "PATCH" ? "patch"
                                                 : "delete";
      reply = rbac_denied(resource, denied->second, verb, ns, name);
    } else {
      // A slow etcd: the write waits, then is processed as one step.
      auto until = std::chrono::steady_clock::now() + write_delay_;
      cv_.wait_until(lock, until, [this] { return stopping_; });
      auto& failures = write_failures_[resource];
      if (stopping_) {
        reply = failure(503, "ServiceUnavailable", "the server is shutting down");
      } else if (!failures.empty()) {
        int code = failures.front();
        failures.pop_front();
        std::string target = name;
        if (target.empty()) {
          json body = json::parse(req.body, nullptr, false);
          target = body.is_object() ? meta_string(body, "name") : "";
        }
        reply = injected(resource, target, code);
      } else if (req.method == "POST") {
        reply = create_locked(resource, ns, req.body);
      } else if (req.method == "PUT") {
        reply = replace_locked(resource, ns, name, req.body);
      } else if (req.method == "PATCH") {
        reply = patch_locked(resource, ns, name, req.get_header_value("Content-Type"), req.body);
      } else {
        reply = delete_locked(resource, ns, name, req.body);
      }
      if (reply.status >= 200 && reply.status < 300) {
        ++stats.writes;
        if (req.method == "POST" || reply.status == 201) {
          ++stats.creates;
        } else if (req.method == "DELETE") {
          ++stats.deletes;
        } else {
          ++stats.updates;
        }
      }
    }
    if (reply.status == 409) {
      ++(reply.body.value("reason", "") == "AlreadyExists" ? stats.already_exists
                                                           : stats.conflicts);
    }
  }
  res.status = reply.status;
  if (reply.status == 429) {
    res.set_header("Retry-After", "1");
  }
  res.set_content(reply.body.dump(), "application/json");
}

std::string FakeApiServer::random_suffix_locked() {
  // The alphabet of kube's name generator: no vowels, no look-alike digits.
  static const char kAlphabet[] = "bcdfghjklmnpqrstvwxz2456789";
  std::uniform_int_distribution<std::size_t> pick(0, sizeof kAlphabet - 2);
  std::string s;
  for (int i = 0; i < 5; ++i) {
    s += kAlphabet[pick(random_)];
  }
  return s;
}

std::string FakeApiServer::random_uid_locked() {
  // A version 4 UUID.
  std::uint64_t hi = random_();
  std::uint64_t lo = random_();
  hi = (hi & ~std::uint64_t{0xf000}) | 0x4000;
  lo = (lo & ~(std::uint64_t{0xc} << 60)) | (std::uint64_t{0x8} << 60);
  char buf[40];
  std::snprintf(buf, sizeof buf, "%08llx-%04llx-%04llx-%04llx-%012llx",
                static_cast<unsigned long long>(hi >> 32),
                static_cast<unsigned long long>((hi >> 16) & 0xffff),
                static_cast<unsigned long long>(hi & 0xffff),
                static_cast<unsigned long long>(lo >> 48),
                static_cast<unsigned long long>(lo & 0xffffffffffffULL));
  return buf;
}

FakeApiServer::Reply FakeApiServer::store_new_locked(const std::string& resource,
                                                     const std::string& ns, json object) {
  json& md = object["metadata"];
  if (info_of(resource).namespaced) {
    md["namespace"] = ns;
  }
  md["uid"] = random_uid_locked();
  md["resourceVersion"] = std::to_string(++rv_);
  md["creationTimestamp"] = rfc3339_now();
  md.erase("deletionTimestamp");
  md.erase("deletionGracePeriodSeconds");
  objects_[resource][key_of(object)] = object;
  record(resource, "ADDED", object);
  return {201, std::move(object)};
}

FakeApiServer::Reply FakeApiServer::create_locked(const std::string& resource,
                                                  const std::string& ns, const std::string& body) {
  json object = json::parse(body, nullptr, false);
  if (object.is_discarded()) {
    return bad_request("couldn't get version/kind; json parse error: the body is not valid JSON");
  }
  if (std::optional<Reply> r = check_type_meta(resource, object)) {
    return *r;
  }
  json& md = object["metadata"];
  std::string object_ns = meta_string(object, "namespace");
  if (!object_ns.empty() && object_ns != ns) {
    return bad_request(kNamespaceMismatch);
  }
  if (!meta_string(object, "resourceVersion").empty()) {
    return bad_request("resourceVersion should not be set on objects to be created");
  }
  std::string name = meta_string(object, "name");
  if (name.empty()) {
    std::string base = meta_string(object, "generateName");
    if (base.empty()) {
      return invalid(resource, qualified_kind(resource), "", "metadata.name", "FieldValueRequired",
                     "Required value: name or generateName is required");
    }
    name = base.substr(0, 58) + random_suffix_locked();  // 63 characters at most
    md["name"] = name;
  }
  if (std::optional<Reply> r = validate_name(resource, name)) {
    return *r;
  }
  if (resource == "leases") {
    if (std::optional<Reply> r = validate_lease(object, name)) {
      return *r;
    }
  }
  if (resource == "secrets") {
    if (std::optional<Reply> r = validate_secret(object, name, nullptr)) {
      return *r;
    }
  }
  if (objects_[resource].contains(key_of(ns, name))) {
    return already_exists(resource, name);
  }
  return store_new_locked(resource, ns, std::move(object));
}

// The checks an update (PUT or the result of a PATCH) passes before it is stored: a
// resourceVersion where the resource requires one, equal to the stored one; a valid Lease.
FakeApiServer::Reply FakeApiServer::checked_update_locked(const std::string& resource,
                                                          bool unconditional, json& stored,
                                                          const std::string& name, json object) {
  std::string rv = meta_string(object, "resourceVersion");
  if (rv.empty() && !unconditional) {
    return invalid(resource, qualified(resource), name, "metadata.resourceVersion",
                   "FieldValueInvalid", "Invalid value: 0x0: must be specified for an update");
  }
  if (!rv.empty() && rv != meta_string(stored, "resourceVersion")) {
    return conflict(resource, name, kOptimisticLock);
  }
  if (resource == "leases") {
    if (std::optional<Reply> r = validate_lease(object, name)) {
      return *r;
    }
  }
  if (resource == "secrets") {
    if (std::optional<Reply> r = validate_secret(object, name, &stored)) {
      return *r;
    }
  }
  return commit_update_locked(resource, stored, std::move(object));
}

FakeApiServer::Reply FakeApiServer::commit_update_locked(const std::string& resource, json& stored,
                                                         json object) {
  json& md = object["metadata"];
  const json& old = stored["metadata"];
  md["uid"] = old["uid"];
  if (old.contains("creationTimestamp")) {
    md["creationTimestamp"] = old["creationTimestamp"];  // kube ignores changes to it
  } else {
    md.erase("creationTimestamp");
  }
  md["resourceVersion"] = old["resourceVersion"];
  if (object == stored) {
    return {200, stored};  // nothing changed: no new resourceVersion, no event
  }
  md["resourceVersion"] = std::to_string(++rv_);
  stored = object;
  record(resource, "MODIFIED", object);
  return {200, std::move(object)};
}

FakeApiServer::Reply FakeApiServer::replace_locked(const std::string& resource,
                                                   const std::string& ns, const std::string& name,
                                                   const std::string& body) {
  const ResourceInfo& info = info_of(resource);
  json object = json::parse(body, nullptr, false);
  if (object.is_discarded()) {
    return bad_request("couldn't get version/kind; json parse error: the body is not valid JSON");
  }
  if (std::optional<Reply> r = check_type_meta(resource, object)) {
    return *r;
  }
  std::string object_name = meta_string(object, "name");
  if (object_name != name) {
    return bad_request("the name of the object (" + object_name +
                       ") does not match the name on the URL (" + name + ")");
  }
  std::string object_ns = meta_string(object, "namespace");
  if (!object_ns.empty() && object_ns != ns) {
    return bad_request(kNamespaceMismatch);
  }
  if (info.namespaced) {
    object["metadata"]["namespace"] = ns;
  }
  std::string uid = meta_string(object, "uid");
  auto& objects = objects_[resource];
  auto it = objects.find(key_of(ns, name));
  if (it == objects.end()) {
    if (!info.create_on_update) {
      return not_found(resource, name);
    }
    if (!uid.empty()) {
      return conflict(
          resource, name,
          "Precondition failed: UID in precondition: " + uid + ", UID in object meta: ");
    }
    if (std::optional<Reply> r = validate_name(resource, name)) {
      return *r;
    }
    if (resource == "leases") {
      if (std::optional<Reply> r = validate_lease(object, name)) {
        return *r;
      }
    }
    object["metadata"].erase("resourceVersion");
    return store_new_locked(resource, ns, std::move(object));
  }
  std::string stored_uid = meta_string(it->second, "uid");
  if (!uid.empty() && uid != stored_uid) {
    return conflict(
        resource, name,
        "Precondition failed: UID in precondition: " + uid + ", UID in object meta: " + stored_uid);
  }
  return checked_update_locked(resource, info.unconditional_update, it->second, name,
                               std::move(object));
}

FakeApiServer::Reply FakeApiServer::patch_locked(const std::string& resource, const std::string& ns,
                                                 const std::string& name,
                                                 const std::string& content_type,
                                                 const std::string& body) {
  const ResourceInfo& info = info_of(resource);
  std::string type = media_type(content_type);
  bool merge = type == "application/merge-patch+json";
  if (!merge && type != "application/json-patch+json") {
    return failure(415, "UnsupportedMediaType",
                   "the body of the request was in an unknown format - accepted media types "
                   "include: application/json-patch+json, application/merge-patch+json");
  }
  json patch = json::parse(body, nullptr, false);
  if (patch.is_discarded()) {
    return bad_request("error decoding patch: the body is not valid JSON");
  }
  if (!merge && !patch.is_array()) {
    return bad_request("json: cannot unmarshal " + std::string(json_type(patch)) +
                       " into Go value of type jsonpatch.Patch");
  }
  auto& objects = objects_[resource];
  auto it = objects.find(key_of(ns, name));
  if (it == objects.end()) {
    return not_found(resource, name);
  }
  json object = it->second;
  if (merge) {
    object.merge_patch(patch);
  } else {
    try {
      object = object.patch(patch);
    } catch (const nlohmann::json::exception& e) {
      return failure(422, "Invalid", e.what());
    }
  }
  if (std::optional<Reply> r = check_type_meta(resource, object)) {
    return *r;
  }
  std::string object_name = meta_string(object, "name");
  if (object_name != name) {
    return bad_request("the name of the object (" + object_name +
                       ") does not match the name on the URL (" + name + ")");
  }
  if (meta_string(object, "namespace") != ns) {
    return bad_request(kNamespaceMismatch);
  }
  std::string uid = meta_string(object, "uid");
  std::string stored_uid = meta_string(it->second, "uid");
  if (!uid.empty() && uid != stored_uid) {
    return invalid(resource, qualified_kind(resource), name, "metadata.uid", "FieldValueInvalid",
                   "Invalid value: " + json(uid).dump() + ": field is immutable");
  }
  return checked_update_locked(resource, info.unconditional_update, it->second, name,
                               std::move(object));
}

FakeApiServer::Reply FakeApiServer::delete_locked(const std::string& resource,
                                                  const std::string& ns, const std::string& name,
                                                  const std::string& body) {
  json options = json::object();
  if (body.find_first_not_of(" \t\r\n") != std::string::npos) {
    options = json::parse(body, nullptr, false);
    if (options.is_discarded() || !options.is_object()) {
      return bad_request("the body of the request is not a DeleteOptions object");
    }
  }
  auto& objects = objects_[resource];
  auto it = objects.find(key_of(ns, name));
  if (it == objects.end()) {
    return not_found(resource, name);
  }
  std::string stored_uid = meta_string(it->second, "uid");
  std::string stored_rv = meta_string(it->second, "resourceVersion");
  if (auto pre = options.find("preconditions"); pre != options.end() && pre->is_object()) {
    auto uid = pre->find("uid");
    if (uid != pre->end() && uid->is_string() && uid->get<std::string>() != stored_uid) {
      return conflict(resource, name,
                      "Precondition failed: UID in precondition: " + uid->get<std::string>() +
                          ", UID in object meta: " + stored_uid);
    }
    auto rv = pre->find("resourceVersion");
    if (rv != pre->end() && rv->is_string() && rv->get<std::string>() != stored_rv) {
      return conflict(
          resource, name,
          "Precondition failed: ResourceVersion in precondition: " + rv->get<std::string>() +
              ", ResourceVersion in object meta: " + stored_rv);
    }
  }
  json object = std::move(it->second);
  objects.erase(it);
  json last = object;
  // The DELETED event carries the deletion's resourceVersion, the answer the object as it was.
  last["metadata"]["resourceVersion"] = std::to_string(++rv_);
  record(resource, "DELETED", last);
  if (info_of(resource).return_deleted_object) {
    return {200, std::move(object)};
  }
  json details = details_of(resource, name);
  details["uid"] = stored_uid;
  return {200, json{{"kind", "Status"},
                    {"apiVersion", "v1"},
                    {"metadata", json::object()},
                    {"status", "Success"},
                    {"details", std::move(details)}}};
}

}  // namespace testing
