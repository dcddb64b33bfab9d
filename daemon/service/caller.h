// Who is calling the client API, and so which tenant a call acts for
// (docs/tenants.md): a local client by its unix socket's credentials (the
// connection UnixAcceptor handed to gRPC), a client over TCP by the names of
// its mTLS certificate, anyone else as the default tenant.
#pragma once

#include <grpcpp/grpcpp.h>
#include <sys/socket.h>

#include <optional>

#include "absl/strings/string_view.h"
#include "daemon/engine/tenants.h"

namespace xferd::service {

// The credentials of a unix-socket caller whose peer string is "fd:N";
// nullopt for any other peer.
std::optional<ucred> UnixCallerCredentials(absl::string_view peer);

// The tenant `context`'s call acts for. Any gRPC thread, while the call runs.
const engine::Tenant& CallerTenant(const grpc::ServerContextBase& context,
                                   const engine::Tenants& tenants);

}  // namespace xferd::service
