// Fuzzes the TCP transport's receive state machine: a TcpLane attached to one
// end of a socketpair receives the fuzz input from the other end, as a
// misbehaving peer would send it, split into input-chosen chunks so frames
// arrive in pieces. The lane resolves region ids against FuzzRegions: one
// region the peer may write, guard regions it may not.
//
// Input: byte 0 = how many of our own WRITEs are in flight first (0-8, so the
// peer's ACK/NACK frames have something to acknowledge), byte 1 = chunk size
// of the delivery, the rest = the bytes the peer sends.
//
// Invariants: no crash or sanitizer report; writes land only inside the
// writable region (the rest of its page is poisoned, the guard regions keep
// their pattern); every write we posted completes exactly once, by the
// peer's ACK/NACK or when the lane is detached.
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "daemon/common/unique_fd.h"
#include "daemon/transport/tcp/tcp_lane.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_regions.h"

namespace xferd::transport::tcp {
namespace {

constexpr uint32_t kDepth = 16;
constexpr uint32_t kMaxOwnWrites = 8;
constexpr uint32_t kOwnWriteBytes = 100;

class FuzzLink final : public Link {
 public:
  FuzzLink() : Link(PeerIdentity{fuzz::kFuzzPeer, 1}) {}
  absl::Status Connect(const PeerIdentity&, const LinkEndpoints&, absl::Time) override {
    return absl::OkStatus();
  }
  void Close(absl::Status reason) override { MarkBroken(std::move(reason)); }
  uint32_t lane_count() const override { return 0; }
  Lane& lane(uint32_t) override { __builtin_trap(); }
  bool ready() const override { return true; }
};

// Counts completions per posted write.
class CountingSink final : public CompletionSink {
 public:
  explicit CountingSink(size_t writes) : done_(writes, 0) {}
  void OnOpDone(const OpCompletion& completion) override {
    FUZZ_CHECK(completion.cookie < done_.size());
    ++done_[completion.cookie];
  }
  bool EachOnce() const {
    return std::all_of(done_.begin(), done_.end(), [](int n) { return n == 1; });
  }

 private:
  std::vector<int> done_;
};

void SetNonBlocking(int fd) {
  FUZZ_CHECK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0);
}

// Reads and drops what the lane sent (our WRITEs, ACKs, NACKs).
void Drain(int fd) {
  char buf[16384];
  while (recv(fd, buf, sizeof buf, 0) > 0) {
  }
}

void Run(const uint8_t* data, size_t size) {
  if (size < 2) return;
  const uint32_t own_writes = data[0] % (kMaxOwnWrites + 1);
  const size_t chunk = 1 + static_cast<size_t>(data[1]) * 16;
  data += 2;
  size -= 2;

  fuzz::FuzzRegions& regions = fuzz::FuzzRegions::Get();
  int fds[2];
  FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  UniqueFd peer(fds[1]);
  SetNonBlocking(fds[0]);
  SetNonBlocking(fds[1]);

  FuzzLink link;
  TcpLane lane(link, regions.registry(), kDepth);
  lane.Attach(UniqueFd(fds[0]));

  // Our own writes in flight, to a region of the fuzzing peer.
  static std::byte source[kMaxOwnWrites * kOwnWriteBytes];
  const RemoteRegion remote{7, sizeof source, 0, 0, {}};
  const LandingNotice notice{42, 0, sizeof source, own_writes, own_writes * kOwnWriteBytes};
  std::vector<Block> blocks(own_writes);
  std::vector<DataOp> ops(own_writes);
  for (uint32_t i = 0; i < own_writes; ++i) {
    blocks[i] = Block{i * kOwnWriteBytes, i * kOwnWriteBytes, kOwnWriteBytes};
    ops[i] = DataOp{i,       OpKind::kWrite, source,
                    nullptr, &remote,        &blocks[i],
                    1,       kOwnWriteBytes, i + 1 == own_writes ? &notice : nullptr};
  }
  FUZZ_CHECK(lane.Post(ops) == own_writes);

  CountingSink sink(own_writes);
  std::vector<std::byte> scratch(64 * 1024);
  uint32_t events = 0;
  absl::Status status;
  size_t sent = 0;
  bool closed = false;
  // Every round either sends input or (after the input) ends in EOF: bounded.
  for (size_t round = 0; status.ok() && round < size + 64; ++round) {
    if (sent < size) {
      const ssize_t n = send(peer.get(), data + sent, std::min(chunk, size - sent), MSG_NOSIGNAL);
      if (n > 0) sent += static_cast<size_t>(n);
    } else if (!closed) {
      shutdown(peer.get(), SHUT_WR);
      closed = true;
    }
    Drain(peer.get());
    status = lane.OnReadable(sink, absl::MakeSpan(scratch), &events);
  }
  // Input that ends mid-frame, or a peer that closes, ends in an error.
  FUZZ_CHECK(!status.ok() || !closed);
  lane.Detach(status.ok() ? absl::CancelledError("fuzz input done") : status, sink);
  FUZZ_CHECK(sink.EachOnce());
  regions.CheckGuards();
}

}  // namespace
}  // namespace xferd::transport::tcp

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  xferd::transport::tcp::Run(data, size);
  return 0;
}
