// Conversions between the client-facing protos (xferd/v1/xferd.proto) and the
// engine's domain types. Requests are validated here only as far as their
// shape goes (enum values, durations); meaning is checked by the engine.
#pragma once

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/common/process_stats.h"
#include "daemon/engine/engine.h"
#include "daemon/memory/landed_events.h"
#include "daemon/memory/region.h"
#include "daemon/transport/device_info.h"
#include "google/protobuf/duration.pb.h"
#include "google/protobuf/timestamp.pb.h"
#include "xferd/v1/xferd.pb.h"

namespace xferd::service {

v1::TransportKind ToProto(transport::TransportKind kind);
void ToProto(absl::Time time, google::protobuf::Timestamp* out);
void ToProto(absl::Duration duration, google::protobuf::Duration* out);
// INVALID_ARGUMENT for out-of-range or negative durations; `what` names it.
absl::StatusOr<absl::Duration> FromProto(const google::protobuf::Duration& d,
                                         absl::string_view what);
void ToProto(const absl::Status& status, v1::Error* out);

absl::StatusOr<memory::RegionSpec> FromProto(const v1::RegisterRegionRequest& request);
void ToProto(const memory::Region& region, transport::TransportKind transport, v1::Region* out);
// `ranges`: the watcher asked for the ranges of many-block transfers.
void ToProto(const memory::LandedEvent& event, const std::string& region, bool ranges,
             v1::RegionEvent* out);

void ToProto(const engine::TransferInfo& info, v1::Transfer* out);
v1::Priority ToProto(engine::Priority priority);
void ToProto(const engine::PeerInfo& info, v1::Peer* out);
// `in_use`: the port and GID the daemon's transport uses, if verbs.
void ToProto(const std::vector<transport::DeviceInfo>& devices,
             const std::vector<transport::DeviceStats>& used,
             const std::optional<transport::RdmaPortInUse>& in_use, v1::ListDevicesResponse* out);
void ToProto(const transport::DeviceStats& device, v1::DeviceStats* out);
void ToProto(const engine::EngineStats& stats, const ProcessStats& process, absl::Duration uptime,
             transport::TransportKind transport, v1::Stats* out);

}  // namespace xferd::service
