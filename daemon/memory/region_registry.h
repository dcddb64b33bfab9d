// The daemon's table of registered regions, by name (clients) and by id (peers
// and data-plane frames). Creating the backing and registering it with the
// transport happen outside the lock, so a slow 100 GiB registration does not
// stall lookups.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "daemon/base/mutex.h"
#include "daemon/memory/region.h"

namespace xferd::memory {

// Registers region memory with a transport (verbs: ibv_reg_mr with exactly the
// access the region allows). Implemented by the transport, which may include
// memory/ (memory/ never includes transport/).
class RegionRegistrar {
 public:
  virtual ~RegionRegistrar() = default;
  virtual absl::StatusOr<std::unique_ptr<TransportRegistration>> RegisterMemory(
      const Region& region) = 0;
};

struct RegistryOptions {
  // Where file-backed regions may be (regions.file_dirs) and their mode.
  FileConfinement file_confinement;
  // Cap on the bytes of all regions together (0 = none).
  uint64_t max_registered_bytes = 0;
  // Caps on the bytes of each owner's (tenant's) regions; owners not
  // listed have none.
  absl::flat_hash_map<std::string, uint64_t> owner_caps;
};

class RegionRegistry {
 public:
  explicit RegionRegistry(RegistryOptions options);

  // Validates the spec, maps the memory and registers it with `registrar`
  // (the transport; null registers no transport keys, as in unit tests).
  // Errors: INVALID_ARGUMENT, ALREADY_EXISTS, RESOURCE_EXHAUSTED, NOT_FOUND,
  // PERMISSION_DENIED. Thread-safe.
  absl::StatusOr<std::shared_ptr<Region>> Register(RegionSpec spec, RegionRegistrar* registrar);

  // Unpublishes a region: later lookups miss, watchers get "closed". Memory
  // is released when the last reference goes. FAILED_PRECONDITION if
  // transfers use it and !force. NOT_FOUND if unknown. Thread-safe.
  absl::StatusOr<std::shared_ptr<Region>> Remove(absl::string_view name, bool force);

  // Null if unknown. Thread-safe.
  std::shared_ptr<Region> Find(absl::string_view name) const;
  std::shared_ptr<Region> FindById(uint32_t id) const;
  std::vector<std::shared_ptr<Region>> List() const;

  size_t count() const;
  uint64_t registered_bytes() const;
  // Bytes of the regions `owner` registered (and is registering).
  uint64_t registered_bytes(absl::string_view owner) const;
  // Landed events raised on every region ever registered, removed ones
  // included: it only grows. Thread-safe.
  uint64_t landed_events() const;

  // INVALID_ARGUMENT unless the name is 1-64 chars of [A-Za-z0-9._-].
  static absl::Status ValidateName(absl::string_view name);
  // INVALID_ARGUMENT if an ACL names an empty node id.
  static absl::Status ValidateAcl(const std::vector<std::string>& peers);

 private:
  // INVALID_ARGUMENT unless the spec's fields fit together.
  static absl::Status ValidateSpec(const RegionSpec& spec);
  // RESOURCE_EXHAUSTED if `owner` registering `bytes` more would pass the
  // daemon's cap or the owner's.
  absl::Status CheckCaps(const std::string& owner, uint64_t bytes) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Claims `name` and `bytes` of the caps before the (slow) mapping, so a
  // clash or an exhausted cap fails fast: ALREADY_EXISTS, RESOURCE_EXHAUSTED.
  absl::Status Reserve(const RegionSpec& spec);
  // Once mapped: trades the reserved bytes for the actual `size` (a file's
  // is known only now) and assigns the region's id. RESOURCE_EXHAUSTED
  // releases the reservation.
  absl::StatusOr<uint32_t> SettleReservation(const RegionSpec& spec, uint64_t size);
  absl::StatusOr<std::unique_ptr<MemoryBacking>> CreateBacking(const RegionSpec& spec) const;
  void Unreserve(const RegionSpec& spec, uint64_t bytes);
  void AddBytes(const std::string& owner, int64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RegistryOptions options_;

  mutable Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Region>> by_name_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint32_t, std::shared_ptr<Region>> by_id_ ABSL_GUARDED_BY(mu_);
  // Names being registered right now (reserved so a clash fails fast).
  absl::flat_hash_set<std::string> pending_ ABSL_GUARDED_BY(mu_);
  uint64_t registered_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, uint64_t> owner_bytes_ ABSL_GUARDED_BY(mu_);
  uint32_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  // Landed events of the regions removed so far.
  uint64_t retired_landed_events_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace xferd::memory
