// RegionControl: registering, deregistering and re-ACLing local regions.
#include "daemon/engine/region_control.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/log.h"

namespace xferd::engine {
namespace {

absl::Status NoRegion(absl::string_view name) {
  return absl::NotFoundError(absl::StrCat("no region named '", name, "'"));
}

}  // namespace

RegionControl::RegionControl(memory::RegionRegistry& regions, transport::Transport& transport,
                             PeerManager& peers, TransferRunner& runner,
                             ControlExecutor& executor)
    : regions_(regions),
      transport_(transport),
      peers_(peers),
      runner_(runner),
      executor_(executor) {}

void RegionControl::SetObserver(RegionObserver* observer) {
  observer_.store(observer, std::memory_order_release);
}

void RegionControl::Changed() {
  if (RegionObserver* observer = observer_.load(std::memory_order_acquire)) {
    observer->OnRegionsChanged();
  }
}

absl::StatusOr<std::shared_ptr<memory::Region>> RegionControl::FindFor(absl::string_view name,
                                                                       const Tenant& tenant) const {
  std::shared_ptr<memory::Region> region = regions_.Find(name);
  if (region == nullptr) return NoRegion(name);
  RETURN_IF_ERROR(tenant.CheckUse(*region));
  return region;
}

void RegionControl::Register(memory::RegionSpec spec,
                             Callback<std::shared_ptr<memory::Region>> done) {
  // Mapping and pinning gigabytes takes a while: not on a gRPC thread.
  executor_.Run([this, spec = std::move(spec), done = std::move(done)]() mutable {
    const std::string name = spec.name;
    absl::StatusOr<std::shared_ptr<memory::Region>> region =
        regions_.Register(std::move(spec), &transport_);
    if (region.ok()) {
      spdlog::info("region registered name={} size={} id={}", name, (*region)->size(),
                   (*region)->id());
      Changed();
    }
    done(std::move(region));
  });
}

absl::StatusOr<uint32_t> RegionControl::Deregister(const std::string& name, const Tenant& tenant,
                                                   bool force,
                                                   std::function<void(uint32_t)> peers_told) {
  std::shared_ptr<memory::Region> region = regions_.Find(name);
  if (region == nullptr) return NoRegion(name);
  RETURN_IF_ERROR(tenant.CheckOwner(*region, "deregister"));
  uint32_t cancelled = 0;
  if (force) {
    // The region is a write's source and a read's destination: say which.
    for (const transport::OpKind kind : {transport::OpKind::kWrite, transport::OpKind::kRead}) {
      const bool read = kind == transport::OpKind::kRead;
      cancelled += runner_.EndWhere(
          [&](const Transfer& t) { return t.plan().local == region && t.plan().kind == kind; },
          absl::CancelledError(absl::StrCat(read ? "destination region '" : "source region '", name,
                                            "' was deregistered", read ? " under the read" : "")));
    }
  }
  ASSIGN_OR_RETURN(std::shared_ptr<memory::Region> removed, regions_.Remove(name, force));
  // Peers' keys die now, not when the last local user lets go of the memory.
  transport_.RevokeRegion(*removed, nullptr);
  spdlog::info("region deregistered name={} id={} cancelled_transfers={}", name, removed->id(),
               cancelled);
  Changed();
  peers_.NotifyInvalidated(removed->id(), name, [peers_told = std::move(peers_told), cancelled] {
    if (peers_told) peers_told(cancelled);
  });
  executor_.Run([this] { runner_.SweepUntilReleased(); });
  return cancelled;
}

void RegionControl::SetAcl(const std::string& name, const Tenant& tenant,
                           std::vector<std::string> allowed,
                           Callback<std::shared_ptr<memory::Region>> done) {
  if (absl::Status s = memory::RegionRegistry::ValidateAcl(allowed); !s.ok()) return done(s);
  std::shared_ptr<memory::Region> region = regions_.Find(name);
  if (region == nullptr) return done(NoRegion(name));
  if (absl::Status s = tenant.CheckOwner(*region, "change the ACL of"); !s.ok()) return done(s);
  region->SetAllowedPeers(std::move(allowed));
  // After the change: a resolution checks the ACL again once its keys are
  // bound, so one that raced with this sees it, or is listed here.
  std::vector<std::shared_ptr<Peer>> dropped = peers_.TakeExcludedResolvers(*region);
  for (const std::shared_ptr<Peer>& peer : dropped) {
    transport_.RevokeRegion(*region, peer->link().get());
  }
  spdlog::info("region ACL changed name={} allowed_peers=[{}] revoked_from={}", name,
               absl::StrJoin(region->allowed_peers(), ","), dropped.size());
  Changed();
  // So their cached keys go before they write (the next resolution is
  // refused); over TCP every write is checked against the ACL anyway.
  const uint32_t id = region->id();
  peers_.TellInvalidated(std::move(dropped), id, name,
                         [region = std::move(region), done = std::move(done)] { done(region); });
}

}  // namespace xferd::engine
