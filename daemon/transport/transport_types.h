// Plain data exchanged between the engine and a transport, and across the
// daemon-to-daemon handshake (service/ converts these to and from protobuf).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace xferd::memory {
class Region;
class TransportRegistration;
}  // namespace xferd::memory

namespace xferd::transport {

enum class TransportKind { kTcp, kVerbs };

absl::string_view TransportKindName(TransportKind kind);

// Who is on the other end of a link.
struct PeerIdentity {
  std::string node_id;
  uint64_t incarnation = 0;
};

// One RC queue pair's endpoint (the rc_pingpong `pingpong_dest`).
struct QueuePairEndpoint {
  uint32_t qpn = 0;
  uint32_t psn = 0;
  uint16_t lid = 0;
  std::array<uint8_t, 16> gid{};
  uint8_t gid_index = 0;
  uint32_t mtu = 0;  // bytes
  // The key of this lane's slots of the notice ring when it works on this
  // queue pair only (a memory window); 0: DeviceEndpoints::notice_ring_rkey.
  uint32_t notice_rkey = 0;
};

struct TcpEndpoint {
  std::string host;
  uint16_t port = 0;
  std::string session_token;  // raw bytes
  // Whether this end reads SUMS frames (tcp_frame.h); false from a daemon
  // that predates them.
  bool sums_frames = false;
};

// Verbs: one RDMA device's share of a link: a queue pair per lane and the
// notice ring its peer writes into, registered on that device.
struct DeviceEndpoints {
  std::string name;  // "mlx5_0", for logs and errors
  // The device's position in its daemon's device list: which of the region
  // keys of a ResolveRegion answer (RemoteRegion::device_rkeys) it uses.
  uint32_t index = 0;
  // In a responder's answer: the initiator's device (its `index`) this one
  // is paired with.
  uint32_t peer_device = 0;
  // The port's signalling rate (active width x speed), Mb/s; 0 if unknown.
  // Striping weighs each device pair by the smaller of its two rates.
  uint64_t rate_mbps = 0;
  std::vector<QueuePairEndpoint> queue_pairs;  // one per lane
  uint64_t notice_ring_addr = 0;
  uint32_t notice_ring_rkey = 0;
};

// RDMA devices one link may span (hosts carry up to 8 or so): a peer's
// message naming more, or a device index beyond, is malformed.
inline constexpr uint32_t kMaxDevices = 32;

// One side's half of a link, as carried by the handshake.
struct LinkEndpoints {
  TransportKind kind = TransportKind::kTcp;
  uint32_t lanes = 0;
  // Verbs: the initiator offers every device it drives; the responder
  // answers with those it paired, each naming its partner (peer_device).
  std::vector<DeviceEndpoints> devices;
  TcpEndpoint tcp;  // tcp (responder side)
  uint32_t notice_ring_slots = 0;  // verbs, per lane of every device
  // Verbs: RDMA READs one queue pair may have outstanding as the requester,
  // and serves at once as the responder (1..255; see peer.proto).
  uint32_t max_rd_atomic = 0;
  uint32_t max_dest_rd_atomic = 0;
};

// What a writer needs to name a peer's region: learnt through ResolveRegion.
struct RemoteRegion {
  uint32_t region_id = 0;
  uint64_t size = 0;
  // Verbs: the region's first byte in the peer's address space, and its
  // remote keys. Large regions are registered as several memory regions of
  // mr_chunk_bytes each (the last may be shorter): rkeys[i] covers
  // [i * mr_chunk_bytes, (i + 1) * mr_chunk_bytes).
  uint64_t addr = 0;
  uint64_t mr_chunk_bytes = 0;
  std::vector<uint32_t> rkeys;
  // A daemon with several RDMA devices registers the region on each: the
  // keys of its devices 1, 2, ... (device 0's are `rkeys`), same chunks.
  std::vector<std::vector<uint32_t>> more_rkeys;
  // Keys bound to the lanes of one link (memory windows): each device's list
  // then holds key_lanes x chunks keys, lane-major, and lane i posts with
  // its own; a device the link does not use has none. 0: one key per chunk,
  // the same on every lane (the MRs' own keys).
  uint32_t key_lanes = 0;
  // With key_lanes: the owner's queue pair each lane's keys were bound
  // through, [device * key_lanes + lane] (0 on devices without keys). A lane
  // posts with them only while connected to that queue pair: a device pair
  // that rejoined has fresh ones, which need keys granted anew. Empty: the
  // keys work on any queue pair.
  std::vector<uint32_t> key_qpns;

  // The keys on the owner's device `device` (device_count() > device).
  const std::vector<uint32_t>& device_rkeys(uint32_t device) const {
    return device == 0 ? rkeys : more_rkeys[device - 1];
  }
  std::vector<uint32_t>& mutable_device_rkeys(uint32_t device) {
    if (device > more_rkeys.size()) more_rkeys.resize(device);
    return device == 0 ? rkeys : more_rkeys[device - 1];
  }
  uint32_t device_count() const { return 1 + static_cast<uint32_t>(more_rkeys.size()); }
  // Whether a lane to the owner's device `device` has keys to post with.
  bool has_keys(uint32_t device) const {
    return device < device_count() && !device_rkeys(device).empty();
  }
  // Whether lane `lane`, connected to the owner's queue pair `peer_qpn` on
  // its device `device`, has keys to post with.
  bool has_lane_keys(uint32_t device, uint32_t lane, uint32_t peer_qpn) const {
    if (!has_keys(device)) return false;
    return key_qpns.empty() || key_qpns[size_t{device} * key_lanes + lane] == peer_qpn;
  }
  // The keys lane `lane` posts with on device `device`, chunk i at [i]
  // (has_keys(device), and lane < key_lanes unless key_lanes is 0). O(1):
  // the data path calls it for every block.
  const uint32_t* lane_rkeys(uint32_t device, uint32_t lane) const {
    const std::vector<uint32_t>& keys = device_rkeys(device);
    return key_lanes == 0 ? keys.data() : keys.data() + lane * (keys.size() / key_lanes);
  }
};

// Sent with a write transfer's final op: the receiver raises one landed event
// for the whole transfer once everything before it has landed.
struct LandingNotice {
  uint64_t transfer_id = 0;
  // The destination span of the whole transfer, from its lowest to its
  // highest byte (a contiguous transfer: exactly its range).
  uint64_t offset = 0;
  uint64_t length = 0;
  // Blocks and payload bytes of the whole transfer (bytes <= length).
  uint64_t blocks = 0;
  uint64_t bytes = 0;
};

// One contiguous piece of a transfer: `length` bytes at `local_offset` in the
// local region and at `remote_offset` in the peer's. A write copies local to
// remote, a read remote to local.
struct Block {
  uint64_t local_offset = 0;
  uint64_t remote_offset = 0;
  uint32_t length = 0;
};
// A transfer keeps one Block per (merged, slice-split) block while it runs.
static_assert(sizeof(Block) == 24, "Block is the per-block cost of a transfer in flight");

enum class OpKind : uint8_t { kWrite, kRead };

// Blocks one op carries at most. Credits bound ops in flight per lane, so
// this bounds blocks in flight too; 64 blocks of 4 KiB fill a 256 KiB op,
// enough to amortise a TCP frame or a verbs doorbell, while a frame's block
// table (64 x 12 bytes) and a verbs chain stay small and fixed-size.
inline constexpr uint32_t kMaxBlocksPerOp = 64;

// One unit of work for a lane: up to kMaxBlocksPerOp blocks between one
// local region and one region of the peer. Everything pointed to must stay
// valid until the op's completion.
struct DataOp {
  uint64_t cookie = 0;  // returned in the completion (the engine's handle)
  OpKind kind = OpKind::kWrite;
  // The local region's first byte (a read writes into it).
  std::byte* local_base = nullptr;
  // The local region's registration with this transport (verbs: its lkeys).
  const memory::TransportRegistration* local_registration = nullptr;
  const RemoteRegion* remote = nullptr;
  const Block* blocks = nullptr;
  uint32_t block_count = 0;  // 1..kMaxBlocksPerOp
  uint32_t length = 0;       // sum of the blocks' lengths, <= kMaxSliceBytes
  // Writes only, on a transfer's final op only.
  const LandingNotice* notice = nullptr;
  // Verified by the transport (null: not): room for one checksum per block
  // (memory/checksum.h) of the source's bytes, which the transport fills in
  // before the op's completion: a write's taken as it sends the blocks, a
  // read's from the source, taken there as it sent them. The destination
  // checks its landed bytes against them and reports blocks that differ
  // (OpCompletion::mismatch). Over verbs the engine checks at the peer
  // instead and passes none.
  uint64_t* checksums = nullptr;
  // The local region itself. One whose memory can go away
  // (Region::can_lose_memory: a file region) is copied to and from with
  // guarded copies, and a transport that sees its memory fault marks it
  // (Region::MarkLost) and fails the op with that status.
  memory::Region* local_region = nullptr;
};

// A verified op whose bytes landed, but differ from their checksums in some
// blocks: how many, the first (its index in the op), and the checksum of
// that block's landed bytes (its source's is checksums[first]).
struct ChecksumMismatch {
  const uint64_t* checksums = nullptr;  // the op's DataOp::checksums
  uint32_t blocks = 0;
  uint32_t first = 0;
  uint64_t landed = 0;
};

// The end of one DataOp. `error` is null on success; otherwise it points at
// the lane's first error or the peer's refusal (valid during the callback).
struct OpCompletion {
  uint64_t cookie = 0;
  uint32_t length = 0;  // the op's DataOp::length, also when it failed
  const absl::Status* error = nullptr;
  // A verified op that moved (no error) but landed other bytes than its
  // source sent; null otherwise. Valid during the callback.
  const ChecksumMismatch* mismatch = nullptr;
};

// Largest slice a lane carries; bounds frames and work requests.
inline constexpr uint32_t kMaxSliceBytes = 16u << 20;

}  // namespace xferd::transport
