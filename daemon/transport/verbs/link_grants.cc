// Grants: regions made reachable to a link's peer through memory windows
// bound to that link's queue pairs (memory_windows.h), and their revocation.
#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/transport/verbs/striped_link.h"
#include "daemon/transport/verbs/verbs_link.h"
#include "daemon/transport/verbs/verbs_worker.h"

namespace xferd::transport::verbs {

absl::StatusOr<std::shared_ptr<MemoryWindows>> VerbsLink::GrantWindows(
    const memory::Region& region, const VerbsRegistration& registration) {
  const uint32_t lanes = lane_count();
  std::shared_ptr<MemoryWindows> windows;
  {
    MutexLock lock(&mu_);
    // Checked under mu_, which Close takes after breaking the link: windows
    // made here are either seen by Close or never made.
    if (broken()) {
      return absl::UnavailableError(
          absl::StrCat("link to ", peer().node_id, " closed: ", status().message()));
    }
    std::weak_ptr<MemoryWindows>& slot = windows_[region.id()];
    if (std::shared_ptr<MemoryWindows> earlier = slot.lock();
        earlier != nullptr && earlier->usable()) {
      return earlier;  // bound or being bound: the caller waits for it
    }
    std::vector<WindowTarget> chunks = registration.WindowTargets(context_->index);
    std::vector<WindowTarget> targets;
    for (uint32_t lane = 0; lane < lanes; ++lane) {
      targets.insert(targets.end(), chunks.begin(), chunks.end());
    }
    ASSIGN_OR_RETURN(windows,
                     MemoryWindows::Create(context_, lanes, std::move(targets),
                                           VerbsRegistration::WindowAccess(region.access()),
                                           absl::StrCat("region '", region.name(), "' for peer ",
                                                        peer().node_id)));
    slot = windows;
  }
  registration.KeepWindows(windows);
  RequestBinds(windows, lanes);
  return windows;
}

void VerbsLink::RevokeWindows(uint32_t region_id) {
  std::shared_ptr<MemoryWindows> windows;
  {
    MutexLock lock(&mu_);
    auto it = windows_.find(region_id);
    if (it == windows_.end()) return;
    windows = it->second.lock();
    windows_.erase(it);
  }
  if (windows != nullptr) windows->Release();
}

void VerbsLink::RequestBinds(const std::shared_ptr<MemoryWindows>& windows, uint32_t lanes) {
  for (uint32_t i = 0; i < lanes; ++i) {
    workers_[i]->RequestBind(KeepAlive(), lanes_[i].get(), BindJob{windows, i});
  }
}

absl::StatusOr<RemoteRegion> StripedLink::Grant(const memory::Region& region,
                                                const VerbsRegistration& registration,
                                                absl::Time deadline) {
  if (!ready()) {
    return absl::UnavailableError(absl::StrCat("link to ", peer().node_id, " is ",
                                               broken() ? "closed" : "not connected yet"));
  }
  RemoteRegion r{region.id(), region.size(), reinterpret_cast<uint64_t>(region.data()),
                 registration.chunk_bytes(), {}};
  r.key_lanes = lane_count();
  if (VerbsRegistration::WindowAccess(region.access()) == 0) {
    // Nothing to reach: zero keys, which no NIC accepts, on a paired device.
    for (const DevicePairLink& d : device_links_) {
      if (!d.paired) continue;
      r.mutable_device_rkeys(d.local_device).assign(size_t{r.key_lanes} * registration.chunks(), 0);
      break;
    }
    return r;
  }
  // Every device pair binds at once; then each is waited for.
  struct Granted {
    uint32_t device;
    std::shared_ptr<VerbsLink> link;
    std::shared_ptr<MemoryWindows> windows;
  };
  std::vector<Granted> granted;
  for (DevicePairLink& d : device_links_) {
    if (!d.paired) continue;
    std::shared_ptr<VerbsLink> link;
    {
      MutexLock lock(&mu_);  // a rejoin may be replacing it
      link = d.link;
    }
    if (link->broken()) continue;
    ASSIGN_OR_RETURN(std::shared_ptr<MemoryWindows> windows,
                     link->GrantWindows(region, registration));
    granted.push_back(Granted{d.local_device, std::move(link), std::move(windows)});
  }
  if (granted.empty()) {
    return absl::UnavailableError(
        absl::StrCat("no RDMA device reaches peer ", peer().node_id, " any more"));
  }
  r.key_qpns.assign(size_t{devices_.size()} * r.key_lanes, 0);
  for (const Granted& g : granted) {
    RETURN_IF_ERROR(g.windows->Wait(deadline));
    r.mutable_device_rkeys(g.device) = g.windows->keys();
    // The peer's lanes use these keys only while connected to these queue
    // pairs (a rejoin of the pair replaces them).
    for (uint32_t lane = 0; lane < r.key_lanes; ++lane) {
      r.key_qpns[size_t{g.device} * r.key_lanes + lane] = g.link->verbs_lane(lane).qp_num();
    }
  }
  r.key_qpns.resize(size_t{r.device_count()} * r.key_lanes);
  return r;
}

void StripedLink::Revoke(uint32_t region_id) {
  for (DevicePairLink& d : device_links_) d.link->RevokeWindows(region_id);
}

}  // namespace xferd::transport::verbs
