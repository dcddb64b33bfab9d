// Who is calling: the identity checks of the peer service. A PeerService call
// must come over the network (never the unix socket, where any local client
// could pose as a daemon and obtain keys) and, with mTLS, from a certificate
// naming the node id the call claims. The initiator of a handshake checks the
// callee the same way. Stateless and thread-safe.
#pragma once

#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace xferd::service {

// The identity names of the certificate the other side presented: its DNS
// SANs, or its CN without SANs. Empty without TLS.
std::vector<std::string> CertificateNames(const grpc::AuthContext& context);

// True if `peer` (grpc::ServerContext::peer()) is a unix-socket connection:
// gRPC's own unix listener's, or one UnixAcceptor handed over ("fd:N").
bool IsUnixSocketPeer(absl::string_view peer);

// OK if `node_id` is one of `names`; else PERMISSION_DENIED saying who
// (`who`, e.g. "the caller") claimed what and which names its certificate has.
absl::Status CheckClaimedNodeId(absl::string_view who, const std::vector<std::string>& names,
                                absl::string_view node_id);

class PeerAuth {
 public:
  // mtls: peers authenticate with certificates; false: the insecure mode.
  explicit PeerAuth(bool mtls) : mtls_(mtls) {}
  bool mtls() const { return mtls_; }

  // First thing in every PeerService handler, with the node id the request
  // claims. PERMISSION_DENIED on the unix socket, or (mTLS) when the
  // certificate does not name `node_id`.
  absl::Status CheckCaller(const grpc::CallbackServerContext& context,
                           absl::string_view node_id) const;

  // A Handshake's caller (mTLS): the host of every address it advertises
  // (`what`, e.g. "gRPC address") must be a DNS or IP subjectAltName of its
  // certificate, as daemons calling it there will verify. Checked up front
  // so a wrong address fails the handshake, naming it, instead of a later
  // call back; and so no daemon can point peers at a host not its own.
  absl::Status CheckAdvertised(const grpc::CallbackServerContext& context, absl::string_view what,
                               absl::string_view address) const;

  // After a Handshake reply (mTLS): the callee at `address` must present a
  // certificate naming the node id it answered with. PERMISSION_DENIED if not.
  absl::Status CheckCallee(const grpc::ClientContext& context, absl::string_view address,
                           absl::string_view node_id) const;

 private:
  bool mtls_;
};

}  // namespace xferd::service
