// Conversions of many-block requests between protobuf and the engine: packed
// little-endian arrays (Blocks, LayoutBlocks, PrepareLayoutRequest) into
// engine::BlockSpec and engine::Layout, ReadRequest into a read spec. Shape
// errors name the field; the engine checks meaning (ranges, overlap).
#pragma once

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/engine/block_spec.h"
#include "daemon/engine/transfer.h"
#include "xferd/v1/xferd.pb.h"

namespace xferd::service {

// INVALID_ARGUMENT when a packed field is not a whole number of integers
// (naming the field) or no form is set.
absl::StatusOr<engine::BlockSpec> FromProto(const v1::Blocks& blocks);
// A write (src local, dst on the peer) or a read (src on the peer, dst
// local), with or without blocks. INVALID_ARGUMENT names what is missing.
absl::StatusOr<engine::TransferSpec> FromProto(const v1::WriteRequest& request);
absl::StatusOr<engine::TransferSpec> FromProto(const v1::ReadRequest& request);
// A Write's or Read's transfer, and how long its reply may wait for the
// transfer's end once it is queued: forever with wait, else the request's
// linger (0 to 1 s; INVALID_ARGUMENT outside that, or with wait as well).
struct Submission {
  engine::TransferSpec spec;
  absl::Duration linger;
};
absl::StatusOr<Submission> SubmissionFromProto(const v1::WriteRequest& request);
absl::StatusOr<Submission> SubmissionFromProto(const v1::ReadRequest& request);
absl::StatusOr<engine::Layout> FromProto(const v1::PrepareLayoutRequest& request);
void ToProto(const engine::Layout& layout, v1::Layout* out);

}  // namespace xferd::service
