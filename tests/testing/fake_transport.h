// An in-process Transport that keeps the transport contract: the conformance
// suite runs it beside TCP and verbs. Links pair through a FakeFabric the way
// TCP lanes pair through the responder's session token; the receiving end
// checks and places each write, or serves each read, as a TCP receiver does
// (one refusal fails one op); closing either end breaks both. Completions come from Poll on the
// poller thread, and a test can hold them back to model a stalled peer.
#pragma once

#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "daemon/base/mutex.h"
#include "daemon/memory/region_registry.h"
#include "daemon/transport/transport.h"

namespace xferd::testing {

// A ready link with one lane that must never be used, for tests of a Transfer
// or a Peer alone.
struct NullLink : transport::Link {
  NullLink() : Link({"peer", 1}) {}
  absl::Status Connect(const transport::PeerIdentity&, const transport::LinkEndpoints&,
                       absl::Time) override {
    return absl::OkStatus();
  }
  void Close(absl::Status) override {}
  uint32_t lane_count() const override { return 1; }
  transport::Lane& lane(uint32_t) override { std::abort(); }
  bool ready() const override { return true; }
};

class FakeLink;

// One device pair the fake models for the engine's rejoin steps (it has no
// devices): broken by a test, put back by the links' rejoin. Counts what
// each step did. Thread-safe.
struct FakeRejoins {
  std::atomic<bool> broken{false};
  std::atomic<uint32_t> offers{0};    // OfferRejoin that offered the pair
  std::atomic<uint32_t> accepts{0};   // pairs AcceptRejoin took
  std::atomic<uint32_t> rejoined{0};  // pairs ConnectRejoin put back
  std::atomic<uint32_t> commits{0};   // pairs CommitRejoin put back
};

// A copy of a posted op (the op's own pointers die with its transfer).
struct PostedOp {
  transport::OpKind kind = transport::OpKind::kWrite;
  uint32_t length = 0;
  bool notice = false;
  std::vector<transport::Block> blocks;
};

// Where accepted links wait for their initiator: the fake's stand-in for the
// TCP acceptor and its session tokens. Transports pair only with transports
// on the same fabric. Thread-safe.
class FakeFabric {
 public:
  // Registers a responder's link; returns the token its initiator connects with.
  std::string Offer(const std::shared_ptr<FakeLink>& link);
  // The link offered under `token`, once (null if unknown, taken or gone).
  std::shared_ptr<FakeLink> Take(const std::string& token);

 private:
  Mutex mu_;
  uint64_t next_token_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<std::string, std::weak_ptr<FakeLink>> offered_ ABSL_GUARDED_BY(mu_);
};

// Reports itself as TCP (what it models) unless told otherwise
// (`reported_kind`: verbs makes the engine check verified transfers at the
// peer, as over RDMA). Constructed and controlled from the test's thread;
// workers are driven by one poller thread each.
class FakeTransport final : public transport::Transport {
 public:
  // `fabric` and `regions` (this daemon's) must outlive the transport.
  // `depth` is each lane's credit count.
  FakeTransport(FakeFabric& fabric, const memory::RegionRegistry& regions, uint32_t pollers,
                uint32_t depth,
                transport::TransportKind reported_kind = transport::TransportKind::kTcp);
  ~FakeTransport() override;  // Shutdown()

  transport::TransportKind kind() const override { return reported_kind_; }
  std::string device() const override { return ""; }
  uint32_t lanes_per_link() const override { return pollers_; }
  bool stripes_devices() const override { return true; }  // the FakeRejoins pair
  transport::TransportWorker& worker(uint32_t index) override;
  // UNAVAILABLE after Shutdown.
  absl::StatusOr<std::shared_ptr<transport::Link>> CreateLink(
      transport::LinkEndpoints* local) override;
  // FAILED_PRECONDITION for a non-TCP offer, INVALID_ARGUMENT for 0 lanes,
  // UNAVAILABLE after Shutdown.
  absl::StatusOr<std::shared_ptr<transport::Link>> AcceptLink(
      const transport::PeerIdentity& peer, const transport::LinkEndpoints& remote,
      transport::LinkEndpoints* local) override;
  absl::StatusOr<transport::RemoteRegion> GrantRegion(transport::Link& link,
                                                      const memory::Region& region,
                                                      absl::Time deadline) override;
  // As TCP: the receiver checks every write, so nothing to withdraw or check.
  void RevokeRegion(const memory::Region&, transport::Link*) override {}
  absl::Status CheckRemoteRegion(const transport::RemoteRegion&,
                                 const transport::Link&) const override {
    return absl::OkStatus();
  }
  // The fake has no limits of its own: it answers `refuse_endpoints` (OK
  // unless a test sets it before the handshake it means to fail).
  absl::Status CheckEndpoints(const transport::LinkEndpoints&) const override {
    return refuse_endpoints;
  }
  absl::Status refuse_endpoints;
  // Lanes of connected, unbroken links; registrations still alive.
  transport::TransportStats stats() const override;
  absl::StatusOr<std::unique_ptr<memory::TransportRegistration>> RegisterMemory(
      const memory::Region& region) override;
  // Closes every link (their peers learn it at once) and refuses new ones.
  void Shutdown() override;

  // Test controls, any thread: while held, posted ops neither land nor
  // complete, unless their link breaks, and the pollers may sleep.
  void HoldCompletions(bool hold);
  // Closes every link with `reason`, as a transport that saw it fail.
  void CloseLinks(const absl::Status& reason);
  bool held() const { return hold_.load(); }
  // What every worker names as its poller's CPUs (before the pollers start).
  void SetPreferredCpus(std::vector<uint32_t> cpus) { preferred_cpus_ = std::move(cpus); }
  const std::vector<uint32_t>& preferred_cpus() const { return preferred_cpus_; }
  // The modelled device pair of this daemon's links (FakeRejoins).
  FakeRejoins& rejoins() { return rejoins_; }
  // Every op posted, in order (for ordering checks).
  std::vector<PostedOp> posted() const;
  void Record(const transport::DataOp& op);

  // One per poller (fake_transport.cc); lane i of every link posts to
  // worker i.
  class Worker;

 private:
  std::shared_ptr<FakeLink> NewLink(transport::PeerIdentity peer, uint32_t lanes);

  const transport::TransportKind reported_kind_;
  FakeFabric& fabric_;
  const memory::RegionRegistry& regions_;
  const uint32_t pollers_;
  const uint32_t depth_;
  // Shared with the registrations, which may outlive the transport.
  const std::shared_ptr<std::atomic<uint32_t>> registrations_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<bool> hold_{false};
  FakeRejoins rejoins_;
  std::vector<uint32_t> preferred_cpus_;
  mutable Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<PostedOp> posted_ ABSL_GUARDED_BY(mu_);
  std::vector<std::weak_ptr<FakeLink>> links_ ABSL_GUARDED_BY(mu_);
};

}  // namespace xferd::testing
