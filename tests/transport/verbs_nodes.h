// Real verbs "daemons" in one process: a region registry and a verbs
// transport each, on this machine's first RDMA device, linked as the engine
// links them and pumped by the calling thread. For the memory-window test and
// bench, which need three daemons and the keys no daemon API hands out (a
// test posts with another peer's key through the transport classes; nothing
// in the daemon offers that).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/memory/region_registry.h"
#include "daemon/transport/transport.h"
#include "daemon/transport/verbs/verbs_transport.h"

namespace xferd::transport::testing {

// Completions by cookie.
struct OpRecorder final : CompletionSink {
  void OnOpDone(const OpCompletion& c) override {
    done[c.cookie] = c.error == nullptr ? absl::OkStatus() : *c.error;
  }
  // Landings go to their region's watchers, as the engine announces them.
  void OnLanded(Landing landing) override { PublishLanding(landing); }
  std::map<uint64_t, absl::Status> done;
};

struct VerbsNode {
  std::string name;
  std::unique_ptr<memory::RegionRegistry> regions;
  std::unique_ptr<verbs::VerbsTransport> transport;
  OpRecorder sink;
};

// Both ends of a link, and what the responder answered in the handshake.
struct LinkEnds {
  std::shared_ptr<Link> initiator;
  std::shared_ptr<Link> responder;
  LinkEndpoints answer;
};

class VerbsNodes {
 public:
  static constexpr uint32_t kPollers = 2;
  static constexpr absl::Duration kTimeout = absl::Seconds(20);

  // Closes every link and lets the pollers drain them before the
  // transports go.
  ~VerbsNodes();

  // A daemon named `name`; an error when this machine has no usable RDMA
  // device (callers skip). `memory_windows`, `mr_chunk`: its
  // VerbsTransportOptions (0: the default chunk).
  absl::StatusOr<VerbsNode*> Add(const std::string& name, bool memory_windows = true,
                                 uint64_t mr_chunk = 0);
  // Links `from` (the initiator) with `to` as a handshake does, and waits
  // until both ends are ready.
  absl::StatusOr<LinkEnds> Connect(VerbsNode& from, VerbsNode& to);

  // One pass over every node's workers; Pump: passes until `done`.
  void PumpOnce();
  bool Pump(const std::function<bool()>& done, absl::Duration timeout = kTimeout);

  std::shared_ptr<memory::Region> Register(VerbsNode& node, const std::string& name,
                                           uint64_t size, memory::Access access);
  // What `owner` grants the peer of `link` (its end on `owner`).
  absl::StatusOr<RemoteRegion> Grant(VerbsNode& owner, Link& link, const memory::Region& region);

  // Posts a write of [offset, offset + length) of `src` to the same range of
  // `dst` on lane `lane` of `link` (its end on `from`), once the lane has a
  // credit; returns its cookie.
  uint64_t PostWrite(VerbsNode& from, Link& link, uint32_t lane, const memory::Region& src,
                     const RemoteRegion& dst, uint64_t offset, uint32_t length);
  // The op's completion (DEADLINE_EXCEEDED if none came).
  absl::Status Wait(VerbsNode& node, uint64_t cookie);
  absl::Status Write(VerbsNode& from, Link& link, uint32_t lane, const memory::Region& src,
                     const RemoteRegion& dst, uint64_t offset, uint32_t length) {
    return Wait(from, PostWrite(from, link, lane, src, dst, offset, length));
  }

 private:
  std::vector<std::unique_ptr<VerbsNode>> nodes_;
  std::vector<std::shared_ptr<Link>> links_;
  std::deque<Block> blocks_;  // each op's block, kept until the end
  uint64_t next_cookie_ = 1;
};

}  // namespace xferd::transport::testing
