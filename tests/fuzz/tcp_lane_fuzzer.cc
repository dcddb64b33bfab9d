// Fuzzes the TCP transport's receive state machine: a TcpLane attached to one
// end of a socketpair receives the fuzz input from the other end, as a
// misbehaving peer would send it, split into input-chosen chunks so frames
// arrive in pieces. The lane resolves region ids against FuzzRegions: one
// region the peer may write, one it may read, guard regions it may not.
//
// Input: byte 0 = how many of our own ops are in flight first (0-8, so the
// peer's ACK/NACK/READ_RESP frames have something to answer), byte 1 = chunk
// size of the delivery, byte 2 = which of our ops are READs (bit i: op i)
// rather than WRITEs, byte 3 = the rest's form: odd, a script of frames
// (tcp_peer_script.h: READ_RESPs for our reads, READ_REQs against regions
// with and without remote_read, ACKs, NACKs, WRITEs, raw bytes); even, the
// bytes the peer sends.
//
// Invariants: no crash or sanitizer report; writes land only inside the
// writable region and reads are served only from inside the readable one
// (the rest of their pages is poisoned, the guard regions keep their
// pattern); a READ_RESP lands only in our read's blocks (the gaps between
// them keep their pattern); every op we posted completes exactly once, by
// the peer's answer or when the lane is detached, and a read that completes
// OK has all its bytes, those a scripted peer sent.
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
#include "tests/fuzz/tcp_peer_script.h"

namespace xferd::transport::tcp {
namespace {

constexpr uint32_t kDepth = 16;
constexpr uint32_t kMaxOwnOps = 8;
constexpr uint32_t kOwnOpBytes = 100;
// A read's two blocks in our destination buffer, gaps before, between and after.
constexpr uint32_t kFirstBlock = 60;
constexpr uint32_t kGap = 16;
constexpr uint32_t kReadStride = kOwnOpBytes + 3 * kGap;
constexpr std::byte kDestPattern{0x5A};

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

// Counts completions per posted op, and which completed OK.
class CountingSink final : public CompletionSink {
 public:
  explicit CountingSink(size_t ops) : done_(ops, 0), ok_(ops, false) {}
  void OnOpDone(const OpCompletion& completion) override {
    FUZZ_CHECK(completion.cookie < done_.size());
    ++done_[completion.cookie];
    ok_[completion.cookie] = completion.error == nullptr;
    if (completion.error == nullptr) FUZZ_CHECK(completion.length == kOwnOpBytes);
  }
  // Landings go to their region's watchers, as the engine announces them.
  void OnLanded(Landing landing) override { PublishLanding(landing); }
  bool EachOnce() const {
    return std::all_of(done_.begin(), done_.end(), [](int n) { return n == 1; });
  }
  bool ok(size_t op) const { return ok_[op]; }

 private:
  std::vector<int> done_;
  std::vector<bool> ok_;
};

// Where our reads land: op i's blocks at i * kReadStride + kGap (60 bytes)
// and kGap further (40 bytes); everything else keeps kDestPattern.
std::byte* ReadDestination() {
  static std::byte dest[kMaxOwnOps * kReadStride];
  return dest;
}

bool InBlock(size_t at) {
  const size_t in_op = at % kReadStride;
  return (in_op >= kGap && in_op < kGap + kFirstBlock) ||
         (in_op >= 2 * kGap + kFirstBlock && in_op < 2 * kGap + kOwnOpBytes);
}

// The gaps kept their pattern; an OK read from a scripted peer has the
// bytes it sent, in block order.
void CheckReads(uint32_t mask, uint32_t ops, const CountingSink& sink, bool check_bytes) {
  const std::byte* dest = ReadDestination();
  for (size_t at = 0; at < kMaxOwnOps * kReadStride; ++at) {
    if (!InBlock(at) || at / kReadStride >= ops || !(mask >> (at / kReadStride) & 1)) {
      FUZZ_CHECK(dest[at] == kDestPattern);
    }
  }
  for (uint32_t i = 0; check_bytes && i < ops; ++i) {
    if (!(mask >> i & 1) || !sink.ok(i)) continue;
    size_t k = 0;
    for (size_t at = i * kReadStride; at < (i + 1) * kReadStride; ++at) {
      if (InBlock(at)) FUZZ_CHECK(dest[at] == std::byte{fuzz::ReadRespByte(i + 1, k++)});
    }
  }
}

void SetNonBlocking(int fd) {
  FUZZ_CHECK(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) == 0);
}

// What the lane sends the peer (our WRITEs and READ_REQs, its ACKs, NACKs
// and READ_RESPs), parsed frame by frame: every frame must decode, and with
// a script to check against, a READ_RESP must answer a READ_REQ the lane had
// to serve, with the readable region's bytes at its blocks.
class Outbound {
 public:
  explicit Outbound(const fuzz::PeerScript* script) : script_(script) {}

  void Drain(int fd) {
    uint8_t chunk[16384];
    ssize_t n;
    while ((n = recv(fd, chunk, sizeof chunk, 0)) > 0) buf_.insert(buf_.end(), chunk, chunk + n);
    size_t at = 0;
    while (buf_.size() - at >= kHeaderBytes) {
      FrameHeader h;
      FUZZ_CHECK(DecodeHeader(buf_.data() + at, &h).ok());
      const size_t table = size_t{h.blocks} * kBlockEntryBytes;
      size_t frame = kHeaderBytes;
      switch (h.type) {
        case FrameType::kWrite:
          frame += ((h.flags & kFlagNotice) ? kNoticeBytes : 0) + table + h.length +
                   ((h.flags & kFlagChecksums) ? h.blocks * kChecksumBytes : 0);
          break;
        case FrameType::kReadReq:
          frame += table;
          break;
        case FrameType::kAck:
        case FrameType::kMismatch:
          break;
        case FrameType::kNack:
          frame += h.length;
          break;
        case FrameType::kReadResp:  // its regions are plain memory: no verdict
          frame += h.length + ((h.flags & kFlagChecksums) ? h.blocks * kChecksumBytes : 0);
          break;
        case FrameType::kSums:
          frame += h.blocks * kChecksumBytes;
          break;
        default:
          FUZZ_CHECK(false && "the lane sent a HELLO");
      }
      if (buf_.size() - at < frame) break;
      if (h.type == FrameType::kReadResp) CheckReadResp(h, buf_.data() + at + kHeaderBytes);
      at += frame;
    }
    buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(at));
  }

 private:
  void CheckReadResp(const FrameHeader& h, const uint8_t* payload) const {
    if (script_ == nullptr) return;
    FUZZ_CHECK(h.seq >= 1 && h.seq <= script_->requests.size());
    const fuzz::PeerRequest& request = script_->requests[h.seq - 1];
    FUZZ_CHECK(request.servable_read);
    size_t k = 0;
    for (const auto& [offset, length] : request.blocks) {
      for (uint64_t i = 0; i < length; ++i, ++k) {
        FUZZ_CHECK(k < h.length && payload[k] == fuzz::FuzzRegions::ReadableByte(offset + i));
      }
    }
    FUZZ_CHECK(k == h.length);
  }

  const fuzz::PeerScript* script_;
  std::vector<uint8_t> buf_;
};

void Run(const uint8_t* data, size_t size) {
  if (size < 4) return;
  const uint32_t own_ops = data[0] % (kMaxOwnOps + 1);
  const size_t chunk = 1 + static_cast<size_t>(data[1]) * 16;
  const uint32_t reads = data[2];
  const bool scripted = data[3] & 1;
  data += 4;
  size -= 4;
  const std::vector<uint32_t> own_lengths(own_ops, kOwnOpBytes);
  fuzz::PeerScript script;
  if (scripted) {
    script = fuzz::BuildPeerScript(data, size, own_lengths);
    data = script.bytes.data();
    size = script.bytes.size();
  }

  fuzz::FuzzRegions& regions = fuzz::FuzzRegions::Get();
  int fds[2];
  FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  UniqueFd peer(fds[1]);
  SetNonBlocking(fds[0]);
  SetNonBlocking(fds[1]);

  FuzzLink link;
  TcpLane lane(link, regions.registry(), kDepth);
  lane.Attach(UniqueFd(fds[0]), /*ssl=*/nullptr, /*kernel_tls=*/false, /*worker=*/nullptr);

  // Our own ops in flight: writes from `source`, reads into ReadDestination(),
  // both against a region of the fuzzing peer.
  static std::byte source[kMaxOwnOps * kOwnOpBytes];
  std::byte* dest = ReadDestination();
  std::fill(dest, dest + kMaxOwnOps * kReadStride, kDestPattern);
  const RemoteRegion remote{7, sizeof source, 0, 0, {}};
  const LandingNotice notice{42, 0, sizeof source, own_ops, own_ops * kOwnOpBytes};
  std::vector<Block> blocks(2 * own_ops);
  std::vector<DataOp> ops(own_ops);
  for (uint32_t i = 0; i < own_ops; ++i) {
    Block* b = &blocks[2 * i];
    if (reads >> i & 1) {
      b[0] = Block{i * kReadStride + kGap, i * kOwnOpBytes, kFirstBlock};
      b[1] = Block{i * kReadStride + 2 * kGap + kFirstBlock, i * kOwnOpBytes + kFirstBlock,
                   kOwnOpBytes - kFirstBlock};
      ops[i] = DataOp{i, OpKind::kRead, dest, nullptr, &remote, b, 2, kOwnOpBytes, nullptr};
    } else {
      b[0] = Block{i * kOwnOpBytes, i * kOwnOpBytes, kOwnOpBytes};
      ops[i] = DataOp{i,       OpKind::kWrite, source,
                      nullptr, &remote,        b,
                      1,       kOwnOpBytes,    i + 1 == own_ops ? &notice : nullptr};
    }
  }
  FUZZ_CHECK(lane.Post(ops) == own_ops);

  CountingSink sink(own_ops);
  Outbound outbound(scripted && !script.raw ? &script : nullptr);
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
    outbound.Drain(peer.get());
    status = lane.OnReadable(sink, absl::MakeSpan(scratch), &events);
  }
  outbound.Drain(peer.get());  // the answers of the last round
  // Input that ends mid-frame, or a peer that closes, ends in an error.
  FUZZ_CHECK(!status.ok() || !closed);
  lane.Detach(status.ok() ? absl::CancelledError("fuzz input done") : status, sink);
  FUZZ_CHECK(sink.EachOnce());
  CheckReads(reads, own_ops, sink, scripted && !script.raw);
  regions.CheckGuards();
}

}  // namespace
}  // namespace xferd::transport::tcp

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  xferd::transport::tcp::Run(data, size);
  return 0;
}
