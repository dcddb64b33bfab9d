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
};

struct TcpEndpoint {
  std::string host;
  uint16_t port = 0;
  std::string session_token;  // raw bytes
};

// One side's half of a link, as carried by the handshake.
struct LinkEndpoints {
  TransportKind kind = TransportKind::kTcp;
  uint32_t lanes = 0;
  std::vector<QueuePairEndpoint> queue_pairs;  // verbs
  TcpEndpoint tcp;                             // tcp (responder side)
  uint64_t notice_ring_addr = 0;               // verbs
  uint32_t notice_ring_rkey = 0;
  uint32_t notice_ring_slots = 0;
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
};

// Sent with a transfer's final slice: the receiver raises a landed event for
// the whole destination range once everything before it has landed.
struct LandingNotice {
  uint64_t transfer_id = 0;
  uint64_t offset = 0;  // destination range of the whole transfer
  uint64_t length = 0;
};

// One slice to write. Pointers must stay valid until its completion.
struct WriteOp {
  uint64_t cookie = 0;  // returned in the completion (the engine's handle)
  const std::byte* src = nullptr;
  // The source region's registration with this transport (verbs: its lkeys).
  const memory::TransportRegistration* src_registration = nullptr;
  const RemoteRegion* dst = nullptr;
  uint64_t dst_offset = 0;
  uint32_t length = 0;
  const LandingNotice* notice = nullptr;  // set on a transfer's final slice only
};

// The end of one WriteOp. `error` is null on success; otherwise it points at
// the lane's first error (valid during the callback only).
struct WriteCompletion {
  uint64_t cookie = 0;
  uint32_t length = 0;
  const absl::Status* error = nullptr;
};

// The RDMA port and GID a verbs transport uses.
struct RdmaPortInUse {
  std::string device;
  uint32_t port = 0;
  uint32_t gid_index = 0;
};

struct TransportStats {
  uint32_t lanes = 0;
  uint32_t memory_registrations = 0;
};

// Largest slice a lane carries; bounds frames and work requests.
inline constexpr uint32_t kMaxSliceBytes = 16u << 20;

}  // namespace xferd::transport
