#include "kube/claims.h"

#include <algorithm>
#include <condition_variable>
#include <nlohmann/json.hpp>
#include <random>

#include "kube/config.h"
#include "kube/slot_allocators.h"
#include "podpatch/placement.h"

namespace kube {
namespace {

using nlohmann::json;
using podpatch::GroupKey;
using podpatch::Slot;
using webhook::Error;
using webhook::ErrorCode;

constexpr std::string_view kLeasePath = "/apis/coordination.k8s.io/v1/namespaces/";
// Shortest wait before retrying after an API error; doubles per error, within the budget.
constexpr Duration kFirstBackoff = std::chrono::milliseconds(50);

std::string group_text(const GroupKey& key) {
  return "worker group \"" + key.group + "\" of RayCluster " + key.ns + "/" + key.cluster;
}

}  // namespace

// What this replica knows of one group's Lease. One admission of the group at a time holds the
// turn (busy), and only it touches the fields from `known` to `confirmed`.
struct ClaimStore::Group {
  std::mutex turn_mu;  // guards busy
  std::condition_variable turn_cv;
  bool busy = false;
  bool known = false;   // the fields below are what the API server last answered
  bool exists = false;  // the Lease exists; updates carry `version`
  std::string version;  // resourceVersion of the newest state known (a deletion's too)
  std::vector<Claim> claims;
  std::set<std::string> confirmed;  // ids of claims whose Pod this replica's watch showed
  std::mutex shown_mu;              // guards shown and the watched state (watch threads write)
  std::vector<Slot> shown;          // slots the watch showed a Pod on since the last placement
  // The newest state of the Lease the Lease watch delivered, when newer than what was adopted.
  bool has_watched = false;
  bool watched_exists = false;
  std::string watched_version;
  std::vector<Claim> watched_claims;
};

namespace {

// Whether resourceVersion `a` is newer than `b`. kube-apiserver's are etcd revisions, decimal
// integers that grow with every write; anything else is never taken as newer (the write then
// finds out by a 409).
bool newer(const std::string& a, const std::string& b) {
  auto number = [](const std::string& v) -> std::optional<unsigned long long> {
    if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos) {
      return std::nullopt;
    }
    return std::stoull(v);
  };
  std::optional<unsigned long long> x = number(a);
  std::optional<unsigned long long> y = number(b);
  return x && (b.empty() || (y && *x > *y));
}

}  // namespace

constexpr std::size_t kMaxShown = 4096;

struct ClaimStore::Write {
  enum class Outcome { kWritten, kConflict, kGone, kFailed };
  Outcome outcome = Outcome::kFailed;
  std::string error;  // kFailed: why
};

ClaimStore::ClaimStore(ApiClient& api, const SliceRegistry& pods, Clock& clock,
                       ClaimStoreOptions options, Logger log)
    : api_(api), pods_(pods), clock_(clock), options_(std::move(options)), log_(std::move(log)) {
  if (options_.sweep_interval <= Duration::zero()) {
    options_.sweep_interval = std::max<Duration>(options_.ttl / 2, std::chrono::seconds(1));
  }
}

ClaimStore::~ClaimStore() = default;

void ClaimStore::say(LogLevel level, const std::string& line) const {
  if (log_) {
    log_(level, line);
  }
}

std::shared_ptr<ClaimStore::Group> ClaimStore::group(const GroupKey& key) {
  std::lock_guard lock(mu_);
  std::shared_ptr<Group>& g = groups_[key];
  if (!g) {
    g = std::make_shared<Group>();
  }
  return g;
}

std::string ClaimStore::collection_path() const {
  return std::string(kLeasePath) + url_encode(options_.ns) + "/leases";
}

void ClaimStore::count_error() {
  std::lock_guard lock(mu_);
  ++stats_.api_errors;
}

std::string ClaimStore::lease_json(const GroupKey& key, const std::vector<Claim>& claims,
                                   const std::string& resource_version) const {
  WallTime now = clock_.wall_now();
  auto ttl_seconds = std::chrono::duration_cast<std::chrono::seconds>(options_.ttl).count();
  json metadata = {
      {"name", claim_object_name(key)},
      {"namespace", options_.ns},
      {"labels",
       {{"app.kubernetes.io/managed-by", "kuberay-tpu-webhook"},
        {"app.kubernetes.io/component", "slot-claims"}}},
      {"annotations",
       {{std::string(kClaimGroupAnnotation), key.ns + "/" + key.cluster + "/" + key.group},
        {std::string(kClaimsAnnotation), encode_claims(claims)}}}};
  if (!resource_version.empty()) {
    metadata["resourceVersion"] = resource_version;
  }
  json lease = {{"apiVersion", "coordination.k8s.io/v1"},
                {"kind", "Lease"},
                {"metadata", std::move(metadata)},
                {"spec",
                 {{"holderIdentity", options_.holder},
                  {"leaseDurationSeconds", std::max<long long>(1, ttl_seconds)},
                  {"renewTime", format_rfc3339(now, 6)}}}};
  return lease.dump(-1, ' ', false, json::error_handler_t::replace);
}

webhook::Status ClaimStore::read(const GroupKey& key, Group& g, Duration timeout) {
  std::string path = collection_path() + "/" + claim_object_name(key);
  {
    std::lock_guard lock(mu_);
    ++stats_.reads;
  }
  webhook::Result<ApiClient::Reply> r = api_.send("GET", path, "", "", timeout);
  if (!r) {
    count_error();
    return r.error();
  }
  if (r->status == 404) {
    g.known = true;
    g.exists = false;
    g.claims.clear();
    return {};
  }
  if (r->status != 200) {
    count_error();
    return Error{ErrorCode::kUnavailable, "reading Lease " + options_.ns + "/" +
                                              claim_object_name(key) + ": " + describe_status(*r)};
  }
  webhook::Result<LeaseState> state = lease_state(json::parse(r->body, nullptr, false));
  if (!state) {
    return Error{ErrorCode::kUnavailable,
                 "Lease " + options_.ns + "/" + claim_object_name(key) +
                     " does not hold valid claims (" + state.error().message +
                     "); the webhook's janitor deletes it within " +
                     millis(options_.sweep_interval) + ", or delete it by hand"};
  }
  g.known = true;
  g.exists = true;
  g.version = std::move(state->version);
  g.claims = std::move(state->claims);
  return {};
}

ClaimStore::Write ClaimStore::write(const GroupKey& key, Group& g, std::vector<Claim> claims,
                                    Duration timeout) {
  std::string name = claim_object_name(key);
  bool create = !g.exists;
  std::string body = lease_json(key, claims, create ? "" : g.version);
  {
    std::lock_guard lock(mu_);
    ++stats_.writes;
  }
  webhook::Result<ApiClient::Reply> r =
      create ? api_.send("POST", collection_path(), body, "application/json", timeout)
             : api_.send("PUT", collection_path() + "/" + name, body, "application/json", timeout);
  g.known = false;  // unless the answer says what the Lease now is
  if (!r) {
    count_error();
    return {Write::Outcome::kFailed, r.error().message};
  }
  if (r->status == 200 || r->status == 201) {
    webhook::Result<LeaseState> state = lease_state(json::parse(r->body, nullptr, false));
    if (state && !state->version.empty()) {
      g.known = true;
      g.exists = true;
      g.version = std::move(state->version);
      g.claims = std::move(claims);
    }
    return {Write::Outcome::kWritten, ""};
  }
  if (r->status == 409) {
    std::lock_guard lock(mu_);
    ++stats_.conflicts;
    return {Write::Outcome::kConflict, status_reason(r->body)};
  }
  if (r->status == 404) {
    g.known = true;
    g.exists = false;
    g.claims.clear();
    return {Write::Outcome::kGone, ""};
  }
  count_error();
  return {Write::Outcome::kFailed, (create ? "creating" : "updating") + std::string(" Lease ") +
                                       options_.ns + "/" + name + ": " + describe_status(*r)};
}

// ---- Placing a Pod -----------------------------------------------------------------------------

// One admission's turn at a group: at most one per group in this process at a time. Waiting for
// the others counts against the budget, so the answer always comes within it.
class ClaimStore::Turn {
 public:
  Turn(Group& g, Duration budget) : g_(g) {
    std::unique_lock lock(g_.turn_mu);
    held_ = g_.turn_cv.wait_for(lock, budget, [&] { return !g_.busy; });
    if (held_) {
      g_.busy = true;
    }
  }
  ~Turn() {
    if (held_) {
      {
        std::lock_guard lock(g_.turn_mu);
        g_.busy = false;
      }
      g_.turn_cv.notify_one();
    }
  }
  Turn(const Turn&) = delete;
  Turn& operator=(const Turn&) = delete;

  bool held() const { return held_; }

 private:
  Group& g_;
  bool held_ = false;
};

// The attempts of one placement: until when, and what went wrong so far.
struct ClaimStore::Attempts {
  TimePoint deadline;
  std::string id;  // the claim's id
  int conflicts = 0;
  int errors = 0;
  std::string last_error;
  Duration backoff = kFirstBackoff;
};

// The claims of a group that count for a placement at `now`.
struct ClaimStore::OpenClaims {
  std::vector<Claim> live;            // not expired: the claims the next write keeps
  std::vector<Reservation> open;      // the live claims not confirmed, as reservations
  std::vector<std::string> open_ids;  // and their ids

  static OpenClaims of(const Group& g, WallTime now) {
    OpenClaims out;
    for (const Claim& c : g.claims) {
      if (c.expires <= now) {
        continue;  // expired: dropped by this write
      }
      out.live.push_back(c);
      if (!g.confirmed.contains(c.id)) {
        out.open.push_back({c.slot, "(a Pod " + c.pod + " placed by webhook replica " + c.holder +
                                        ", not yet seen by the Pod watch)"});
        out.open_ids.push_back(c.id);
      }
    }
    return out;
  }
};

webhook::Result<Slot> ClaimStore::place(const podpatch::PlaceRequest& request) {
  if (webhook::Status s = check_placeable(pods_, request); !s) {
    return s.error();
  }
  if (webhook::Status s = check_pod_watch(); !s) {
    return s.error();
  }
  Attempts attempts;
  attempts.deadline = clock_.now() + options_.budget;
  std::shared_ptr<Group> g = group(request.key);
  Turn turn(*g, remaining(attempts));
  if (!turn.held()) {
    count_denied();
    return Error{ErrorCode::kUnavailable,
                 "too many Pods of " + group_text(request.key) +
                     " are being placed at once through this webhook replica to record another "
                     "slot claim within --claim-timeout (" +
                     millis(options_.budget) +
                     "). This is retryable: the Pod's creation fails and KubeRay retries it"};
  }
  confirm_shown(*g);
  attempts.id = claim_id(request);
  while (remaining(attempts) > Duration::zero()) {
    if (std::optional<webhook::Result<Slot>> done = attempt(request, *g, attempts)) {
      return std::move(*done);
    }
  }
  return give_up(request.key, attempts);
}

webhook::Status ClaimStore::check_pod_watch() {
  Duration down = pods_.disconnected_for();
  if (down <= options_.ttl / 2) {
    return {};
  }
  count_denied();
  return Error{ErrorCode::kUnavailable,
               "this webhook replica's watch of Pods has been disconnected from the API server "
               "for " +
                   millis(down) +
                   ", so it cannot tell which slots are free and will not guess; the Pod's "
                   "creation fails and KubeRay retries it (another replica, or this one once "
                   "the watch is back, places it)"};
}

void ClaimStore::count_denied() {
  std::lock_guard lock(mu_);
  ++stats_.denied;
}

void ClaimStore::count_confirmed(Group& g, const std::string& id) {
  if (g.confirmed.insert(id).second) {
    std::lock_guard lock(mu_);
    ++stats_.confirmed;
  }
}

// Claims whose Pods the watch showed since the last placement are confirmed, before anything new
// is claimed.
void ClaimStore::confirm_shown(Group& g) {
  std::vector<Slot> shown;
  {
    std::lock_guard lock(g.shown_mu);
    shown.swap(g.shown);
  }
  for (const Claim& c : g.claims) {
    if (std::find(shown.begin(), shown.end(), c.slot) != shown.end()) {
      count_confirmed(g, c.id);
    }
  }
}

std::string ClaimStore::claim_id(const podpatch::PlaceRequest& request) {
  std::lock_guard lock(mu_);
  // The AdmissionRequest's uid is unique per admission (and the same when kube-apiserver calls
  // again for it); outside admission, one of this replica's own.
  return request.uid.empty() ? options_.holder + "/" + std::to_string(++next_id_) : request.uid;
}

Duration ClaimStore::remaining(const Attempts& a) const { return a.deadline - clock_.now(); }

// One round: the Lease as known (read when it is not), a choice over Pods and open claims, and
// the write of the claim. nullopt when another round is needed.
std::optional<webhook::Result<Slot>> ClaimStore::attempt(const podpatch::PlaceRequest& request,
                                                         Group& g, Attempts& a) {
  adopt_watched(g);  // another replica's write, seen by the Lease watch
  if (!g.known) {
    if (webhook::Status s = read(request.key, g, remaining(a)); !s) {
      failed(a, s.error().message);
      return std::nullopt;
    }
  }
  // A claim of ours already in the Lease: an earlier write that timed out went through.
  for (const Claim& c : g.claims) {
    if (c.id == a.id) {
      return c.slot;
    }
  }
  WallTime now = clock_.wall_now();
  OpenClaims claims = OpenClaims::of(g, now);
  webhook::Result<Slot> slot = choose(request, g, claims);
  if (!slot || request.dry_run) {
    return slot;
  }
  if (claims.live.size() >= options_.max_claims) {
    return too_many_claims(request.key, claims.live.size());
  }
  claims.live.push_back(Claim{*slot,
                              now + std::chrono::duration_cast<WallTime::duration>(options_.ttl),
                              request.pod, options_.holder, a.id});
  Write w = write(request.key, g, std::move(claims.live), remaining(a));
  switch (w.outcome) {
    case Write::Outcome::kWritten: {
      std::lock_guard lock(mu_);
      ++stats_.claims_written;
      return slot;
    }
    case Write::Outcome::kConflict:
      conflicted(a);
      break;
    case Write::Outcome::kGone:
      break;  // the janitor deleted it: create it
    case Write::Outcome::kFailed:
      failed(a, std::move(w.error));
      break;
  }
  return std::nullopt;
}

// The lowest free slot over the group's Pods and open claims. A claim whose slot the watch shows
// a Pod on is confirmed; confirmations of claims no longer live are forgotten.
webhook::Result<Slot> ClaimStore::choose(const podpatch::PlaceRequest& request, Group& g,
                                         const OpenClaims& claims) {
  webhook::Result<Slot> slot =
      choose_free_slot(pods_.holders(request.key), claims.open, request.hosts, request.key,
                       [&](std::size_t i) { count_confirmed(g, claims.open_ids[i]); });
  std::erase_if(g.confirmed, [&](const std::string& cid) {
    return std::none_of(claims.live.begin(), claims.live.end(),
                        [&](const Claim& c) { return c.id == cid; });
  });
  return slot;
}

// Retryable (503, counted as a denial): the claims expire within the TTL.
webhook::Error ClaimStore::too_many_claims(const GroupKey& key, std::size_t live) {
  count_denied();
  return Error{ErrorCode::kUnavailable,
               group_text(key) + " has " + std::to_string(live) +
                   " slot claims whose Pods have not appeared yet (bound " +
                   std::to_string(options_.max_claims) +
                   "); they expire within --reservation-ttl (" + millis(options_.ttl) +
                   "), after which the Pod's creation succeeds when KubeRay retries it"};
}

// An API error: wait before the next round, twice as long as the last time, within the budget.
void ClaimStore::failed(Attempts& a, std::string why) {
  a.last_error = std::move(why);
  ++a.errors;
  Duration wait = std::min(a.backoff, remaining(a));
  a.backoff *= 2;
  if (wait > Duration::zero()) {
    clock_.sleep_for(wait, std::stop_token{});
  }
}

// Another replica wrote first: read again and choose again — at once the first time, then after
// a short random pause, so two replicas that keep colliding drift apart.
void ClaimStore::conflicted(Attempts& a) {
  if (++a.conflicts <= 1) {
    return;
  }
  Duration cap =
      std::min<Duration>(kFirstBackoff, std::chrono::milliseconds(1LL << std::min(a.conflicts, 6)));
  std::uniform_int_distribution<Duration::rep> spread(0, cap.count());
  Duration pause;
  {
    std::lock_guard lock(mu_);
    pause = Duration(spread(rng_));
  }
  clock_.sleep_for(std::min(pause, remaining(a)), std::stop_token{});
}

// The budget is spent: a retryable denial saying what the attempts met.
webhook::Error ClaimStore::give_up(const GroupKey& key, const Attempts& a) {
  count_denied();
  std::string why;
  if (a.errors > 0) {
    why = std::to_string(a.errors) + " API request(s) failed, the last with: " + a.last_error;
  }
  if (a.conflicts > 0) {
    why += (why.empty() ? "" : "; ") + std::to_string(a.conflicts) +
           " write(s) conflicted with other webhook replicas placing Pods of the same group";
  }
  if (why.empty()) {
    why = "no time was left";
  }
  std::string message =
      "could not record the slot claim for a Pod of " + group_text(key) + " in Lease " +
      options_.ns + "/" + claim_object_name(key) + " within --claim-timeout (" +
      millis(options_.budget) + "): " + why +
      ". This is retryable: the Pod's creation fails and KubeRay retries it; Pods with KubeRay's "
      "index labels are not affected";
  say(LogLevel::kWarning, message);
  return Error{ErrorCode::kUnavailable, std::move(message)};
}

void ClaimStore::shown(const GroupKey& key, Slot slot) {
  std::shared_ptr<Group> g;
  {
    std::lock_guard lock(mu_);
    auto it = groups_.find(key);
    if (it == groups_.end()) {
      return;  // this replica holds no claims of the group
    }
    g = it->second;
  }
  std::lock_guard lock(g->shown_mu);
  if (g->shown.size() < kMaxShown) {
    g->shown.push_back(slot);
  }
}

Resource ClaimStore::lease_resource() const {
  return Resource{"leases", collection_path(), std::string(kClaimSelector)};
}

void ClaimStore::watched(const json& lease, bool deleted) {
  if (!lease.is_object() || !lease.contains("metadata") || !lease["metadata"].is_object()) {
    return;
  }
  const json& md = lease["metadata"];
  std::optional<GroupKey> found = lease_group(lease);
  if (!found) {
    return;  // not one this webhook wrote
  }
  const GroupKey& key = *found;
  std::vector<Claim> claims;
  if (!deleted) {
    webhook::Result<LeaseState> state = lease_state(lease);
    if (!state) {
      return;  // a placement reads it and says what is wrong
    }
    claims = std::move(state->claims);
  }
  std::shared_ptr<Group> g;
  {
    std::lock_guard lock(mu_);
    auto it = groups_.find(key);
    if (it == groups_.end()) {
      if (deleted) {
        return;
      }
      it = groups_.emplace(key, std::make_shared<Group>()).first;
    }
    g = it->second;
  }
  std::lock_guard lock(g->shown_mu);
  std::string rv = md.value("resourceVersion", "");
  if (g->has_watched && !newer(rv, g->watched_version)) {
    return;
  }
  g->has_watched = true;
  g->watched_exists = !deleted;
  g->watched_version = std::move(rv);
  g->watched_claims = std::move(claims);
}

void ClaimStore::adopt_watched(Group& g) {
  {
    std::lock_guard lock(g.shown_mu);
    if (!g.has_watched || !newer(g.watched_version, g.version)) {
      return;
    }
    g.known = true;
    g.exists = g.watched_exists;
    g.version = g.watched_version;
    g.claims = g.exists ? g.watched_claims : std::vector<Claim>{};
  }
  std::lock_guard stats(mu_);
  ++stats_.watched;
}

// The janitor's last step: forgets the groups whose Lease is gone, unless an admission is using
// them.
void ClaimStore::forget_idle_groups() {
  std::lock_guard lock(mu_);
  for (auto it = groups_.begin(); it != groups_.end();) {
    bool idle = false;
    {
      std::lock_guard turn(it->second->turn_mu);
      idle = !it->second->busy && it->second.use_count() == 1 &&
             (!it->second->known || !it->second->exists);
    }
    it = idle ? groups_.erase(it) : std::next(it);
  }
}

ClaimStore::Stats ClaimStore::stats() const {
  std::lock_guard lock(mu_);
  Stats s = stats_;
  s.groups = groups_.size();
  return s;
}

}  // namespace kube
