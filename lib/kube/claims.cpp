#include "kube/claims.h"

#include <openssl/evp.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <ctime>
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

std::string hex(const unsigned char* data, std::size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (std::size_t i = 0; i < n; ++i) {
    out.push_back(kHex[data[i] >> 4]);
    out.push_back(kHex[data[i] & 15]);
  }
  return out;
}

// RFC 3339 in UTC with milliseconds: 2026-12-01T09:00:00.123Z.
std::string format_time(WallTime t, int digits) {
  auto since = t.time_since_epoch();
  auto secs = std::chrono::floor<std::chrono::seconds>(since);
  auto frac = std::chrono::duration_cast<std::chrono::microseconds>(since - secs).count();
  auto tt = static_cast<std::time_t>(secs.count());
  std::tm tm{};
  gmtime_r(&tt, &tm);
  char buf[48];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string out(buf);
  if (digits == 3) {
    std::snprintf(buf, sizeof buf, ".%03lld", static_cast<long long>(frac / 1000));
    out += buf;
  } else if (digits == 6) {
    std::snprintf(buf, sizeof buf, ".%06lld", static_cast<long long>(frac));
    out += buf;
  }
  return out + "Z";
}

// The inverse of format_time for 0..9 fractional digits; nullopt for anything else.
std::optional<WallTime> parse_time(std::string_view s) {
  std::tm tm{};
  int year = 0, mon = 0, day = 0, hour = 0, min = 0, sec = 0;
  int used = 0;
  std::string text(s);
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &year, &mon, &day, &hour, &min, &sec,
                  &used) != 6 ||
      used != 19) {
    return std::nullopt;
  }
  std::size_t i = 19;
  long long nanos = 0;
  if (i < text.size() && text[i] == '.') {
    int digits = 0;
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) {
      if (digits++ < 9) {
        nanos = nanos * 10 + (text[i] - '0');
      }
    }
    if (digits == 0 || digits > 9) {
      return std::nullopt;
    }
    for (; digits < 9; ++digits) {
      nanos *= 10;
    }
  }
  if (i + 1 != text.size() || text[i] != 'Z') {
    return std::nullopt;
  }
  if (mon < 1 || mon > 12 || day < 1 || day > 31 || hour > 23 || min > 59 || sec > 60) {
    return std::nullopt;
  }
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = min;
  tm.tm_sec = sec;
  std::time_t t = timegm(&tm);
  return WallTime(std::chrono::duration_cast<WallTime::duration>(std::chrono::seconds(t) +
                                                                 std::chrono::nanoseconds(nanos)));
}

std::string group_text(const GroupKey& key) {
  return "worker group \"" + key.group + "\" of RayCluster " + key.ns + "/" + key.cluster;
}

std::string millis(Duration d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(d).count()) + "ms";
}

// The reason of a Status body ("Conflict", "AlreadyExists", ...), or "" when there is none.
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

}  // namespace

// ---- The claims annotation --------------------------------------------------------------------

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
                   {"expires", format_time(c.expires, 3)},
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
    std::optional<WallTime> when = parse_time(*expires);
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

// ---- Namespace and identity -------------------------------------------------------------------

webhook::Result<NamespaceSource> webhook_namespace(const EnvLookup& env, std::string_view sa_dir,
                                                   const std::string& flag) {
  if (std::optional<std::string> ns = env("POD_NAMESPACE"); ns && !ns->empty()) {
    return NamespaceSource{*ns, "POD_NAMESPACE"};
  }
  std::string file = std::string(sa_dir) + "/namespace";
  if (webhook::Result<std::string> ns = read_file(file, 1024); ns) {
    std::string v = *ns;
    while (!v.empty() && (v.back() == '\n' || v.back() == ' ' || v.back() == '\r')) {
      v.pop_back();
    }
    if (!v.empty()) {
      return NamespaceSource{v, file};
    }
  }
  if (!flag.empty()) {
    return NamespaceSource{flag, "--namespace"};
  }
  return webhook::failed_precondition(
      "legacy placement keeps its slot claims in the webhook's own namespace, and none is known: "
      "set POD_NAMESPACE (the chart sets it from the downward API) or pass --namespace=NS");
}

std::string replica_identity(const EnvLookup& env) {
  if (std::optional<std::string> name = env("POD_NAME"); name && !name->empty()) {
    return *name;
  }
  char host[256] = {};
  if (gethostname(host, sizeof host - 1) == 0 && host[0] != '\0') {
    return host;
  }
  return "kuberay-tpu-webhook";
}

// ---- The store --------------------------------------------------------------------------------

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
                  {"renewTime", format_time(now, 6)}}}};
  return lease.dump(-1, ' ', false, json::error_handler_t::replace);
}

// The claims and resourceVersion of a Lease object; InvalidArgument when they do not decode.
static webhook::Result<std::pair<std::string, std::vector<Claim>>> lease_state(const json& lease) {
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
  return std::make_pair(std::move(rv), std::move(claims));
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
  webhook::Result<std::pair<std::string, std::vector<Claim>>> state =
      lease_state(json::parse(r->body, nullptr, false));
  if (!state) {
    return Error{ErrorCode::kUnavailable,
                 "Lease " + options_.ns + "/" + claim_object_name(key) +
                     " does not hold valid claims (" + state.error().message +
                     "); the webhook's janitor deletes it within " +
                     millis(options_.sweep_interval) + ", or delete it by hand"};
  }
  g.known = true;
  g.exists = true;
  g.version = std::move(state->first);
  g.claims = std::move(state->second);
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
    webhook::Result<std::pair<std::string, std::vector<Claim>>> state =
        lease_state(json::parse(r->body, nullptr, false));
    if (state && !state->first.empty()) {
      g.known = true;
      g.exists = true;
      g.version = std::move(state->first);
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

webhook::Result<Slot> ClaimStore::place(const podpatch::PlaceRequest& request) {
  const GroupKey& key = request.key;
  if (webhook::Status s = check_placeable(pods_, request); !s) {
    return s.error();
  }
  if (Duration down = pods_.disconnected_for(); down > options_.ttl / 2) {
    {
      std::lock_guard lock(mu_);
      ++stats_.denied;
    }
    return Error{ErrorCode::kUnavailable,
                 "this webhook replica's watch of Pods has been disconnected from the API server "
                 "for " +
                     millis(down) +
                     ", so it cannot tell which slots are free and will not guess; the Pod's "
                     "creation fails and KubeRay retries it (another replica, or this one once "
                     "the watch is back, places it)"};
  }

  // One admission of the group at a time in this process; waiting for the others counts
  // against the budget, so the answer always comes within it.
  TimePoint deadline = clock_.now() + options_.budget;
  std::shared_ptr<Group> g = group(key);
  bool turn = false;
  {
    std::unique_lock lock(g->turn_mu);
    turn = g->turn_cv.wait_for(lock, options_.budget, [&] { return !g->busy; });
    if (turn) {
      g->busy = true;
    }
  }
  struct Release {
    Group& g;
    bool held;
    ~Release() {
      if (held) {
        {
          std::lock_guard lock(g.turn_mu);
          g.busy = false;
        }
        g.turn_cv.notify_one();
      }
    }
  } release{*g, turn};
  if (!turn) {
    {
      std::lock_guard lock(mu_);
      ++stats_.denied;
    }
    return Error{ErrorCode::kUnavailable,
                 "too many Pods of " + group_text(key) +
                     " are being placed at once through this webhook replica to record another "
                     "slot claim within --claim-timeout (" +
                     millis(options_.budget) +
                     "). This is retryable: the Pod's creation fails and KubeRay retries it"};
  }
  // Claims whose Pods the watch showed since the last placement are confirmed, before anything
  // new is claimed.
  std::vector<Slot> shown;
  {
    std::lock_guard lock(g->shown_mu);
    shown.swap(g->shown);
  }
  for (const Claim& c : g->claims) {
    if (std::find(shown.begin(), shown.end(), c.slot) != shown.end() &&
        g->confirmed.insert(c.id).second) {
      std::lock_guard lock(mu_);
      ++stats_.confirmed;
    }
  }
  std::string id;
  {
    std::lock_guard lock(mu_);
    // The AdmissionRequest's uid is unique per admission (and the same when kube-apiserver
    // calls again for it); outside admission, one of this replica's own.
    id = request.uid.empty() ? options_.holder + "/" + std::to_string(++next_id_) : request.uid;
  }
  int conflicts = 0;
  int errors = 0;
  std::string last_error;
  Duration backoff = kFirstBackoff;
  auto remaining = [&] { return deadline - clock_.now(); };
  auto failed = [&](std::string why) {
    last_error = std::move(why);
    ++errors;
    Duration wait = std::min(backoff, remaining());
    backoff *= 2;
    if (wait > Duration::zero()) {
      clock_.sleep_for(wait, std::stop_token{});
    }
  };

  while (remaining() > Duration::zero()) {
    adopt_watched(*g);  // another replica's write, seen by the Lease watch
    if (!g->known) {
      if (webhook::Status s = read(key, *g, remaining()); !s) {
        failed(s.error().message);
        continue;
      }
    }
    // A claim of ours already in the Lease: an earlier write that timed out went through.
    for (const Claim& c : g->claims) {
      if (c.id == id) {
        return c.slot;
      }
    }
    WallTime now = clock_.wall_now();
    std::vector<Claim> live;
    std::vector<Reservation> open;  // the live claims not confirmed, and their ids
    std::vector<std::string> open_ids;
    for (const Claim& c : g->claims) {
      if (c.expires <= now) {
        continue;  // expired: dropped by this write
      }
      live.push_back(c);
      if (!g->confirmed.contains(c.id)) {
        open.push_back({c.slot, "(a Pod " + c.pod + " placed by webhook replica " + c.holder +
                                    ", not yet seen by the Pod watch)"});
        open_ids.push_back(c.id);
      }
    }
    webhook::Result<Slot> slot =
        choose_free_slot(pods_.holders(key), open, request.hosts, key, [&](std::size_t i) {
          if (g->confirmed.insert(open_ids[i]).second) {  // the watch shows a Pod on its slot
            std::lock_guard lock(mu_);
            ++stats_.confirmed;
          }
        });
    std::erase_if(g->confirmed, [&](const std::string& cid) {
      return std::none_of(live.begin(), live.end(), [&](const Claim& c) { return c.id == cid; });
    });
    if (!slot || request.dry_run) {
      return slot;
    }
    if (live.size() >= options_.max_claims) {
      return Error{ErrorCode::kResourceExhausted,
                   group_text(key) + " has " + std::to_string(live.size()) +
                       " slot claims whose Pods have not appeared yet (bound " +
                       std::to_string(options_.max_claims) +
                       "); they expire within --reservation-ttl (" + millis(options_.ttl) +
                       "), after which the Pod's creation succeeds when KubeRay retries it"};
    }
    live.push_back(Claim{*slot, now + std::chrono::duration_cast<WallTime::duration>(options_.ttl),
                         request.pod, options_.holder, id});
    Write w = write(key, *g, std::move(live), remaining());
    switch (w.outcome) {
      case Write::Outcome::kWritten: {
        std::lock_guard lock(mu_);
        ++stats_.claims_written;
        return slot;
      }
      case Write::Outcome::kConflict:
        // Another replica wrote first: read again and choose again — at once the first time,
        // then after a short random pause, so two replicas that keep colliding drift apart.
        if (++conflicts > 1) {
          Duration cap = std::min<Duration>(
              kFirstBackoff, std::chrono::milliseconds(1LL << std::min(conflicts, 6)));
          std::uniform_int_distribution<Duration::rep> spread(0, cap.count());
          Duration pause;
          {
            std::lock_guard lock(mu_);
            pause = Duration(spread(rng_));
          }
          clock_.sleep_for(std::min(pause, remaining()), std::stop_token{});
        }
        break;
      case Write::Outcome::kGone:
        break;  // the janitor deleted it: create it
      case Write::Outcome::kFailed:
        failed(std::move(w.error));
        break;
    }
  }
  {
    std::lock_guard lock(mu_);
    ++stats_.denied;
  }
  std::string why;
  if (errors > 0) {
    why = std::to_string(errors) + " API request(s) failed, the last with: " + last_error;
  }
  if (conflicts > 0) {
    why += (why.empty() ? "" : "; ") + std::to_string(conflicts) +
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

// The group a claim Lease is for, from its kuberay-tpu-webhook/group annotation
// ("<ns>/<cluster>/<group>"); nullopt unless the Lease's name is that group's.
static std::optional<GroupKey> lease_group(const json& lease) {
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
    webhook::Result<std::pair<std::string, std::vector<Claim>>> state = lease_state(lease);
    if (!state) {
      return;  // a placement reads it and says what is wrong
    }
    claims = std::move(state->second);
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

bool ClaimStore::sweep() {
  {
    std::lock_guard lock(mu_);
    ++stats_.sweeps;
  }
  std::string list_path = collection_path() + "?labelSelector=" + url_encode(kClaimSelector);
  std::string body;
  std::string error_body;
  Duration timeout = std::max<Duration>(options_.budget, std::chrono::seconds(5));
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
    return false;
  }
  json list = json::parse(body, nullptr, false);
  if (!list.is_object() || !list.contains("items") || !list["items"].is_array()) {
    count_error();
    return false;
  }
  WallTime now = clock_.wall_now();
  for (const json& lease : list["items"]) {
    if (sweep_call_.cancelled()) {
      return true;
    }
    std::string name =
        lease.is_object() && lease.contains("metadata") && lease["metadata"].is_object()
            ? lease["metadata"].value("name", "")
            : "";
    if (name.empty()) {
      continue;
    }
    webhook::Result<std::pair<std::string, std::vector<Claim>>> state = lease_state(lease);
    std::vector<Claim> live;
    std::string rv;
    std::size_t total = 0;
    if (state) {
      rv = state->first;
      total = state->second.size();
      for (Claim& c : state->second) {
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
    std::string path = collection_path() + "/" + name;
    webhook::Result<ApiClient::Reply> r = webhook::Error{};
    {
      std::lock_guard lock(mu_);
      ++stats_.writes;
    }
    if (live.empty()) {
      json options = {{"kind", "DeleteOptions"},
                      {"apiVersion", "v1"},
                      {"preconditions", {{"resourceVersion", rv}}}};
      r = api_.send("DELETE", path, options.dump(), "application/json", timeout);
      if (r && r->status == 200) {
        std::lock_guard lock(mu_);
        ++stats_.objects_deleted;
      }
    } else if (live.size() < total) {
      // Rewrite without the expired claims; the group comes from the Lease's own annotation.
      std::optional<GroupKey> key = lease_group(lease);
      if (!key) {
        continue;  // not one of ours, or edited by hand: leave it to expire
      }
      r = api_.send("PUT", path, lease_json(*key, live, rv), "application/json", timeout);
    } else {
      continue;
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
  // Forget groups whose Lease is gone, unless an admission is using them.
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
  return true;
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

ClaimStore::Stats ClaimStore::stats() const {
  std::lock_guard lock(mu_);
  Stats s = stats_;
  s.groups = groups_.size();
  return s;
}

}  // namespace kube
