// absl::Status <-> grpc::Status, with the code and message carried over.
#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace xferd::service {

grpc::Status ToGrpc(const absl::Status& status);
absl::Status FromGrpc(const grpc::Status& status);

}  // namespace xferd::service
