#include "daemon/service/caller.h"

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "daemon/service/peer_auth.h"
#include "daemon/service/unix_listen.h"

namespace xferd::service {

std::optional<ucred> UnixCallerCredentials(absl::string_view peer) {
  int fd = -1;
  if (!absl::ConsumePrefix(&peer, "fd:") || !absl::SimpleAtoi(peer, &fd) || fd < 0) {
    return std::nullopt;
  }
  return PeerCredentials(fd);
}

const engine::Tenant& CallerTenant(const grpc::ServerContextBase& context,
                                   const engine::Tenants& tenants) {
  if (!tenants.configured()) return tenants.Default();
  const std::string peer = context.peer();
  if (std::optional<ucred> cred = UnixCallerCredentials(peer)) {
    return tenants.ForCredentials(cred->uid, cred->gid);
  }
  if (IsUnixSocketPeer(peer)) return tenants.Default();
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return tenants.Default();
  return tenants.ForCertificate(CertificateNames(*auth));
}

}  // namespace xferd::service
