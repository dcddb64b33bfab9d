// The gRPC API's writes and reads as request-ring entries, and completions as
// the gRPC API's Transfer snapshots: what lets xferd::client::Client send a
// request either way with nothing changing for its caller.
#pragma once

#include <optional>

#include "client/cpp/local_rings.h"
#include "xferd/v1/xferd.pb.h"

namespace xferd::client {

// The ring entry for `request` (the daemon's default slice size given), or
// nullopt when the ring cannot say it the same (a layout request that also
// names its regions, a slice size that is not whole KiB, a timeout beyond 49
// days, a verified request whose checksums might not fit a completion):
// then it goes over gRPC.
std::optional<RingRequest> RingWrite(const v1::WriteRequest& request, uint64_t default_slice);
std::optional<RingRequest> RingRead(const v1::ReadRequest& request, uint64_t default_slice);

// The snapshot a completion stands for, with what the request said
// (regions, offsets, label) and the daemon's transport and default slice
// size. A refusal (no transfer id) is its status instead.
absl::StatusOr<v1::Transfer> TransferOf(const RingRequest& request, const RingCompletion& done,
                                        v1::TransportKind transport, uint64_t default_slice);

}  // namespace xferd::client
