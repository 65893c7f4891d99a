#pragma once
// Slot claims shared by every replica of the webhook through the API server
// (docs/legacy-placement.md, "Shared claims").
//
//   kube::ClaimStore claims(api, registry, clock, {.ns = "ray-system", .holder = "webhook-0"},
//                           log);
//   webhook::Result<podpatch::Slot> slot = claims.place(request);  // chosen and written
//   std::jthread janitor([&](std::stop_token st) { claims.run(st); });  // deletes what expired
//
// A Pod without KubeRay's index labels gets the lowest free slot of its worker group over two
// things: the group's Pods the Pod watch has shown (the SliceRegistry: the truth) and the
// group's open claims — slots handed out by any replica for Pods the watch may not have shown
// yet. The claims of a group live in one coordination.k8s.io/v1 Lease in the webhook's
// namespace, named from the group alone (claim_object_name), as JSON in its annotation
// kuberay-tpu-webhook/claims. Every write is optimistic: a create, or an update carrying the
// resourceVersion last known; a 409 (Conflict, AlreadyExists) or a 404 makes the replica read the
// Lease again, choose again over Pods + claims, and write again, until the --claim-timeout
// budget ends in a retryable denial. Admissions of one group are serialized inside the process,
// so conflicts arise only between replicas. Each replica watches the claim Leases of its
// namespace (feed(), run by a Reflector) and keeps the newest state of each, from the watch or
// from its own writes, so a claim costs one write — no read — unless another replica wrote the
// same Lease within the watch's delay.
//
// A claim stops counting as soon as this replica's watch shows a Pod of the group on its slot,
// and stays in the Lease until it expires (--reservation-ttl after it was made), so a replica
// whose watch lags a little behind still sees the slot taken. Expired claims are dropped by the
// next write and by the janitor, which also deletes a group's Lease once it holds no live claim.
// Without a synced, connected Pod watch, or when the API cannot be written, a label-less Pod is
// denied as retryable: a replica never guesses. Dry runs read, and write nothing.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

#include "base/status/result.h"
#include "kube/api_client.h"
#include "kube/claim_lease.h"
#include "kube/clock.h"
#include "kube/log.h"
#include "kube/reflector.h"
#include "kube/slice_registry.h"
// webhook_namespace(), replica_identity(): where the claims live and who writes them.
#include "kube/webhook_namespace.h"
#include "podpatch/sources.h"

namespace kube {

struct ClaimStoreOptions {
  std::string ns;                             // the webhook's namespace
  std::string holder;                         // this replica: POD_NAME, else hostname
  Duration ttl = std::chrono::seconds(10);    // --reservation-ttl
  Duration budget = std::chrono::seconds(3);  // --claim-timeout
  std::size_t max_claims = 500;  // open claims per group: a Lease's annotations hold 256 KiB
  Duration sweep_interval = std::chrono::seconds(0);  // 0: max(ttl / 2, 1 s)
};

class ClaimStore : public podpatch::SlotAllocator {
 public:
  // `api`, `pods` and `clock` must outlive the store; `log` is called from any thread.
  ClaimStore(ApiClient& api, const SliceRegistry& pods, Clock& clock, ClaimStoreOptions options,
             Logger log);
  ~ClaimStore() override;
  ClaimStore(const ClaimStore&) = delete;
  ClaimStore& operator=(const ClaimStore&) = delete;

  using podpatch::SlotAllocator::place;
  // Chooses over the group's Pods and open claims and, unless a dry run, writes the claim.
  // Unavailable (retryable) before the first Pod list, while the Pod watch has been down for
  // more than half the TTL, and when the claim could not be written within the budget (the
  // message says why: API errors, or conflicts with other replicas); AlreadyExists when two
  // Pods hold one slot; Unavailable (retryable) when the group holds max_claims open claims.
  webhook::Result<podpatch::Slot> place(const podpatch::PlaceRequest& request) override;

  // The Pod watch showed a Pod of `key` on `slot`: a claim of this replica's cached Lease for
  // that slot is confirmed (stops counting) at the group's next placement, even if the Pod is
  // gone by then. Cheap; called from the watch thread.
  void shown(const podpatch::GroupKey& key, podpatch::Slot slot);

  // The Sink for a Reflector of the claim Leases of the namespace (lease_resource()).
  Sink& feed() { return feed_; }
  Resource lease_resource() const;

  // One pass of the janitor: lists the claim Leases of the namespace, deletes each that holds no
  // live claim (with its resourceVersion as precondition) and rewrites each that holds expired
  // ones. False when the list failed.
  bool sweep();
  // Sweeps every sweep interval until `stop`; cancel() ends a request in flight.
  void run(std::stop_token stop);
  void cancel();

  struct Stats {
    std::uint64_t claims_written = 0;   // successful claim writes (one per placed Pod)
    std::uint64_t writes = 0;           // write requests sent (claims, prunes, deletes)
    std::uint64_t reads = 0;            // GETs of a group's Lease
    std::uint64_t watched = 0;          // Lease states taken from the watch
    std::uint64_t conflicts = 0;        // 409 Conflict / AlreadyExists answers to claim writes
    std::uint64_t api_errors = 0;       // failed requests (transport, 5xx, unexpected status)
    std::uint64_t denied = 0;           // retryable denials: no claim written in time, the
                                        // Pod watch down too long, or too many open claims
    std::uint64_t confirmed = 0;        // claims whose Pod this replica's watch showed
    std::uint64_t objects_deleted = 0;  // Leases deleted once they held no live claim
    std::uint64_t sweeps = 0;
    std::size_t groups = 0;  // groups with a Lease known to this replica
  };
  Stats stats() const;

 private:
  struct Group;
  struct Write;
  class Turn;
  struct Attempts;
  struct OpenClaims;
  class LeaseFeed : public Sink {
   public:
    explicit LeaseFeed(ClaimStore& store) : store_(store) {}
    void list_begin() override {}
    void listed(const nlohmann::json& object) override { store_.watched(object, false); }
    void list_end() override {}
    void list_abort() override {}
    void event(EventType type, const nlohmann::json& object) override {
      store_.watched(object, type == EventType::kDeleted);
    }

   private:
    ClaimStore& store_;
  };
  // place(), step by step (claims.cpp).
  webhook::Status check_pod_watch();
  void confirm_shown(Group& g);
  std::string claim_id(const podpatch::PlaceRequest& request);
  std::optional<webhook::Result<podpatch::Slot>> attempt(const podpatch::PlaceRequest& request,
                                                         Group& g, Attempts& a);
  webhook::Result<podpatch::Slot> choose(const podpatch::PlaceRequest& request, Group& g,
                                         const OpenClaims& claims);
  webhook::Error too_many_claims(const podpatch::GroupKey& key, std::size_t live);
  Duration remaining(const Attempts& a) const;
  void failed(Attempts& a, std::string why);
  void conflicted(Attempts& a);
  webhook::Error give_up(const podpatch::GroupKey& key, const Attempts& a);
  void count_denied();
  void count_confirmed(Group& g, const std::string& id);
  // The janitor, step by step (claims_janitor.cpp).
  std::optional<nlohmann::json> list_claim_leases(Duration timeout);
  void sweep_lease(const nlohmann::json& lease, WallTime now, Duration timeout);
  void forget_idle_groups();

  void watched(const nlohmann::json& lease, bool deleted);
  void adopt_watched(Group& g);
  std::shared_ptr<Group> group(const podpatch::GroupKey& key);
  webhook::Status read(const podpatch::GroupKey& key, Group& g, Duration timeout);
  Write write(const podpatch::GroupKey& key, Group& g, std::vector<Claim> claims, Duration timeout);
  std::string lease_json(const podpatch::GroupKey& key, const std::vector<Claim>& claims,
                         const std::string& resource_version) const;
  std::string collection_path() const;
  void count_error();
  void say(LogLevel level, const std::string& line) const;

  ApiClient& api_;
  const SliceRegistry& pods_;
  Clock& clock_;
  ClaimStoreOptions options_;
  Logger log_;
  Call sweep_call_;
  LeaseFeed feed_{*this};

  mutable std::mutex mu_;  // guards groups_ and the counters
  std::map<podpatch::GroupKey, std::shared_ptr<Group>> groups_;
  std::uint64_t next_id_ = 0;
  std::mt19937_64 rng_{std::random_device{}()};  // conflict pauses
  Stats stats_;
};

}  // namespace kube
