// Conversions for the daemon-to-daemon protos (xferd/v1/peer.proto). What a
// peer sends is untrusted: sizes and counts are checked before use.
#pragma once

#include "absl/status/statusor.h"
#include "daemon/engine/peer_rpc.h"
#include "xferd/v1/peer.pb.h"

namespace xferd::service {

// Lanes a peer may offer; more is a malformed handshake.
inline constexpr uint32_t kMaxLanes = 256;
// RDMA devices a handshake may offer (hosts carry up to 8 or so).
inline constexpr uint32_t kMaxDevices = 32;

void ToProto(const engine::NodeIdentity& node, v1::NodeIdentity* out);
engine::NodeIdentity FromProto(const v1::NodeIdentity& node);

void ToProto(const transport::LinkEndpoints& endpoints, v1::LinkEndpoints* out);
// INVALID_ARGUMENT for malformed endpoints (counts, GID sizes, MTU, port).
absl::StatusOr<transport::LinkEndpoints> FromProto(const v1::LinkEndpoints& endpoints);

absl::StatusOr<engine::HandshakeMessage> FromProto(const v1::NodeIdentity& node,
                                                   const v1::LinkEndpoints& endpoints);

void ToProto(const engine::ResolvedRegion& region, v1::ResolveRegionResponse* out);
engine::ResolvedRegion FromProto(const v1::ResolveRegionResponse& response);

}  // namespace xferd::service
