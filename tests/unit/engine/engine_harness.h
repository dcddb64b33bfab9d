// Two or more engines in one process, connected through FakeTransport and an
// in-process PeerRpc, with blocking helpers over the engine's callbacks, and
// TwoEngineTest, the fixture of the tests that need a writer and a receiver.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "daemon/common/config.h"
#include "daemon/engine/engine.h"
#include "tests/testing/fake_transport.h"
#include "tests/testing/wait_until.h"
#include "tests/testing/landed_recorder.h"

namespace xferd::testing {

// Calls the target engine's handlers directly, as its PeerService would.
class InProcessPeerRpc final : public engine::PeerRpc {
 public:
  void Add(const std::string& address, engine::Engine* engine) { engines_[address] = engine; }
  void Remove(const std::string& address) { engines_.erase(address); }
  // Goodbyes take this long to arrive (a slow network), from now on.
  void SetGoodbyeDelay(absl::Duration delay) {
    goodbye_delay_ms_ = absl::ToInt64Milliseconds(delay);
  }

  absl::StatusOr<engine::HandshakeMessage> Handshake(const std::string& address,
                                                     const engine::HandshakeMessage& request,
                                                     absl::Time) override {
    engine::Engine* e = Find(address);
    if (e == nullptr) return absl::UnavailableError("no daemon at " + address);
    return e->AcceptHandshake(request);
  }
  absl::StatusOr<engine::ResolvedRegion> ResolveRegion(const std::string& address,
                                                       const engine::NodeIdentity& self,
                                                       uint64_t link_id, const std::string& region,
                                                       absl::Time deadline) override {
    engine::Engine* e = Find(address);
    if (e == nullptr) return absl::UnavailableError("no daemon at " + address);
    return e->ResolveForPeer(self.node_id, self.incarnation, link_id, region, deadline);
  }
  absl::Status InvalidateRegion(const std::string& address, const engine::NodeIdentity& self,
                                uint32_t id, const std::string& region, absl::Time) override {
    engine::Engine* e = Find(address);
    return e == nullptr ? absl::UnavailableError("gone")
                        : e->OnRegionInvalidated(self.node_id, self.incarnation, id, region);
  }
  absl::Status StageRanges(const std::string& address, const engine::NodeIdentity& self,
                           const engine::StagedRanges& ranges, absl::Time) override {
    engine::Engine* e = Find(address);
    return e == nullptr ? absl::UnavailableError("gone")
                        : e->OnStageRanges(self.node_id, self.incarnation, ranges);
  }
  absl::StatusOr<std::string> ChecksumBlocks(const std::string& address,
                                             const engine::NodeIdentity& self,
                                             const engine::ChecksumQuery& query,
                                             absl::Time) override {
    checksum_calls.fetch_add(1);
    if (before_checksums) before_checksums();
    engine::Engine* e = Find(address);
    if (e == nullptr) return absl::UnavailableError("gone");
    return e->OnChecksumBlocks(self.node_id, self.incarnation, query);
  }
  // Runs as a ChecksumBlocks call arrives, before the callee checksums
  // (a test changes memory there: a corruption it knows the place of).
  std::function<void()> before_checksums;
  std::atomic<int> checksum_calls{0};
  absl::Status Goodbye(const std::string& address, const engine::NodeIdentity& self,
                       const std::string& reason, absl::Time) override {
    absl::SleepFor(absl::Milliseconds(goodbye_delay_ms_.load()));
    engine::Engine* e = Find(address);
    absl::Status s = e == nullptr ? absl::UnavailableError("gone")
                                  : e->OnGoodbye(self.node_id, self.incarnation, reason);
    goodbyes_.fetch_add(1);
    return s;
  }
  // Goodbyes delivered (answered by their engine, or found it gone).
  int goodbyes() const { return goodbyes_.load(); }
  absl::StatusOr<uint64_t> Ping(const std::string& address, const engine::NodeIdentity&,
                                absl::Time) override {
    engine::Engine* e = Find(address);
    if (e == nullptr || pings_unanswered_.load()) {
      return absl::UnavailableError("failed to connect to all addresses");
    }
    return e->self().incarnation;
  }
  // Tests: pings go unanswered, as from a daemon that died.
  void SetPingsUnanswered(bool unanswered) { pings_unanswered_.store(unanswered); }
  absl::StatusOr<transport::LinkEndpoints> RejoinDevices(const std::string& address,
                                                         const engine::NodeIdentity& self,
                                                         const transport::LinkEndpoints& offer,
                                                         absl::Time) override {
    engine::Engine* e = Find(address);
    if (e == nullptr) return absl::UnavailableError("gone");
    return e->AcceptRejoin(self.node_id, self.incarnation, offer);
  }
  absl::Status CommitRejoin(const std::string& address, const engine::NodeIdentity& self,
                            const std::vector<uint32_t>& devices, absl::Time) override {
    engine::Engine* e = Find(address);
    return e == nullptr ? absl::UnavailableError("gone")
                        : e->OnCommitRejoin(self.node_id, self.incarnation, devices);
  }

 private:
  engine::Engine* Find(const std::string& address) {
    auto it = engines_.find(address);
    return it == engines_.end() ? nullptr : it->second;
  }
  std::map<std::string, engine::Engine*> engines_;
  std::atomic<int64_t> goodbye_delay_ms_{0};
  std::atomic<int> goodbyes_{0};
  std::atomic<bool> pings_unanswered_{false};
};

struct Node {
  std::string name;
  std::unique_ptr<memory::RegionRegistry> regions;
  std::unique_ptr<FakeTransport> transport;  // null on a real transport
  std::unique_ptr<transport::Transport> real_transport;
  std::unique_ptr<engine::Engine> engine;
};

// Makes a node's transport instead of a FakeTransport (benchmarks run the
// engine over real TCP lanes).
using TransportMaker = std::function<absl::StatusOr<std::unique_ptr<transport::Transport>>(
    const memory::RegionRegistry& regions, uint32_t pollers, const std::string& node)>;

class EngineHarness {
 public:
  explicit EngineHarness(EngineConfig config = {}, TransportMaker make_transport = nullptr);
  ~EngineHarness();

  Node& Add(const std::string& name);
  // What the fake transports of nodes added from now on report themselves as.
  transport::TransportKind fake_kind = transport::TransportKind::kTcp;
  Node& node(const std::string& name) { return *nodes_.at(name); }
  InProcessPeerRpc& rpc() { return rpc_; }

  // Blocking wrappers over the engine's callbacks.
  absl::StatusOr<std::shared_ptr<memory::Region>> Register(Node& node, memory::RegionSpec spec);
  std::shared_ptr<memory::Region> RegisterOrDie(Node& node, const std::string& name, uint64_t size,
                                                bool remote_write);
  absl::StatusOr<engine::PeerInfo> Connect(Node& from, Node& to);
  absl::StatusOr<std::vector<std::shared_ptr<engine::Transfer>>> Submit(
      Node& from, std::vector<engine::TransferSpec> writes, bool batch = false);
  // Waits for a transfer's end and its announcement (history, metrics, a
  // read's landed event; bounded) and returns its final state.
  engine::TransferInfo Wait(const std::shared_ptr<engine::Transfer>& t,
                            absl::Duration timeout = absl::Seconds(20));

 private:
  const EngineConfig config_;
  const TransportMaker make_transport_;
  FakeFabric fabric_;
  InProcessPeerRpc rpc_;
  std::map<std::string, std::unique_ptr<Node>> nodes_;
};

// Engines "a" and "b" with a 1 MiB "src" on a and a 1 MiB "dst" (remote
// write) on b; a is connected to b unless the test asks otherwise.
class TwoEngineTest : public ::testing::Test {
 protected:
  explicit TwoEngineTest(EngineConfig config = {}, bool connect = true)
      : h_(config), connect_(connect) {}
  void SetUp() override;

  // Fills src with fresh bytes, writes the first `length` of them to the
  // start of dst and waits for the transfer's end; once done, expects dst to
  // hold them. Returns the final state.
  engine::TransferInfo Write(uint64_t length);

  EngineHarness h_;
  Node* a_ = nullptr;
  Node* b_ = nullptr;
  std::shared_ptr<memory::Region> src_, dst_;

 private:
  const bool connect_;
  uint32_t writes_ = 0;
};

engine::TransferSpec Spec(const std::string& src, const std::string& peer, const std::string& dst,
                       uint64_t length, uint64_t src_offset = 0, uint64_t dst_offset = 0);
void Fill(memory::Region& region, uint8_t seed);

}  // namespace xferd::testing
