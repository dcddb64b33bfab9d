// The client's side of the daemon's local socket (proto/xferd/v1/local.proto,
// docs/local-socket.md): connecting to it, and one request with its reply and
// the descriptors the reply hands over (SCM_RIGHTS). Used by the request rings
// (local_rings.h) and SHM regions' mappings (shm_region.h).
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "xferd/v1/local.pb.h"

namespace xferd::client {

// The local socket beside the unix socket of gRPC target `target`
// ("unix:/run/xferd/xferd.sock" -> "/run/xferd/xferd.sock.local"); empty for
// a target that is not a unix socket (no local socket reaches that daemon).
std::string LocalSocketFor(const std::string& target);

// A connected SOCK_SEQPACKET socket (close-on-exec) the caller closes.
// UNAVAILABLE when nothing listens at `path`, INVALID_ARGUMENT when the path
// is too long for a unix socket.
absl::StatusOr<int> ConnectLocalSocket(const std::string& path);

// Sends `request` on `socket` and reads its reply; the descriptors attached
// to the reply are appended to `fds` (the caller's to close), also when the
// reply is an error, which comes back as its status. UNAVAILABLE when the
// socket fails or the daemon closed it. One exchange at a time per socket.
absl::StatusOr<v1::LocalReply> LocalExchange(int socket, const v1::LocalRequest& request,
                                             std::vector<int>* fds);

}  // namespace xferd::client
