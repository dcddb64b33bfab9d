// The contract between the engine and a data transport (TCP or verbs).
//
// A Transport serves one daemon. It owns one TransportWorker per poller; each
// worker is driven by exactly one poller thread and owns that poller's lane of
// every link (a QP or a TCP connection): shared-nothing on the data path.
// Control threads create and close links; the data path only posts ops
// (writes and reads of block lists) and polls completions. Inbound writes and
// read requests from peers are validated, served and announced (landed
// events) by the transport itself, so nothing calls back up into the engine
// except through CompletionSink.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "daemon/base/mutex.h"
#include "daemon/memory/region_registry.h"
#include "daemon/transport/link_rejoin.h"
#include "daemon/transport/transport_stats.h"
#include "daemon/transport/transport_types.h"

namespace xferd::transport {

// A failure the transport cannot explain alone: the peer's NIC refused our
// RDMA access (IBV_WC_REM_ACCESS_ERR), which a region deregistered, keys
// revoked or a range outside the region give, and so does a peer process
// that died (its memory goes before its queue pairs). Its status carries
// this payload, the NIC's words, so that the engine asks the peer which.
inline constexpr absl::string_view kAccessRefused = "xferd.transport/access-refused";
inline bool IsAccessRefused(const absl::Status& status) {
  return status.GetPayload(kAccessRefused).has_value();
}

// One poller's connection to one peer, owned by that poller's worker.
// Methods are for that poller's thread.
class Lane {
 public:
  virtual ~Lane() = default;
  // Ops the lane takes right now (0 while still connecting or once broken):
  // its depth less the ops it holds. An op carries at most kMaxBlocksPerOp
  // blocks, so credits bound blocks in flight, whatever the transfers.
  virtual uint32_t credits() const = 0;
  // True once the lane (and so its link) is broken; Link::status() says why.
  virtual bool broken() const = 0;
  // Takes up to credits() ops (writes or reads), in order, and returns how
  // many it took: all it was offered, up to its credits, unless the lane
  // broke during the call; the ops not taken are the caller's (the poller
  // fails their transfer). A taken op is reported exactly once through its
  // worker's CompletionSink, even if the transport holds it before putting
  // it on the wire (verbs, while its send queue has no room).
  virtual uint32_t Post(absl::Span<const DataOp> ops) = 0;
};

// A peer's write that has wholly landed in a local region (its landing
// notice arrived and checked out), for the engine to announce.
struct Landing {
  std::shared_ptr<memory::Region> region;
  std::shared_ptr<const std::string> source;  // the writer's node id
  LandingNotice notice;
  absl::Time time;
};

// Raises `landing`'s event on its region (the engine does, off the poller,
// with what its sink took note of). Any thread.
void PublishLanding(const Landing& landing);

// Receives what a worker produces for the engine; implemented by the poller.
// Both run on the poller thread and must only take note: no blocking, no
// lookups, no logging above trace.
class CompletionSink {
 public:
  virtual ~CompletionSink() = default;
  // Called once per posted DataOp, in the order the lane posted them.
  virtual void OnOpDone(const OpCompletion& completion) = 0;
  // A peer's write landed here.
  virtual void OnLanded(Landing landing) = 0;
};

// Counters of a link, readable from any thread.
struct LinkCounters {
  // Payload bytes of our writes the peer acknowledged, and (TCP) of the
  // peer's reads this end served.
  std::atomic<uint64_t> bytes_sent{0};
  // Payload bytes the peer wrote to us, and of our reads that completed.
  // TCP counts every inbound frame; verbs only sees a write when its landing
  // notice arrives (the NIC places the rest without the CPU), so it counts
  // landed transfers, and never sees the reads it serves.
  std::atomic<uint64_t> bytes_received{0};
  std::atomic<uint64_t> writes_rejected{0};  // inbound writes refused (bounds, ACL, ...)
};

// The data-plane connection to one peer: one lane per poller.
class Link {
 public:
  virtual ~Link() = default;

  // Initiator side, after the handshake answered: binds the peer's identity
  // and connects the lanes to its endpoints. Control thread; blocks until
  // `deadline` at most. Errors: UNAVAILABLE, DEADLINE_EXCEEDED,
  // INVALID_ARGUMENT (endpoints).
  virtual absl::Status Connect(const PeerIdentity& peer, const LinkEndpoints& remote,
                               absl::Time deadline) = 0;

  // Breaks the link on purpose or after a fault. Lanes are torn down on their
  // poller threads; writes in flight complete with `reason`. Idempotent; the
  // first reason wins. Any thread.
  virtual void Close(absl::Status reason) = 0;

  // Lanes of this link: min(local pollers, the peer's lanes). Poller i serves
  // lane i; pollers beyond lane_count() do not serve this link.
  virtual uint32_t lane_count() const = 0;
  // The lane served by poller `index` < lane_count(). Stable for the link's
  // lifetime.
  virtual Lane& lane(uint32_t index) = 0;

  // OK while usable; otherwise the first error that broke it. Any thread.
  absl::Status status() const;
  bool broken() const { return broken_.load(std::memory_order_acquire); }
  // True once every lane is connected.
  virtual bool ready() const = 0;

  // The link's rejoin steps (below), or null when it has nothing that can
  // rejoin (TCP, or verbs over one device).
  virtual LinkRejoin* rejoin() { return nullptr; }

  // Set at construction (responder) or by Connect (initiator), before any
  // lane carries data.
  const PeerIdentity& peer() const { return peer_; }
  // The peer's node id, shared with what outlives the link (landings).
  const std::shared_ptr<const std::string>& peer_name() const { return peer_name_; }
  LinkCounters& counters() { return counters_; }

 protected:
  explicit Link(PeerIdentity peer) { set_peer(std::move(peer)); }
  void set_peer(PeerIdentity peer) {
    peer_name_ = std::make_shared<const std::string>(peer.node_id);
    peer_ = std::move(peer);
  }
  // Records the first error; returns true if this call broke the link.
  bool MarkBroken(absl::Status reason);

 private:
  PeerIdentity peer_;
  std::shared_ptr<const std::string> peer_name_;
  LinkCounters counters_;
  std::atomic<bool> broken_{false};
  mutable Mutex mu_;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

// The slice of a transport that one poller thread drives.
class TransportWorker {
 public:
  virtual ~TransportWorker() = default;

  // Makes progress: sends, receives and places inbound writes, reports
  // completions of posted writes to `sink`. Never blocks. Returns the number
  // of events handled (0 = idle). Poller thread only.
  virtual uint32_t Poll(CompletionSink& sink) = 0;

  // A file descriptor that becomes readable when Poll has work; the poller
  // sleeps on it. Call PrepareToSleep first: false means work is already
  // pending, so do not sleep. Poller thread only.
  virtual int wait_fd() const = 0;
  virtual bool PrepareToSleep() = 0;

  // CPUs the poller driving this worker should run on (those of its
  // device's NUMA node), or none: leave it where the scheduler puts it.
  virtual std::vector<uint32_t> preferred_cpus() const { return {}; }
};

// A daemon's transport. Also registers region memory (RegionRegistrar).
class Transport : public memory::RegionRegistrar {
 public:
  virtual TransportKind kind() const = 0;
  // The RDMA device and port in use ("rxe0:1"), empty for TCP.
  virtual std::string device() const = 0;
  // The RDMA port and GID in use; nullopt for TCP.
  virtual std::optional<RdmaPortInUse> rdma_port() const { return std::nullopt; }
  virtual uint32_t lanes_per_link() const = 0;
  // True when links are striped over several devices, whose pairs can break
  // and come back alone (Link's rejoin steps).
  virtual bool stripes_devices() const { return false; }
  virtual TransportWorker& worker(uint32_t index) = 0;

  // Initiator: a new link whose lanes wait for Connect(); fills `local` with
  // what the handshake sends. Control thread.
  virtual absl::StatusOr<std::shared_ptr<Link>> CreateLink(LinkEndpoints* local) = 0;
  // Responder: a link connected to the initiator's `remote` endpoints; fills
  // `local` with the answer. Control thread.
  virtual absl::StatusOr<std::shared_ptr<Link>> AcceptLink(const PeerIdentity& peer,
                                                           const LinkEndpoints& remote,
                                                           LinkEndpoints* local) = 0;
  // What the peer of `link` needs to reach a local region it is allowed to
  // (the caller checked the ACL): TCP, the id alone (the receiver checks
  // every write); verbs, the address and keys that work on `link`'s queue
  // pairs only, bound now unless they still are from an earlier grant.
  // Control thread; may block until `deadline` for the pollers to bind.
  // Errors: UNAVAILABLE (link broken), DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED
  // (the device's memory windows).
  virtual absl::StatusOr<RemoteRegion> GrantRegion(Link& link, const memory::Region& region,
                                                   absl::Time deadline) = 0;
  // Withdraws what GrantRegion gave for `region`: to the peer of `link`, or
  // to every peer when `link` is null. Keys stop working at once; a peer's
  // op still using one fails (verbs: a remote access error breaks its
  // link). Any control thread.
  virtual void RevokeRegion(const memory::Region& region, Link* link) = 0;
  // Checks what a peer answered to a resolution before it is ever used on
  // `link`: INVALID_ARGUMENT when it is malformed (e.g. rkeys that do not
  // cover the region, or too few lanes of them). Any thread.
  virtual absl::Status CheckRemoteRegion(const RemoteRegion& region, const Link& link) const = 0;
  // Checks a peer's endpoints (its handshake, its answer to ours, a rejoin
  // offer or answer) before a link uses them: INVALID_ARGUMENT naming what
  // this transport cannot take (verbs: queue pairs, devices, the notice
  // ring). Another transport's endpoints pass: AcceptLink and Connect refuse
  // them, naming both transports. Any thread.
  virtual absl::Status CheckEndpoints(const LinkEndpoints& remote) const = 0;

  // Lanes (QPs or connections) and memory registrations open right now, for
  // stats and leak checks. Any thread.
  virtual TransportStats stats() const = 0;

  // Stops accepting data connections and closes every link. Control thread;
  // pollers must still be running so lanes can be torn down.
  virtual void Shutdown() = 0;
};

}  // namespace xferd::transport
