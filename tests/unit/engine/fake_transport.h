// An in-process Transport for engine unit tests: writes are copied straight
// into the peer fabric member's registered region, and reads straight out of
// it (with the same checks a real peer makes), completions come from Poll on the poller thread, and
// a test can hold completions back to model a stalled peer. NullLink is a
// link that carries nothing, for tests of a Transfer or Peer alone.
#pragma once

#include <atomic>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "daemon/base/mutex.h"
#include "daemon/common/unique_fd.h"
#include "daemon/memory/region_registry.h"
#include "daemon/transport/link_set.h"
#include "daemon/transport/transport.h"

namespace xferd::testing {

// A ready link with one lane that must never be used.
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

class FakeTransport;

// A copy of a posted op (the op's own pointers die with its transfer).
struct PostedOp {
  transport::OpKind kind = transport::OpKind::kWrite;
  uint32_t length = 0;
  bool notice = false;
  std::vector<transport::Block> blocks;
};

// Connects fake transports by node id.
class FakeFabric {
 public:
  void Add(const std::string& node, FakeTransport* transport);
  FakeTransport* Find(const std::string& node);

 private:
  Mutex mu_;
  std::map<std::string, FakeTransport*> nodes_;
};

class FakeTransport final : public transport::Transport {
 public:
  FakeTransport(FakeFabric& fabric, std::string node, const memory::RegionRegistry& regions,
                uint32_t pollers, uint32_t depth);
  ~FakeTransport() override;

  transport::TransportKind kind() const override { return transport::TransportKind::kTcp; }
  std::string device() const override { return ""; }
  uint32_t lanes_per_link() const override { return pollers_; }
  transport::TransportWorker& worker(uint32_t index) override;
  absl::StatusOr<std::shared_ptr<transport::Link>> CreateLink(
      transport::LinkEndpoints* local) override;
  absl::StatusOr<std::shared_ptr<transport::Link>> AcceptLink(
      const transport::PeerIdentity& peer, const transport::LinkEndpoints& remote,
      transport::LinkEndpoints* local) override;
  transport::RemoteRegion DescribeRegion(const memory::Region& region) const override;
  absl::Status CheckRemoteRegion(const transport::RemoteRegion&) const override {
    return absl::OkStatus();
  }
  transport::TransportStats stats() const override { return {}; }
  absl::StatusOr<std::unique_ptr<memory::TransportRegistration>> RegisterMemory(
      const memory::Region& region) override;
  void Shutdown() override;

  // Test controls: while held, posted ops do not complete.
  void HoldCompletions(bool hold) { hold_.store(hold); }
  // Every op posted, in order (for ordering checks). Thread-safe.
  std::vector<PostedOp> posted() const;

  const std::string& node() const { return node_; }
  const memory::RegionRegistry& regions() const { return regions_; }
  bool held() const { return hold_.load(); }
  void Record(const transport::DataOp& op);

 private:
  class Worker;
  FakeFabric& fabric_;
  const std::string node_;
  const memory::RegionRegistry& regions_;
  const uint32_t pollers_;
  const uint32_t depth_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<bool> hold_{false};
  mutable Mutex mu_;
  std::vector<PostedOp> posted_;
  transport::LinkSet links_;
};

}  // namespace xferd::testing
