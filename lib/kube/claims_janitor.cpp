// The claims janitor: deletes the claim Leases that hold no live claim and rewrites those that
// hold expired ones (docs/legacy-placement.md, "Shared claims").
#include <nlohmann/json.hpp>

#include "kube/claims.h"

namespace kube {

using nlohmann::json;
using podpatch::GroupKey;

bool ClaimStore::sweep() {
  {
    std::lock_guard lock(mu_);
    ++stats_.sweeps;
  }
  Duration timeout = std::max<Duration>(options_.budget, std::chrono::seconds(5));
  std::optional<json> list = list_claim_leases(timeout);
  if (!list) {
    return false;
  }
  WallTime now = clock_.wall_now();
  for (const json& lease : (*list)["items"]) {
    if (sweep_call_.cancelled()) {
      return true;
    }
    sweep_lease(lease, now, timeout);
  }
  forget_idle_groups();
  return true;
}

// The claim Leases of the namespace, as a list object with an `items` array; nullopt (counted,
// and logged unless the answer was not a list) when the API did not give one.
std::optional<json> ClaimStore::list_claim_leases(Duration timeout) {
  std::string list_path = collection_path() + "?labelSelector=" + url_encode(kClaimSelector);
  std::string body;
  std::string error_body;
  webhook::Result<int> status = api_.get(
      list_path,
      [&](std::string_view bytes) {
        body.append(bytes);
        return body.size() < (16u << 20);
      },
      timeout, sweep_call_, &error_body);
  if (!status || *status != 200) {
    count_error();
    say(LogLevel::kWarning,
        "claims janitor: cannot list the claim Leases of namespace " + options_.ns + ": " +
            (status ? "HTTP " + std::to_string(*status) + " " + error_body.substr(0, 200)
                    : status.error().message));
    return std::nullopt;
  }
  json list = json::parse(body, nullptr, false);
  if (!list.is_object() || !list.contains("items") || !list["items"].is_array()) {
    count_error();
    return std::nullopt;
  }
  return list;
}

// One Lease of the list: deleted when it holds no live claim (or none that decodes), rewritten
// without its expired claims, else left alone.
void ClaimStore::sweep_lease(const json& lease, WallTime now, Duration timeout) {
  std::string name =
      lease.is_object() && lease.contains("metadata") && lease["metadata"].is_object()
          ? lease["metadata"].value("name", "")
          : "";
  if (name.empty()) {
    return;
  }
  webhook::Result<LeaseState> state = lease_state(lease);
  std::vector<Claim> live;
  std::string rv;
  std::size_t total = 0;
  if (state) {
    rv = state->version;
    total = state->claims.size();
    for (Claim& c : state->claims) {
      if (c.expires > now) {
        live.push_back(std::move(c));
      }
    }
  } else {
    rv = lease["metadata"].value("resourceVersion", "");
    say(LogLevel::kWarning, "claims janitor: Lease " + options_.ns + "/" + name +
                                " holds no valid claims (" + state.error().message +
                                "): deleting it");
  }
  std::optional<GroupKey> key = lease_group(lease);
  if (!live.empty() && (live.size() == total || !key)) {
    return;  // nothing expired; or not one of ours, or edited by hand: left to expire
  }
  {
    std::lock_guard lock(mu_);
    ++stats_.writes;
  }
  std::string path = collection_path() + "/" + name;
  webhook::Result<ApiClient::Reply> r = webhook::Error{};
  if (live.empty()) {
    json options = {{"kind", "DeleteOptions"},
                    {"apiVersion", "v1"},
                    {"preconditions", {{"resourceVersion", rv}}}};
    r = api_.send("DELETE", path, options.dump(), "application/json", timeout);
    if (r && r->status == 200) {
      std::lock_guard lock(mu_);
      ++stats_.objects_deleted;
    }
  } else {
    // Rewrite without the expired claims; the group comes from the Lease's own annotation.
    r = api_.send("PUT", path, lease_json(*key, live, rv), "application/json", timeout);
  }
  // 409 and 404: another replica wrote or deleted it first, which is as good.
  if (!r) {
    count_error();
  } else if (r->status >= 300 && r->status != 404 && r->status != 409) {
    count_error();
    say(LogLevel::kWarning,
        "claims janitor: Lease " + options_.ns + "/" + name + ": " + describe_status(*r));
  }
}

void ClaimStore::run(std::stop_token stop) {
  // The pause between sweeps is real time even when clock_ is a test's: what expired is read
  // from clock_.
  SystemClock pause;
  while (!stop.stop_requested() && !sweep_call_.cancelled()) {
    if (!pause.sleep_for(options_.sweep_interval, stop)) {
      return;
    }
    sweep();
  }
}

void ClaimStore::cancel() { sweep_call_.cancel(); }

}  // namespace kube
