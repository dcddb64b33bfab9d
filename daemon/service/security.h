// The daemon's security set-up from its configuration: mTLS credentials for
// the TCP listener and the peer channels plus the peer checks when [tls] is
// configured, otherwise the explicitly insecure mode (a warning at start-up
// and in NodeInfo.security). main.cc builds it once, before serving.
#pragma once

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "daemon/common/config.h"
#include "daemon/service/peer_auth.h"

namespace xferd::service {

struct Security {
  std::shared_ptr<grpc::ServerCredentials> tcp_credentials;
  std::shared_ptr<grpc::ChannelCredentials> peer_credentials;
  PeerAuth peer_auth{/*mtls=*/false};
  // The node id: config.node_id, or with mTLS and none configured, the
  // certificate's first name; empty means "host:port" (insecure mode).
  std::string node_id;
  // With mTLS, the names tls.cert carries (DNS SANs, else CN): the identity
  // the cluster directory publishes. Empty in the insecure mode.
  std::vector<std::string> names;
  // NodeInfo.security: "mtls ..." or "insecure ...".
  std::string description;
};

// Loads and checks the [tls] files (see tls.h) or sets up the insecure mode,
// logging a warning. INVALID_ARGUMENT names the config key; with mTLS also
// when node_id is not a name of tls.cert (peers would refuse the daemon).
absl::StatusOr<Security> SetUpSecurity(const Config& config);

}  // namespace xferd::service
