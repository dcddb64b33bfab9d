#include "daemon/service/security.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/log.h"
#include "daemon/service/tls.h"

namespace xferd::service {

absl::StatusOr<Security> SetUpSecurity(const Config& config) {
  Security security;
  security.node_id = config.node_id;
  if (!config.tls.enabled()) {
    security.tcp_credentials = grpc::InsecureServerCredentials();
    security.peer_credentials = grpc::InsecureChannelCredentials();
    security.description = absl::StrCat(
        "insecure: no [tls] configured, so peers and remote clients are not authenticated and "
        "anyone who reaches ",
        config.server.listen.empty() ? "the gRPC port" : config.server.listen,
        " can act as a peer (and obtain keys) or a client; configure tls.cert, tls.key and "
        "tls.ca");
    if (!config.server.listen.empty()) spdlog::warn("{}", security.description);
    return security;
  }
  ASSIGN_OR_RETURN(TlsMaterial material, LoadTlsMaterial(config.tls));
  if (security.node_id.empty()) security.node_id = material.names.front();
  security.names = material.names;
  if (std::find(material.names.begin(), material.names.end(), security.node_id) ==
      material.names.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "config key 'node_id' is '", security.node_id, "', which tls.cert (", config.tls.cert,
        ") does not name (its names: ", absl::StrJoin(material.names, ", "),
        "): peers would refuse this daemon; use one of those names or a certificate with DNS "
        "subjectAltName '",
        security.node_id, "'"));
  }
  ASSIGN_OR_RETURN(security.tcp_credentials, MtlsServerCredentials(material, config.tls));
  security.peer_credentials = MtlsChannelCredentials(material);
  security.peer_auth = PeerAuth(/*mtls=*/true);
  security.description =
      absl::StrCat("mtls: peers and remote clients need a certificate from tls.ca",
                   config.tls.client_ca.empty() ? "" : " (clients: or tls.client_ca)",
                   config.tls.allowed_clients.empty()
                       ? ""
                       : absl::StrCat("; client API over TCP only for ",
                                      absl::StrJoin(config.tls.allowed_clients, ", ")),
                   "; this daemon's certificate names ", absl::StrJoin(material.names, ", "),
                   TcpEncrypted(config)
                       ? "; TCP data lanes use TLS 1.3 with this certificate (RDMA traffic is "
                         "not encrypted)"
                       : "; the data plane is not encrypted (transport.tcp_encryption = \"off\")");
  spdlog::info("{}", security.description);
  return security;
}

}  // namespace xferd::service
