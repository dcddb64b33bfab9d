// Conversions for the daemon-to-daemon protos (xferd/v1/peer.proto). What a
// peer sends is untrusted: what the domain types cannot hold is refused here;
// what a transport can take is its own check (Transport::CheckEndpoints).
#pragma once

#include "absl/status/statusor.h"
#include "daemon/engine/peer_rpc.h"
#include "xferd/v1/peer.pb.h"

namespace xferd::service {

// Lanes a peer may offer; more is a malformed handshake.
inline constexpr uint32_t kMaxLanes = 256;

void ToProto(const engine::NodeIdentity& node, v1::NodeIdentity* out);
engine::NodeIdentity FromProto(const v1::NodeIdentity& node);

void ToProto(const transport::LinkEndpoints& endpoints, v1::LinkEndpoints* out);
// INVALID_ARGUMENT for malformed endpoints (the transport, the lane count,
// fields of the other transport, GID sizes, a port).
absl::StatusOr<transport::LinkEndpoints> FromProto(const v1::LinkEndpoints& endpoints);

absl::StatusOr<engine::HandshakeMessage> FromProto(const v1::NodeIdentity& node,
                                                   const v1::LinkEndpoints& endpoints);

void ToProto(const transport::LandingNotice& notice, v1::LandingNotice* out);
transport::LandingNotice FromProto(const v1::LandingNotice& notice);

void ToProto(const engine::ResolvedRegion& region, v1::ResolveRegionResponse* out);
engine::ResolvedRegion FromProto(const v1::ResolveRegionResponse& response);

}  // namespace xferd::service
