#include "daemon/memory/region_registry.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/base/units.h"

namespace xferd::memory {

RegionRegistry::RegionRegistry(RegistryOptions options) : options_(std::move(options)) {}

absl::Status RegionRegistry::ValidateName(absl::string_view name) {
  if (name.empty() || name.size() > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("region name '", name, "' must be 1 to 64 characters long"));
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-') {
      return absl::InvalidArgumentError(absl::StrCat(
          "region name '", name, "' may only contain letters, digits, '.', '_' and '-'"));
    }
  }
  if (name == "." || name == "..") {
    return absl::InvalidArgumentError("region name may not be '.' or '..'");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MemoryBacking>> RegionRegistry::CreateBacking(
    const RegionSpec& spec) const {
  BackingSpec backing;
  backing.kind = spec.backing;
  backing.size = spec.size;
  backing.hugepages = spec.hugepages;
  backing.numa_node = spec.numa_node;
  backing.file_path = spec.file_path;
  backing.create = spec.create;
  // A file that only serves as a source may be read-only on disk.
  backing.writable = spec.access.remote_write || spec.backing != Backing::kFile;
  backing.file_confinement = options_.file_confinement;
  backing.shm_name = absl::StrCat("xferd-region:", spec.name);
  return MemoryBacking::Create(backing);
}

absl::Status RegionRegistry::ValidateSpec(const RegionSpec& spec) {
  RETURN_IF_ERROR(ValidateName(spec.name));
  if (spec.backing != Backing::kFile && spec.size == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("region '", spec.name, "': size must be > 0 for anonymous and shm regions"));
  }
  if (spec.hugepages && spec.backing != Backing::kAnonymous) {
    return absl::InvalidArgumentError("hugepages apply to anonymous regions only");
  }
  if (spec.numa_node >= 0 && spec.backing == Backing::kFile) {
    return absl::InvalidArgumentError(
        "numa_node applies to anonymous and shm regions only: a file's pages belong to the page "
        "cache");
  }
  if (spec.backing != Backing::kFile && (!spec.file_path.empty() || spec.create)) {
    return absl::InvalidArgumentError("file_path and create apply to file-backed regions only");
  }
  return ValidateAcl(spec.allowed_peers);
}

absl::Status RegionRegistry::ValidateAcl(const std::vector<std::string>& peers) {
  for (const std::string& peer : peers) {
    if (peer.empty()) return absl::InvalidArgumentError("allowed_peers contains an empty node id");
  }
  return absl::OkStatus();
}

absl::Status RegionRegistry::CheckCaps(const std::string& owner, uint64_t bytes) const {
  if (options_.max_registered_bytes != 0 &&
      registered_bytes_ + bytes > options_.max_registered_bytes) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "registering ", FormatBytes(bytes), " would exceed regions.max_registered_bytes (",
        FormatBytes(options_.max_registered_bytes), "; ", FormatBytes(registered_bytes_),
        " in use)"));
  }
  auto cap = options_.owner_caps.find(owner);
  if (cap != options_.owner_caps.end() && cap->second != 0) {
    auto it = owner_bytes_.find(owner);
    const uint64_t used = it == owner_bytes_.end() ? 0 : it->second;
    if (used + bytes > cap->second) {
      return absl::ResourceExhaustedError(
          absl::StrCat("tenant '", owner, "': registering ", FormatBytes(bytes),
                       " would exceed its max_registered_bytes (", FormatBytes(cap->second), "; ",
                       FormatBytes(used), " registered): deregister some of its regions first"));
    }
  }
  return absl::OkStatus();
}

void RegionRegistry::AddBytes(const std::string& owner, int64_t bytes) {
  registered_bytes_ += static_cast<uint64_t>(bytes);
  auto it = owner_bytes_.try_emplace(owner, 0).first;
  it->second += static_cast<uint64_t>(bytes);
  if (it->second == 0) owner_bytes_.erase(it);
}

absl::Status RegionRegistry::Reserve(const RegionSpec& spec) {
  MutexLock lock(&mu_);
  if (by_name_.contains(spec.name) || pending_.contains(spec.name)) {
    return absl::AlreadyExistsError(absl::StrCat(
        "region '", spec.name, "' already exists: deregister it first or pick another name"));
  }
  // File sizes are only known once opened; they are checked after mapping.
  RETURN_IF_ERROR(CheckCaps(spec.owner, spec.size));
  pending_.insert(spec.name);
  AddBytes(spec.owner, static_cast<int64_t>(spec.size));
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> RegionRegistry::SettleReservation(const RegionSpec& spec, uint64_t size) {
  MutexLock lock(&mu_);
  AddBytes(spec.owner, -static_cast<int64_t>(spec.size));
  if (absl::Status s = CheckCaps(spec.owner, size); !s.ok()) {
    pending_.erase(spec.name);
    return s;
  }
  AddBytes(spec.owner, static_cast<int64_t>(size));
  return next_id_++;
}

absl::StatusOr<std::shared_ptr<Region>> RegionRegistry::Register(RegionSpec spec,
                                                                 RegionRegistrar* registrar) {
  RETURN_IF_ERROR(ValidateSpec(spec));
  RETURN_IF_ERROR(Reserve(spec));
  absl::StatusOr<std::unique_ptr<MemoryBacking>> backing = CreateBacking(spec);
  if (!backing.ok()) {
    Unreserve(spec, spec.size);
    return backing.status();
  }
  ASSIGN_OR_RETURN(const uint32_t id, SettleReservation(spec, (*backing)->size()));
  spec.size = (*backing)->size();
  auto region = std::make_shared<Region>(id, std::move(spec), *std::move(backing));
  if (registrar != nullptr) {
    absl::StatusOr<std::unique_ptr<TransportRegistration>> registration =
        registrar->RegisterMemory(*region);
    if (!registration.ok()) {
      Unreserve(region->spec(), region->size());
      return registration.status();
    }
    region->set_registration(*std::move(registration));
  }
  MutexLock lock(&mu_);
  pending_.erase(region->name());
  by_name_[region->name()] = region;
  by_id_[region->id()] = region;
  return region;
}

void RegionRegistry::Unreserve(const RegionSpec& spec, uint64_t bytes) {
  MutexLock lock(&mu_);
  pending_.erase(spec.name);
  AddBytes(spec.owner, -static_cast<int64_t>(bytes));
}

absl::StatusOr<std::shared_ptr<Region>> RegionRegistry::Remove(absl::string_view name, bool force) {
  std::shared_ptr<Region> region;
  {
    MutexLock lock(&mu_);
    auto it = by_name_.find(name);
    if (it == by_name_.end()) {
      return absl::NotFoundError(absl::StrCat("no region named '", name, "'"));
    }
    if (!force && it->second->users() > 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "region '", name, "' is used by ", it->second->users(),
          " transfer(s) in flight: wait for them, cancel them, or deregister with force"));
    }
    region = std::move(it->second);
    by_name_.erase(it);
    by_id_.erase(region->id());
    AddBytes(region->spec().owner, -static_cast<int64_t>(region->size()));
    retired_landed_events_ += region->landed().published();
  }
  // Transfers may keep the region alive for a while (the history holds
  // finished ones), but no client can open it any more: it is not found.
  region->landed().Close();
  return region;
}

std::shared_ptr<Region> RegionRegistry::Find(absl::string_view name) const {
  ReaderMutexLock lock(&mu_);
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::shared_ptr<Region> RegionRegistry::FindById(uint32_t id) const {
  ReaderMutexLock lock(&mu_);
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<Region>> RegionRegistry::List() const {
  ReaderMutexLock lock(&mu_);
  std::vector<std::shared_ptr<Region>> regions;
  regions.reserve(by_name_.size());
  for (const auto& [name, region] : by_name_) regions.push_back(region);
  std::sort(regions.begin(), regions.end(),
            [](const auto& a, const auto& b) { return a->name() < b->name(); });
  return regions;
}

uint64_t RegionRegistry::landed_events() const {
  ReaderMutexLock lock(&mu_);
  uint64_t total = retired_landed_events_;
  for (const auto& [name, region] : by_name_) total += region->landed().published();
  return total;
}

size_t RegionRegistry::count() const {
  ReaderMutexLock lock(&mu_);
  return by_name_.size();
}

uint64_t RegionRegistry::registered_bytes() const {
  ReaderMutexLock lock(&mu_);
  return registered_bytes_;
}

uint64_t RegionRegistry::registered_bytes(absl::string_view owner) const {
  ReaderMutexLock lock(&mu_);
  auto it = owner_bytes_.find(owner);
  return it == owner_bytes_.end() ? 0 : it->second;
}

}  // namespace xferd::memory
