// decode_for_mutation: the review read with simdjson, and only the Pod fields the Handler reads
// built as json (docs/architecture.md "Why the Pod stays raw JSON"); and patch_ops, a patch read
// back with simdjson for the dry run and kubectl tpu-slice.
#include <simdjson.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string_view>

#include "admission/review.h"
#include "base/json/access.h"
#include "base/memory/heap_limit.h"
#include "podpatch/env.h"
#include "podpatch/keys.h"

namespace admission {
namespace {

namespace dom = simdjson::dom;

// Why the fast path gave up; the full decode then answers, with its own messages.
struct Unusual {};

json to_json(dom::element e);

// The array of `each` of the list's elements, in order, its storage taken once.
template <class Each>
json array_of(dom::array list, Each each) {
  json out = json::array();
  out.get_ref<json::array_t&>().reserve(list.size());
  for (dom::element v : list) {
    out.push_back(each(v));
  }
  return out;
}

// The value as nlohmann's parser builds it from the same text: non-negative integers unsigned,
// negative ones signed, the rest double. A -0.0 could be "-0" (an integer to nlohmann) or
// "-0.0", so it is left to the full decode.
json to_json(dom::element e) {
  switch (e.type()) {
    case dom::element_type::OBJECT: {
      json out = json::object();
      for (dom::key_value_pair field : dom::object(e)) {
        out[std::string(field.key)] = to_json(field.value);  // a repeated key: the last wins
      }
      return out;
    }
    case dom::element_type::ARRAY:
      return array_of(dom::array(e), to_json);
    case dom::element_type::STRING:
      return std::string(std::string_view(e));
    case dom::element_type::INT64: {
      std::int64_t v = e.get_int64().value_unsafe();
      return v < 0 ? json(v) : json(static_cast<std::uint64_t>(v));
    }
    case dom::element_type::UINT64:
      return e.get_uint64().value_unsafe();
    case dom::element_type::DOUBLE: {
      double v = e.get_double().value_unsafe();
      if (v == 0 && std::signbit(v)) {
        throw Unusual{};
      }
      return v;
    }
    case dom::element_type::BOOL:
      return e.get_bool().value_unsafe();
    case dom::element_type::NULL_VALUE:
      return nullptr;
  }
  throw Unusual{};
}

// A field's value as nlohmann's parser builds it.
json whole(std::string_view /*key*/, dom::element value) { return to_json(value); }

// The fields of an object that `keep` names, each as `build` makes it of its key and value
// (whole by default), the others dropped; a value that is not an object is kept whole (PodView
// names its type in the denial). The last of repeated keys counts, as in nlohmann's parse.
template <class Keep, class Build = decltype(&whole)>
json kept_fields(dom::element e, Keep keep, Build build = &whole) {
  if (!e.is_object()) {
    return to_json(e);
  }
  json out = json::object();
  for (dom::key_value_pair field : dom::object(e)) {
    if (keep(field.key)) {
      out[std::string(field.key)] = build(field.key, field.value);
    }
  }
  return out;
}

// Labels or annotations: of an object of strings, the `keys` the mutation reads (PodView takes
// no other key); a value that is not an object is kept whole, and an object holding a value
// that is not a string is decode()'s (PodView names what is wrong).
template <std::size_t N>
json read_strings(dom::element e, const std::array<std::string_view, N>& keys) {
  if (!e.is_object()) {
    return to_json(e);
  }
  json out = json::object();
  for (dom::key_value_pair field : dom::object(e)) {
    if (!field.value.is_string()) {
      throw Unusual{};
    }
    if (podpatch::keys::listed(keys, field.key)) {
      out[std::string(field.key)] = std::string(std::string_view(field.value));
    }
  }
  return out;
}

bool one_of(std::string_view key, std::initializer_list<std::string_view> keys) {
  for (std::string_view k : keys) {
    if (key == k) {
      return true;
    }
  }
  return false;
}

// An env entry of a variable the webhook reads or writes (keys::webhook_env), with a valueFrom
// only as `true` (the Handler reads whether it is there, never what it says). Any other entry
// is podpatch::elided_env_entry(), which holds its place in the list, all the Handler needs of
// it, unless it is malformed: then it is whole, for PodView to name what is wrong. The last of
// repeated keys counts, as in nlohmann's parse.
json env_entry(dom::element e) {
  if (!e.is_object()) {
    return to_json(e);
  }
  std::string_view name;
  bool named = false;
  bool plain_value = true;  // absent, null or a string
  for (dom::key_value_pair f : dom::object(e)) {
    if (f.key == "name") {
      named = f.value.is_string();
      name = named ? std::string_view(f.value) : std::string_view();
    } else if (f.key == "value") {
      plain_value = f.value.is_string() || f.value.is_null();
    }
  }
  if (named && plain_value && !podpatch::keys::webhook_env(name)) {
    return podpatch::elided_env_entry();
  }
  json entry = json::object();
  for (dom::key_value_pair f : dom::object(e)) {
    entry[std::string(f.key)] =
        f.key == "valueFrom" && !f.value.is_null() ? json(true) : to_json(f.value);
  }
  return entry;
}

// A container's name, resources (only google.com/tpu of requests and limits) and env (see
// env_entry).
json container_fields(dom::element c) {
  if (!c.is_object()) {
    return to_json(c);
  }
  json out = json::object();
  for (dom::key_value_pair field : dom::object(c)) {
    if (field.key == "name") {
      out["name"] = to_json(field.value);
    } else if (field.key == "resources") {  // of requests and limits, google.com/tpu only
      out["resources"] = kept_fields(
          field.value, [](std::string_view k) { return k == "requests" || k == "limits"; },
          [](std::string_view, dom::element list) {
            return kept_fields(list, [](std::string_view k) { return k == "google.com/tpu"; });
          });
    } else if (field.key == "env") {
      if (!field.value.is_array()) {
        out["env"] = to_json(field.value);
        continue;
      }
      out["env"] = array_of(dom::array(field.value), env_entry);
    }
  }
  return out;
}

// What PodView, the Handler and the mutation read of a Pod: metadata's names, the labels and
// annotations they read (keys::kPodLabelsRead, kPodAnnotationsRead) and deletionTimestamp;
// spec's nodeSelector, hostname, subdomain, affinity and each container's name, resources and
// env.
json pod_fields(dom::element pod) {
  if (!pod.is_object()) {
    return to_json(pod);
  }
  json out = json::object();
  for (dom::key_value_pair top : dom::object(pod)) {
    if (top.key == "metadata") {
      out["metadata"] = kept_fields(
          top.value,
          [](std::string_view k) {
            return one_of(k, {"name", "generateName", "namespace", "deletionTimestamp", "labels",
                              "annotations"});
          },
          [](std::string_view k, dom::element v) {
            return k == "labels"        ? read_strings(v, podpatch::keys::kPodLabelsRead)
                   : k == "annotations" ? read_strings(v, podpatch::keys::kPodAnnotationsRead)
                                        : to_json(v);
          });
    } else if (top.key == "spec") {
      if (!top.value.is_object()) {
        out["spec"] = to_json(top.value);
        continue;
      }
      json spec = json::object();
      for (dom::key_value_pair field : dom::object(top.value)) {
        if (field.key == "containers" && field.value.is_array()) {
          spec["containers"] = array_of(dom::array(field.value), container_fields);
        } else if (one_of(field.key,
                          {"containers", "nodeSelector", "hostname", "subdomain", "affinity"})) {
          spec[std::string(field.key)] = to_json(field.value);
        }
      }
      out["spec"] = std::move(spec);
    }
  }
  return out;
}

// Whether `obj` has a member named `key`; if so, the last one (nlohmann keeps the last of
// repeated keys) is written to `out`.
bool last_member(dom::element obj, std::string_view key, dom::element& out) {
  bool found = false;
  for (dom::key_value_pair field : dom::object(obj)) {
    if (field.key == key) {
      out = field.value;
      found = true;
    }
  }
  return found;
}

std::optional<std::string_view> string_field(dom::element obj, std::string_view key) {
  dom::element v;
  if (!obj.is_object() || !last_member(obj, key, v) || !v.is_string()) {
    return std::nullopt;
  }
  return std::string_view(v);
}

// One parser per thread, kept between requests, its buffers taken once for the largest body it
// reads; nesting deeper than decode() accepts is left to decode(), which refuses it.
dom::parser& thread_parser() {
  thread_local dom::parser parser = [] {
    dom::parser p(kFastDecodeMaxBytes);
    if (p.allocate(kFastDecodeMaxBytes, kMaxJsonDepth) != simdjson::SUCCESS) {
      throw std::bad_alloc();
    }
    return p;
  }();
  return parser;
}

// The review when it is an ordinary one, else nullopt: decode() then answers.
std::optional<Request> decode_fast(dom::parser& parser, std::string_view body) {
  if (body.empty() || body.size() > kFastDecodeMaxBytes) {
    return std::nullopt;
  }
  dom::element review;
  if (parser.parse(body.data(), body.size(), true).get(review) != simdjson::SUCCESS ||
      !review.is_object()) {
    return std::nullopt;
  }
  dom::element request;
  if (string_field(review, "apiVersion") != std::string_view("admission.k8s.io/v1") ||
      string_field(review, "kind") != std::string_view("AdmissionReview") ||
      !last_member(review, "request", request) || !request.is_object()) {
    return std::nullopt;
  }
  Request r;
  dom::element gvk;
  std::optional<std::string_view> uid = string_field(request, "uid");
  std::optional<std::string_view> operation = string_field(request, "operation");
  if (!uid || uid->empty() || uid->size() > kMaxUidBytes || !operation ||
      !last_member(request, "kind", gvk) || !string_field(gvk, "kind")) {
    return std::nullopt;
  }
  r.uid = *uid;
  r.body_bytes = body.size();
  r.operation = *operation;
  r.kind = string_field(gvk, "kind").value_or("");
  r.group = string_field(gvk, "group").value_or("");
  r.version = string_field(gvk, "version").value_or("");
  r.ns = string_field(request, "namespace").value_or("");
  r.name = string_field(request, "name").value_or("");
  dom::element v;
  r.dry_run = last_member(request, "dryRun", v) && v.is_bool() && bool(v);
  if (last_member(request, "object", v)) {
    r.object = pod_fields(v);
    const json* metadata = webhook::member(r.object, "metadata");
    r.object_name = webhook::string_member(metadata, "name").value_or("");
    r.generate_name = webhook::string_member(metadata, "generateName").value_or("");
  }
  return r;
}

}  // namespace

// The dry run and `kubectl tpu-slice` apply every worker's patch, whose host lists grow with the
// slice (about 220 KB a Pod at 2,304 hosts): read with simdjson, a 2,304-host dry run takes a
// quarter of the time or less it took with nlohmann's parser (docs/dryrun.md "Large clusters").
// What simdjson cannot mirror (a -0.0) is left to nlohmann's parser.
json patch_ops(const Response& response) {
  if (!has_patch(response)) {
    return nullptr;  // no operations
  }
  thread_local dom::parser parser;  // grows to the largest patch the thread read
  try {
    return to_json(parser.parse(response.patch));
  } catch (const Unusual&) {
  } catch (const simdjson::simdjson_error&) {
  }
  return json::parse(response.patch);
}

webhook::Result<Request> decode_for_mutation(std::string_view body) {
  dom::parser& parser = thread_parser();  // its buffers are the thread's, not the request's
  {
    // What the fast path builds is held to decode()'s bound as well; past it, decode() answers.
    webhook::HeapLimit limit(parse_memory_bound(body.size()));
    try {
      if (std::optional<Request> r = decode_fast(parser, body)) {
        return std::move(*r);
      }
    } catch (const Unusual&) {
    } catch (const simdjson::simdjson_error&) {  // a conversion the checks above should rule out
    } catch (const std::bad_alloc&) {
      if (!limit.refused()) {
        throw;
      }
    }
  }
  return decode(body);
}

}  // namespace admission
