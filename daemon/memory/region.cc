#include "daemon/memory/region.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/common/check.h"

namespace xferd::memory {

Region::Region(uint32_t id, RegionSpec spec, std::unique_ptr<MemoryBacking> backing)
    : id_(id),
      spec_(std::move(spec)),
      registered_at_(absl::Now()),
      backing_(std::move(backing)),
      can_lose_memory_(backing_->kind() == Backing::kFile) {
  if (spec_.landed_ranges) landed_.KeepRanges();
  SetAllowedPeers(spec_.allowed_peers);
}

Region::~Region() { landed_.Close(); }

absl::Status Region::CheckRange(uint64_t offset, uint64_t length, absl::string_view role) const {
  if (length == 0) {
    return absl::InvalidArgumentError(absl::StrCat(role, " length is 0: nothing to transfer"));
  }
  const uint64_t region_size = size();
  // Written so that offset + length cannot overflow.
  if (offset > region_size || length > region_size - offset) {
    return absl::OutOfRangeError(absl::StrCat(role, " range [", offset, ", ", offset, "+", length,
                                              ") exceeds region '", name(), "' of ", region_size,
                                              " bytes"));
  }
  return absl::OkStatus();
}

bool Region::PeerAllowed(absl::string_view node_id) const {
  const std::vector<std::string>& acl = *acl_.load(std::memory_order_acquire);
  return acl.empty() || std::find(acl.begin(), acl.end(), node_id) != acl.end();
}

void Region::SetAllowedPeers(std::vector<std::string> peers) {
  MutexLock lock(&acl_mu_);
  acls_.push_back(std::make_unique<const std::vector<std::string>>(std::move(peers)));
  acl_.store(acls_.back().get(), std::memory_order_release);
}

absl::Status Region::MarkLost() {
  MutexLock lock(&lost_mu_);
  if (lost_status_.ok()) {
    lost_status_ = absl::FailedPreconditionError(absl::StrCat(
        "region '", name(), "' lost its memory: ", backing_->DescribeLoss(),
        "; deregister it (and register it again to use the file)"));
    lost_.store(true, std::memory_order_release);
  }
  return lost_status_;
}

absl::Status Region::LostStatus() const {
  if (!lost()) return absl::OkStatus();
  MutexLock lock(&lost_mu_);
  return lost_status_;
}

void Region::set_registration(std::unique_ptr<TransportRegistration> registration) {
  XFERD_CHECK(registration_ == nullptr);
  registration_ = std::move(registration);
}

}  // namespace xferd::memory
