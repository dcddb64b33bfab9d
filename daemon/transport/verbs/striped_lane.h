// One poller's lane of a striped link: a queue pair on each paired device
// (VerbsLanes of the per-device links), with ops spread over them by weight
// (each pair's port rate) and moved to the others when a device fails.
// A failed device pair that rejoins gets a fresh lane in its old place.
// Poller thread only, except credits()/broken() which the engine also calls
// from that thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "daemon/transport/transport.h"
#include "daemon/transport/verbs/stripe_members.h"

namespace xferd::transport::verbs {

// Why a striped link to `peer` broke when the last of its `devices` device
// pairs did, `last` being that pair's reason (its payloads kept: the engine
// reads the cause from them). One pair: its reason as it is.
absl::Status EveryDeviceBroke(const std::string& peer, const absl::Status& last, size_t devices);

class StripedLane final : public Lane, public OpReporter {
 public:
  // `ops_depth`: ops each device's lane holds at most.
  // `link_alive` is the link that owns this lane: held while ops wait here.
  // `waiting`: the poller's list this lane joins while ops wait in it.
  StripedLane(Link& link, std::weak_ptr<Link> link_alive, WaitingLanes& waiting,
              uint32_t ops_depth);

  // Control thread, before the link is published: one device's lane, the
  // per-device link that owns it, where its device counts the ops moved off
  // it, and its weight (> 0; 0 counts as 1).
  void AddDevice(std::shared_ptr<Link> owner, PairLane* lane, std::atomic<uint64_t>* failovers,
                 uint64_t weight);
  // Poller thread (handed over by the worker): the device in place `slot`
  // gets `lane` (connected, of the fresh link `owner`) instead of its broken
  // one, as soon as the broken one has given back every op it took.
  void Rejoin(uint32_t slot, std::shared_ptr<Link> owner, PairLane* lane, uint64_t weight);

  // The devices' credits together, less the ops waiting to move.
  uint32_t credits() const override;
  bool broken() const override { return link_.broken(); }

  // Spreads the ops over the devices; takes them all unless the link is
  // broken (then none). Ops no device can take now wait here.
  uint32_t Post(absl::Span<const DataOp> ops) override;
  // Posts (or, when no device can reach the peer any more, fails) the ops
  // waiting here. True while some still wait.
  bool ServiceWaiting(CompletionSink& sink);
  void OnLaneOpDone(uint32_t sub, const OpCompletion& completion, CompletionSink& sink) override;

 private:
  // A ring of ops; capacity fixed at construction, so the data path never
  // allocates.
  class OpRing {
   public:
    void Reset(size_t capacity) { ops_.assign(capacity, DataOp{}); }
    void Push(const DataOp& op) { ops_[(head_ + count_++) % ops_.size()] = op; }
    DataOp Pop() {
      DataOp op = ops_[head_];
      head_ = (head_ + 1) % ops_.size();
      --count_;
      return op;
    }
    const DataOp& Front() const { return ops_[head_]; }
    size_t size() const { return count_; }

   private:
    std::vector<DataOp> ops_;
    size_t head_ = 0;
    size_t count_ = 0;
  };
  struct Device {
    std::shared_ptr<Link> owner;  // keeps `lane` alive while it is used here
    PairLane* lane = nullptr;
    std::atomic<uint64_t>* failovers = nullptr;
    uint64_t weight = 1;
    uint64_t in_flight_bytes = 0;  // payload bytes of its ops in flight or batched
    OpRing in_flight;              // the ops its lane took, oldest first
    std::vector<DataOp> batch;
    // A rejoined lane waiting for the broken one to drain (in_flight empty).
    std::shared_ptr<Link> next_owner;
    PairLane* next_lane = nullptr;
    uint64_t next_weight = 1;
  };

  // The live device that can carry `op` (its region has keys for that
  // lane) with the least bytes in flight per weight after it; -1 if none.
  // `need_credit`: only devices with a credit left (less `pending` ops
  // already chosen).
  int Choose(const DataOp& op, bool need_credit) const;
  bool Reachable(const DataOp& op) const;
  // Why `op` fails without a device that reaches its region.
  absl::Status Unreachable(const DataOp& op) const;
  void Hold(const DataOp& op);
  void PostBatch(Device& device);
  // Puts the rejoined lane in place of the drained broken one.
  void Swap(uint32_t slot);

  Link& link_;
  const std::weak_ptr<Link> link_alive_;
  WaitingLanes& waiting_lanes_;
  const uint32_t ops_depth_;
  std::vector<Device> devices_;
  OpRing waiting_;  // ops no device took yet, or moved off a failed one
  bool listed_ = false;
};

}  // namespace xferd::transport::verbs
