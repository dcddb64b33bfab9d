// The daemon-to-daemon calls the engine makes, as an interface: service/
// implements it with gRPC stubs (the only place that knows protobuf), tests
// may implement it in memory. Calls block up to their deadline; the engine
// makes them from its control executor, never from gRPC or poller threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/memory/region.h"
#include "daemon/transport/transport_types.h"

namespace xferd::engine {

// A daemon as its peers know it.
struct NodeIdentity {
  std::string node_id;
  uint64_t incarnation = 0;
  std::string address;  // where its gRPC service is reachable
};

struct HandshakeMessage {
  NodeIdentity node;
  transport::LinkEndpoints endpoints;
  // The sender's random id for the link: its peer names it when resolving
  // regions, so keys bound to this link are never asked for on another.
  uint64_t link_id = 0;
};

// What ResolveRegion returns: the key a write names, and the region's access.
struct ResolvedRegion {
  transport::RemoteRegion key;
  memory::Access access;
  // The region keeps many-block writes' ranges: send them (StageRanges).
  bool landed_ranges = false;
};

// One StageRanges call: a chunk of a write's destination ranges.
struct StagedRanges {
  uint32_t region_id = 0;
  std::string region;
  uint64_t transfer_id = 0;
  bool first = true;  // starts the list; later chunks append
  std::string offsets, lengths;  // packed little-endian uint64, as many of each
};

// One ChecksumBlocks call: blocks of the callee's region to checksum
// (docs/integrity.md), and what to compare them with.
struct ChecksumQuery {
  uint32_t region_id = 0;
  std::string region;
  std::string offsets;   // packed little-endian uint64 per block
  std::string lengths;   // packed little-endian uint32 per block
  std::string expected;  // packed uint64 per block, or empty
  // With expected: the write's landing, raised when no block differs.
  std::optional<transport::LandingNotice> notice;
};

// Blocks and bytes one ChecksumBlocks call covers at most: a reply of
// 512 KiB, and a quarter of a second's work for the callee's CPU.
inline constexpr uint32_t kChecksumBlocksPerCall = 65536;
inline constexpr uint64_t kChecksumBytesPerCall = 256 << 20;

class PeerRpc {
 public:
  virtual ~PeerRpc() = default;
  // Errors carry the callee's status (FAILED_PRECONDITION for mismatches) or
  // UNAVAILABLE / DEADLINE_EXCEEDED for transport failures.
  virtual absl::StatusOr<HandshakeMessage> Handshake(const std::string& address,
                                                     const HandshakeMessage& request,
                                                     absl::Time deadline) = 0;
  // `link_id`: the callee's id of the link the keys are for.
  virtual absl::StatusOr<ResolvedRegion> ResolveRegion(const std::string& address,
                                                       const NodeIdentity& self, uint64_t link_id,
                                                       const std::string& region,
                                                       absl::Time deadline) = 0;
  virtual absl::Status InvalidateRegion(const std::string& address, const NodeIdentity& self,
                                        uint32_t region_id, const std::string& region,
                                        absl::Time deadline) = 0;
  virtual absl::Status Goodbye(const std::string& address, const NodeIdentity& self,
                               const std::string& reason, absl::Time deadline) = 0;
  virtual absl::Status StageRanges(const std::string& address, const NodeIdentity& self,
                                   const StagedRanges& ranges, absl::Time deadline) = 0;
  // The callee's checksums of the query's blocks, packed (uint64 each).
  virtual absl::StatusOr<std::string> ChecksumBlocks(const std::string& address,
                                                     const NodeIdentity& self,
                                                     const ChecksumQuery& query,
                                                     absl::Time deadline) = 0;
  // A live link's broken device pairs back in service (transport::Link's
  // rejoin steps): the offer, answered with the pairs the callee took (no
  // devices: none); then the caller's devices it connected.
  virtual absl::StatusOr<transport::LinkEndpoints> RejoinDevices(
      const std::string& address, const NodeIdentity& self, const transport::LinkEndpoints& offer,
      absl::Time deadline) = 0;
  virtual absl::Status CommitRejoin(const std::string& address, const NodeIdentity& self,
                                    const std::vector<uint32_t>& devices, absl::Time deadline) = 0;
  // The callee's incarnation: whether the daemon at `address` still runs,
  // and as which process. UNAVAILABLE / DEADLINE_EXCEEDED when it does not
  // answer.
  virtual absl::StatusOr<uint64_t> Ping(const std::string& address, const NodeIdentity& self,
                                        absl::Time deadline) = 0;
};

}  // namespace xferd::engine
