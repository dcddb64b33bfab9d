// The fixture of the transport conformance suite
// (//tests/transport:transport_conformance_test), shared by its test files:
// two "daemons" (registry + transport each) in one process, linked as the
// engine links them, their workers pumped by the test thread. The suite is
// instantiated once, in transport_conformance_fixture.cc, over every
// transport of AllTransportFactories(); a transport that cannot run here
// (verbs without an RDMA device) is skipped, not faked.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "daemon/memory/region_registry.h"
#include "daemon/transport/transport.h"
#include "tests/transport/transport_factories.h"

namespace xferd::transport::conformance {

constexpr uint32_t kPollers = 2;
constexpr absl::Duration kTimeout = absl::Seconds(20);

// Records completions by cookie, and their order.
struct Recorder : CompletionSink {
  std::map<uint64_t, absl::Status> done;
  std::vector<uint64_t> order;
  // Verified ops whose blocks landed other bytes, by cookie.
  std::map<uint64_t, ChecksumMismatch> mismatched;
  void OnOpDone(const OpCompletion& c) override;
  // Landings go to their region's watchers, as the engine announces them.
  void OnLanded(Landing landing) override { PublishLanding(landing); }
};

struct Side {
  std::string name;
  std::unique_ptr<memory::RegionRegistry> regions;
  std::unique_ptr<Transport> transport;
  std::shared_ptr<Link> link;
  Recorder sink;
};

class TransportConformanceTest : public ::testing::TestWithParam<TransportFactory> {
 protected:
  void SetUp() override;

  // Polls every worker of both sides until `done` or the timeout.
  bool Pump(const std::function<bool()>& done, absl::Duration timeout = kTimeout);
  void PumpOnce();
  // Polls every worker of `side` once.
  void PumpSide(Side& side);

  std::shared_ptr<memory::Region> Register(Side& side, const std::string& name, uint64_t size,
                                           bool remote_write, std::vector<std::string> acl = {},
                                           bool remote_read = false);

  // Every 8-byte word gets a value of its own (a hash of its offset), so a
  // block that lands in another block's place shows: a short-period pattern
  // would repeat in every 4 KiB block.
  // Only [from, to) when given (large regions whose tests touch a window:
  // filling tens of MiB takes seconds unoptimized in the Soft-RoCE VM).
  static void Fill(memory::Region& region, uint8_t seed, uint64_t from = 0,
                   uint64_t to = UINT64_MAX);

  // Posts a write on `lane` of `from`, waiting for credits; returns its cookie.
  uint64_t Post(Side& from, uint32_t lane, const memory::Region& src, uint64_t src_offset,
                const RemoteRegion& dst, uint64_t dst_offset, uint32_t length,
                const LandingNotice* notice = nullptr);

  // Posts one op of `blocks` (kept until the test ends) on `lane` of `from`.
  // `checksums`: a verified op's (DataOp::checksums), one per block.
  uint64_t PostBlocks(Side& from, uint32_t lane, OpKind kind, const memory::Region& local,
                      const RemoteRegion& remote, const std::vector<Block>& blocks,
                      const LandingNotice* notice = nullptr, uint64_t* checksums = nullptr);

  // Moves every 4 KiB block of `from` to a random permutation of `to`'s
  // blocks, kMaxBlocksPerOp blocks per op, and checks every byte. A write
  // when `from` is on side a, a read (a pulls from b) otherwise.
  void MovePermuted(OpKind kind, const memory::Region& from, const memory::Region& to,
                    const RemoteRegion& remote);

  // Op k of a run of worst-case ops (see WorstCaseOpsQueueInTheLane): 64
  // blocks of 4 KiB, block j of the run starting 100 + j bytes before the
  // 16 MiB boundary on the side it is read from and 400 + j bytes before it
  // on the side it lands on, so every block crosses an MR chunk on both
  // sides at different bytes (verbs, 16 MiB chunks: three work requests per
  // block). All blocks map source to destination by one shift: they may
  // overlap. Regions of kWorstRegion bytes; the blocks stay in kWorstWindow.
  static constexpr uint64_t kWorstFrom = (16 << 20) - 100, kWorstTo = (16 << 20) - 400;
  static constexpr uint64_t kWorstRegion = 17 << 20;
  static constexpr uint64_t kWorstWindow[2] = {15 << 20, 17 << 20};
  static std::vector<Block> WorstCaseBlocks(OpKind kind, uint32_t k);

  // Every block's bytes are the same on both sides.
  static void ExpectBlocksEqual(const memory::Region& local, const memory::Region& remote,
                                const std::vector<Block>& blocks);

  // After the other end closed or died, `side` learns it: at once (TCP sees
  // the connection end), or with its next write, which fails instead of
  // hanging (RC has no keepalive: a NIC notices a dead peer when it sends).
  void ExpectPeerCannotWrite(Side& side, const RemoteRegion& to, const memory::Region& from);

  // What `owner` grants its peer for `region` (verbs binds on the pollers this thread drives).
  RemoteRegion Keys(Side& owner, const memory::Region& region);

  absl::Status WaitFor(Side& side, uint64_t cookie);

  Side a_{"a"};
  Side b_{"b"};
  uint64_t next_cookie_ = 8;
  std::deque<Block> blocks_;
  std::deque<std::vector<Block>> op_blocks_;  // each op's blocks, contiguous
};

// Refused writes fail and leave the destination alone. TCP refuses per frame
// with the precise reason and keeps the lane; an RDMA NIC reports every
// refusal as one remote access error and the queue pair breaks, which is what
// RDMA hardware does (UNAVAILABLE: a retry reconnects and resolves afresh).
void ExpectRefused(TransportConformanceTest* test, const absl::Status& status,
                   absl::StatusCode tcp_code);

}  // namespace xferd::transport::conformance
