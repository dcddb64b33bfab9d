// The engine's identity and stages of life, shared by its parts: the node
// identity, fixed once the gRPC server has bound (SetIdentity); whether it
// accepts peers yet (ready); whether it is draining (no new work) or stopped.
// Thread-safe.
#pragma once

#include <atomic>
#include <string>
#include <utility>

#include "daemon/common/check.h"
#include "daemon/engine/peer_rpc.h"

namespace xferd::engine {

class Lifecycle {
 public:
  explicit Lifecycle(NodeIdentity self) : self_(std::move(self)) {}

  // Valid once ready(): fixed by SetIdentity and never changed after.
  const NodeIdentity& self() const { return self_; }
  // Once, before any peer is accepted (main, when the server has bound).
  void SetIdentity(std::string node_id, std::string address) {
    XFERD_CHECK(!ready());
    self_.node_id = std::move(node_id);
    self_.address = std::move(address);
    ready_.store(true, std::memory_order_release);
  }
  bool ready() const { return ready_.load(std::memory_order_acquire); }

  void BeginDrain() { draining_.store(true, std::memory_order_release); }
  bool draining() const { return draining_.load(std::memory_order_acquire); }
  // Drains too; true for the first call only.
  bool MarkStopped() {
    BeginDrain();
    return !stopped_.exchange(true, std::memory_order_acq_rel);
  }

 private:
  NodeIdentity self_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};
  std::atomic<bool> stopped_{false};
};

}  // namespace xferd::engine
