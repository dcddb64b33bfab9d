#include "daemon/transport/verbs/striped_lane.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/common/check.h"

namespace xferd::transport::verbs {

absl::Status EveryDeviceBroke(const std::string& peer, const absl::Status& last, size_t devices) {
  if (devices == 1) return last;
  absl::Status all(last.code(), absl::StrCat("no RDMA device reaches peer ", peer,
                                             " any more; the last one: ", last.message()));
  last.ForEachPayload(
      [&all](absl::string_view url, const absl::Cord& payload) { all.SetPayload(url, payload); });
  return all;
}

StripedLane::StripedLane(Link& link, std::weak_ptr<Link> link_alive, WaitingLanes& waiting,
                         uint32_t ops_depth)
    : link_(link),
      link_alive_(std::move(link_alive)),
      waiting_lanes_(waiting),
      ops_depth_(ops_depth) {}

void StripedLane::AddDevice(std::shared_ptr<Link> owner, PairLane* lane,
                            std::atomic<uint64_t>* failovers, uint64_t weight) {
  Device device;
  device.owner = std::move(owner);
  device.lane = lane;
  device.failovers = failovers;
  device.weight = weight == 0 ? 1 : weight;
  device.in_flight.Reset(ops_depth_);
  device.batch.reserve(ops_depth_);
  lane->set_reporter(this, static_cast<uint32_t>(devices_.size()));
  devices_.push_back(std::move(device));
  // Everything the devices hold may come back here at once.
  waiting_.Reset(size_t{ops_depth_} * devices_.size());
}

void StripedLane::Rejoin(uint32_t slot, std::shared_ptr<Link> owner, PairLane* lane,
                         uint64_t weight) {
  Device& d = devices_[slot];
  d.next_owner = std::move(owner);
  d.next_lane = lane;
  d.next_weight = weight == 0 ? 1 : weight;
  // Completions of the broken lane pair up with in_flight in order: the new
  // lane takes over only once none is left.
  if (d.in_flight.size() == 0) Swap(slot);
}

void StripedLane::Swap(uint32_t slot) {
  Device& d = devices_[slot];
  d.owner = std::move(d.next_owner);
  d.lane = d.next_lane;
  d.next_lane = nullptr;
  d.weight = d.next_weight;
  d.lane->set_reporter(this, slot);
}

uint32_t StripedLane::credits() const {
  if (link_.broken()) return 0;
  uint32_t sum = 0;
  for (const Device& d : devices_) sum += d.lane->credits();
  return sum > waiting_.size() ? sum - static_cast<uint32_t>(waiting_.size()) : 0;
}

bool StripedLane::Reachable(const DataOp& op) const {
  for (const Device& d : devices_) {
    if (!d.lane->broken() && d.lane->Reaches(*op.remote)) return true;
  }
  return false;
}

absl::Status StripedLane::Unreachable(const DataOp& op) const {
  // Every pair broke: the striped link closes with the last one's reason as
  // soon as the thread that broke it gets there (StripedLink::
  // OnDeviceLinkClosed). The op fails with that reason now, so the engine
  // reads the cause (a dead peer's NIC refusing access) the link will give.
  const bool every_device_broke = std::all_of(devices_.begin(), devices_.end(),
                                              [](const Device& d) { return d.lane->broken(); });
  if (every_device_broke && !devices_.empty()) {
    return EveryDeviceBroke(link_.peer().node_id, devices_.back().owner->status(), devices_.size());
  }
  return absl::UnavailableError(absl::StrCat("no RDMA device of this daemon reaches region id ",
                                             op.remote->region_id, " on peer ",
                                             link_.peer().node_id));
}

int StripedLane::Choose(const DataOp& op, bool need_credit) const {
  int best = -1;
  double best_load = 0;
  for (size_t i = 0; i < devices_.size(); ++i) {
    const Device& d = devices_[i];
    if (d.lane->broken() || !d.lane->Reaches(*op.remote)) continue;
    if (need_credit && d.lane->credits() <= d.batch.size()) continue;
    // Bytes in flight per unit of rate once this op is added: the emptiest
    // pipe wins, so each device carries its share of the rate, and a faster
    // one (it drains sooner) more. Bytes in flight rather than bytes so far:
    // ops only some devices can carry (keys on those alone), or a device
    // back from an outage, would otherwise skew the shares for long after.
    const double load =
        static_cast<double>(d.in_flight_bytes + op.length) / static_cast<double>(d.weight);
    if (best < 0 || load < best_load) {
      best = static_cast<int>(i);
      best_load = load;
    }
  }
  return best;
}

void StripedLane::Hold(const DataOp& op) {
  waiting_.Push(op);
  if (!listed_) {
    listed_ = true;
    waiting_lanes_.ListWaiting(this, link_alive_.lock());
  }
}

void StripedLane::PostBatch(Device& device) {
  if (device.batch.empty()) return;
  const uint32_t taken = device.lane->Post(absl::MakeConstSpan(device.batch));
  for (uint32_t k = 0; k < taken; ++k) device.in_flight.Push(device.batch[k]);
  // Refused only by a lane that broke during the post: another device
  // takes the rest.
  for (size_t k = taken; k < device.batch.size(); ++k) {
    device.in_flight_bytes -= device.batch[k].length;
    Hold(device.batch[k]);
  }
  device.batch.clear();
}

uint32_t StripedLane::Post(absl::Span<const DataOp> ops) {
  if (link_.broken()) return 0;
  for (const DataOp& op : ops) {
    const int chosen = Choose(op, /*need_credit=*/true);
    if (chosen < 0) {
      Hold(op);
      continue;
    }
    Device& d = devices_[static_cast<size_t>(chosen)];
    d.batch.push_back(op);
    d.in_flight_bytes += op.length;
  }
  for (Device& d : devices_) PostBatch(d);
  return static_cast<uint32_t>(ops.size());
}

bool StripedLane::ServiceWaiting(CompletionSink& sink) {
  while (waiting_.size() > 0) {
    const DataOp& op = waiting_.Front();
    if (link_.broken() || !Reachable(op)) {
      const DataOp failed = waiting_.Pop();
      const absl::Status status = link_.broken() ? link_.status() : Unreachable(failed);
      sink.OnOpDone(OpCompletion{failed.cookie, failed.length, &status});
      continue;
    }
    const int chosen = Choose(op, /*need_credit=*/true);
    if (chosen < 0) break;  // every live device is full: completions make room
    Device& d = devices_[static_cast<size_t>(chosen)];
    d.batch.push_back(waiting_.Pop());
    d.in_flight_bytes += d.batch.back().length;
    PostBatch(d);
  }
  listed_ = waiting_.size() > 0;
  return listed_;
}

void StripedLane::OnLaneOpDone(uint32_t sub, const OpCompletion& completion,
                               CompletionSink& sink) {
  Device& device = devices_[sub];
  const DataOp op = device.in_flight.Pop();
  XFERD_CHECK(op.cookie == completion.cookie);
  device.in_flight_bytes -= op.length;
  // A device failed (its own link broke): another one carries the op, if
  // any still reaches the peer. RDMA WRITEs and READs are idempotent, so
  // bytes the failed device may already have moved are simply moved again.
  if (completion.error != nullptr && !link_.broken() && device.lane->broken() && Reachable(op)) {
    device.failovers->fetch_add(1, std::memory_order_relaxed);
    Hold(op);
  } else {
    sink.OnOpDone(completion);
  }
  // The broken lane gave back its last op: the rejoined one takes its place.
  if (device.next_lane != nullptr && device.in_flight.size() == 0) Swap(sub);
}

}  // namespace xferd::transport::verbs
