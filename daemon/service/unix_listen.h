// Listening unix sockets of the daemon (the gRPC socket and the local socket
// beside it) and the credentials of the clients that connect to them.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/common/unique_fd.h"

namespace xferd::service {

// A non-blocking listening socket of `type` (SOCK_STREAM, SOCK_SEQPACKET) at
// `path`, whose directory is created if missing and whose socket file left
// by a previous run is replaced, with `mode` as its permission bits: who may
// connect. UNAVAILABLE names `what` ("unix socket") and the failing call.
absl::StatusOr<UniqueFd> ListenUnix(const std::string& path, int type, uint32_t mode,
                                    const char* what);

// The peer's pid, uid and gid as the kernel recorded them at connect
// (SO_PEERCRED); nullopt if `fd` is not a connected unix socket.
std::optional<ucred> PeerCredentials(int fd);

}  // namespace xferd::service
