#include "daemon/engine/tenants.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace xferd::engine {
namespace {

Priority PriorityNamed(const std::string& name) {
  for (Priority p : kAllPriorities) {
    if (name == PriorityName(p)) return p;
  }
  return Priority::kCritical;  // Validate() allows only the four names
}

}  // namespace

// How far ahead of its rate a capped tenant may post: a few ops' worth on a
// fast link, and what smooths the pollers' batches.
constexpr absl::Duration kBandwidthBurst = absl::Milliseconds(10);

Tenant::Tenant(const TenantConfig& config, uint32_t index)
    : config_(config),
      index_(index),
      max_priority_(PriorityNamed(config.max_priority)),
      bandwidth_(config.max_bandwidth, kBandwidthBurst) {}

bool Tenant::MayUse(const memory::Region& region) const {
  return MayUse(region.spec().owner, region.spec().shared_with);
}

absl::Status Tenant::CheckUse(const memory::Region& region) const {
  if (MayUse(region)) return absl::OkStatus();
  return Denied(absl::StrCat("region '", region.name(), "' belongs to tenant '",
                             region.spec().owner, "' and is not shared with tenant '", name(),
                             "' (its owner may register it with shared_with = [\"", name(),
                             "\"])"));
}

absl::Status Tenant::CheckOwner(const memory::Region& region, absl::string_view action) const {
  if (Owns(region.spec().owner)) return absl::OkStatus();
  return Denied(absl::StrCat("tenant '", name(), "' may not ", action, " region '", region.name(),
                             "': only its owner, tenant '", region.spec().owner, "', may"));
}

absl::Status Tenant::CheckPriority(Priority priority) const {
  if (PriorityIndex(priority) >= PriorityIndex(max_priority_)) return absl::OkStatus();
  return Denied(absl::StrCat("tenant '", name(), "' may not use priority ", PriorityName(priority),
                             ": its max_priority is ", PriorityName(max_priority_)));
}

absl::Status Tenant::Admit(uint32_t n) const {
  const uint32_t limit = config_.max_inflight_transfers;
  uint32_t now = in_flight_.load(std::memory_order_relaxed);
  do {
    if (limit != 0 && now + n > limit) {
      refused_quota_.fetch_add(1, std::memory_order_relaxed);
      return absl::ResourceExhaustedError(absl::StrCat(
          "tenant '", name(), "' has ", now, " transfers in flight of its max_inflight_transfers=",
          limit, ": ", n, " more do not fit; wait for some to end"));
    }
  } while (!in_flight_.compare_exchange_weak(now, now + n, std::memory_order_relaxed));
  submitted_.fetch_add(n, std::memory_order_relaxed);
  return absl::OkStatus();
}

void Tenant::Release(uint64_t bytes, std::optional<absl::Duration> queue_wait) const {
  bytes_.fetch_add(bytes, std::memory_order_relaxed);
  if (queue_wait.has_value()) {
    started_.fetch_add(1, std::memory_order_relaxed);
    queue_wait_ns_.fetch_add(absl::ToInt64Nanoseconds(*queue_wait), std::memory_order_relaxed);
  }
  in_flight_.fetch_sub(1, std::memory_order_relaxed);
}

void Tenant::Unadmit(uint32_t n) const {
  submitted_.fetch_sub(n, std::memory_order_relaxed);
  in_flight_.fetch_sub(n, std::memory_order_relaxed);
}

void Tenant::CountRefusal(const absl::Status& error) const {
  if (error.code() == absl::StatusCode::kResourceExhausted) {
    refused_quota_.fetch_add(1, std::memory_order_relaxed);
  } else if (error.code() == absl::StatusCode::kPermissionDenied) {
    refused_access_.fetch_add(1, std::memory_order_relaxed);
  }
}

absl::Status Tenant::Denied(std::string message) const {
  refused_access_.fetch_add(1, std::memory_order_relaxed);
  return absl::PermissionDeniedError(std::move(message));
}

TenantStats Tenant::Stats() const {
  TenantStats s;
  s.name = name();
  s.max_registered_bytes = config_.max_registered_bytes;
  s.max_inflight_transfers = config_.max_inflight_transfers;
  s.max_priority = max_priority_;
  s.in_flight = in_flight_.load(std::memory_order_relaxed);
  s.submitted = submitted_.load(std::memory_order_relaxed);
  s.bytes = bytes_.load(std::memory_order_relaxed);
  s.started = started_.load(std::memory_order_relaxed);
  s.queue_wait = absl::Nanoseconds(queue_wait_ns_.load(std::memory_order_relaxed));
  s.refused_quota = refused_quota_.load(std::memory_order_relaxed);
  s.refused_access = refused_access_.load(std::memory_order_relaxed);
  s.max_bandwidth = config_.max_bandwidth;
  s.weight = config_.weight;
  s.admin = config_.admin;
  return s;
}

Tenants::Tenants(const std::vector<TenantConfig>& configs) : configured_(!configs.empty()) {
  std::vector<TenantConfig> sorted = configs;
  if (std::none_of(sorted.begin(), sorted.end(),
                   [](const TenantConfig& t) { return t.name == kDefaultTenant; })) {
    TenantConfig fallback;
    fallback.name = kDefaultTenant;
    sorted.push_back(std::move(fallback));
  }
  std::sort(sorted.begin(), sorted.end(),
            [](const TenantConfig& a, const TenantConfig& b) { return a.name < b.name; });
  for (const TenantConfig& config : sorted) {
    all_.push_back(std::make_unique<Tenant>(config, static_cast<uint32_t>(all_.size())));
    const Tenant* tenant = all_.back().get();
    if (config.name == kDefaultTenant) default_ = tenant;
    for (uint32_t uid : config.uids) by_uid_[uid] = tenant;
    for (uint32_t gid : config.gids) by_gid_[gid] = tenant;
    for (const std::string& name : config.cert_names) by_cert_name_[name] = tenant;
  }
}

const Tenant& Tenants::ForCredentials(uint32_t uid, uint32_t gid) const {
  if (auto it = by_uid_.find(uid); it != by_uid_.end()) return *it->second;
  if (auto it = by_gid_.find(gid); it != by_gid_.end()) return *it->second;
  return *default_;
}

const Tenant& Tenants::ForCertificate(const std::vector<std::string>& names) const {
  for (const std::string& name : names) {
    if (auto it = by_cert_name_.find(name); it != by_cert_name_.end()) return *it->second;
  }
  return *default_;
}

const Tenant* Tenants::Find(absl::string_view name) const {
  for (const auto& tenant : all_) {
    if (tenant->name() == name) return tenant.get();
  }
  return nullptr;
}

}  // namespace xferd::engine
