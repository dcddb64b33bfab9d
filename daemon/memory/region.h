// A registered region: named memory with bounds, access flags, an ACL of
// peers (which may change while it is registered), its transport
// registration (e.g. an RDMA MR) and its landed events.
// Regions are shared (std::shared_ptr): whoever reads or writes the memory
// holds a reference, so deregistration never unmaps memory in use.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/base/mutex.h"
#include "daemon/common/tenant_config.h"
#include "daemon/memory/landed_events.h"
#include "daemon/memory/memory_backing.h"

namespace xferd::memory {

struct Access {
  bool remote_write = false;
  bool remote_read = false;
};

struct RegionSpec {
  std::string name;
  uint64_t size = 0;
  Backing backing = Backing::kAnonymous;
  Access access;
  std::string file_path;
  bool create = false;
  bool hugepages = false;
  // Empty: any authenticated peer. As registered; Region::allowed_peers()
  // is the ACL now.
  std::vector<std::string> allowed_peers;
  // Keep the ranges of many-block transfers for watchers that ask.
  bool landed_ranges = false;
  // Anonymous and shm: the NUMA node to allocate on; -1: no binding.
  int32_t numa_node = -1;
  // The tenant that registered it (docs/tenants.md), and the other tenants
  // that may use it in their transfers, watch it and map it ("*": all).
  // Only its owner may deregister it or change its ACL.
  // Default: the tenant every client is without [tenants].
  std::string owner = kDefaultTenant;
  std::vector<std::string> shared_with;
};

// What a transport attaches to a region when it registers it (verbs: its
// memory registrations). Opaque here: only the transport that made it looks
// inside.
class TransportRegistration {
 public:
  virtual ~TransportRegistration() = default;
};

class Region {
 public:
  Region(uint32_t id, RegionSpec spec, std::unique_ptr<MemoryBacking> backing);
  ~Region();

  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  // Never reused within a daemon's lifetime; names the region on the wire.
  uint32_t id() const { return id_; }
  const std::string& name() const { return spec_.name; }
  uint64_t size() const { return backing_->size(); }
  const RegionSpec& spec() const { return spec_; }
  const Access& access() const { return spec_.access; }
  const MemoryBacking& backing() const { return *backing_; }
  absl::Time registered_at() const { return registered_at_; }

  // Daemon-internal: the mapped bytes. Never exposed to clients.
  std::byte* data() const { return backing_->data(); }

  // OK if [offset, offset + length) lies within the region, without overflow;
  // OUT_OF_RANGE / INVALID_ARGUMENT otherwise. `role` prefixes the message
  // ("source", "destination").
  absl::Status CheckRange(uint64_t offset, uint64_t length, absl::string_view role) const;
  // True if the ACL admits this peer. Any thread, data paths included: one
  // atomic load, no lock.
  bool PeerAllowed(absl::string_view node_id) const;
  // The ACL now (empty: any authenticated peer).
  std::vector<std::string> allowed_peers() const { return *acl_.load(std::memory_order_acquire); }
  // Replaces the ACL (checks: RegionRegistry::CheckAcl). Any thread.
  void SetAllowedPeers(std::vector<std::string> peers);

  // Set once, right after creation, before the region is published.
  void set_registration(std::unique_ptr<TransportRegistration> registration);
  const TransportRegistration* registration() const { return registration_.get(); }

  // Whether the region's memory can go away under the daemon: a file
  // region's, whose file another process with write access may truncate.
  // Memory and SHM regions cannot lose a page (SHM memfds are sealed).
  bool can_lose_memory() const { return can_lose_memory_; }
  // After a copy into or out of the region faulted (EFAULT, or a short
  // GuardedCopy): marks it broken until it is deregistered, and returns why,
  // FAILED_PRECONDITION "region 'dst' lost its memory: its file was
  // truncated by another process (...)". The first call looks at the file
  // to say so; later ones return the same. Any thread (a lock, on this
  // path only).
  absl::Status MarkLost();
  // True once marked: every transfer using the region then fails at once
  // with LostStatus(). Any thread, data paths included: one atomic load.
  bool lost() const { return lost_.load(std::memory_order_acquire); }
  // OK, or what MarkLost returned.
  absl::Status LostStatus() const;

  LandedEventHub& landed() { return landed_; }
  const LandedEventHub& landed() const { return landed_; }

  // Transfers using the region (engine bookkeeping for deregistration).
  void AddUser() { users_.fetch_add(1, std::memory_order_relaxed); }
  void RemoveUser() { users_.fetch_sub(1, std::memory_order_relaxed); }
  uint32_t users() const { return users_.load(std::memory_order_relaxed); }

 private:
  const uint32_t id_;
  const RegionSpec spec_;
  const absl::Time registered_at_;
  // Every ACL the region had, the current one last: a reader (a poller
  // checking a write) may still hold an older one, so none is freed before
  // the region. Changes are rare administrative acts; each costs its list.
  mutable Mutex acl_mu_;
  std::vector<std::unique_ptr<const std::vector<std::string>>> acls_ ABSL_GUARDED_BY(acl_mu_);
  std::atomic<const std::vector<std::string>*> acl_;
  // Declared before the registration: the MR must be released before unmapping.
  std::unique_ptr<MemoryBacking> backing_;
  std::unique_ptr<TransportRegistration> registration_;
  LandedEventHub landed_;
  std::atomic<uint32_t> users_{0};
  const bool can_lose_memory_;
  mutable Mutex lost_mu_;
  absl::Status lost_status_ ABSL_GUARDED_BY(lost_mu_);
  std::atomic<bool> lost_{false};
};

}  // namespace xferd::memory
