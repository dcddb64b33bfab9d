#include "daemon/service/peer_auth.h"

#include <arpa/inet.h>
#include <grpc/grpc_security_constants.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/common/host_port.h"
#include "daemon/common/x509_names.h"

namespace xferd::service {
namespace {

std::vector<std::string> Values(const grpc::AuthContext& context, const char* property) {
  std::vector<std::string> out;
  for (const grpc::string_ref& v : context.FindPropertyValues(property)) {
    out.emplace_back(v.data(), v.size());
  }
  return out;
}

// An IP address's bytes (v4 or v6), or empty if `text` is not one.
std::string IpBytes(const std::string& text) {
  unsigned char bytes[sizeof(in6_addr)];
  if (inet_pton(AF_INET, text.c_str(), bytes) == 1) return std::string(bytes, bytes + 4);
  if (inet_pton(AF_INET6, text.c_str(), bytes) == 1) return std::string(bytes, bytes + 16);
  return "";
}

}  // namespace


std::vector<std::string> CertificateNames(const grpc::AuthContext& context) {
  std::vector<std::string> names = Values(context, GRPC_PEER_DNS_PROPERTY_NAME);
  // The CN counts only for a certificate without any subjectAltName.
  if (names.empty() && Values(context, GRPC_X509_SAN_PROPERTY_NAME).empty()) {
    names = Values(context, GRPC_X509_CN_PROPERTY_NAME);
  }
  return names;
}

bool IsUnixSocketPeer(absl::string_view peer) {
  // "fd:": a connection UnixAcceptor accepted on the unix socket, the only
  // descriptors the daemon hands to its server.
  return absl::StartsWith(peer, "unix:") || absl::StartsWith(peer, "unix-abstract:") ||
         absl::StartsWith(peer, "fd:");
}

absl::Status CheckClaimedNodeId(absl::string_view who, const std::vector<std::string>& names,
                                absl::string_view node_id) {
  if (std::find(names.begin(), names.end(), node_id) != names.end()) return absl::OkStatus();
  if (names.empty()) {
    return absl::PermissionDeniedError(
        absl::StrCat(who, " claims node id '", node_id,
                     "' but presented no certificate naming it: with mTLS every daemon needs a "
                     "certificate from tls.ca whose DNS subjectAltName is its node_id"));
  }
  return absl::PermissionDeniedError(absl::StrCat(
      who, " claims node id '", node_id, "' but its certificate names [",
      absl::StrJoin(names, ", "),
      "]: a daemon's node_id must be a DNS subjectAltName (or, without SANs, the CN) of its "
      "tls.cert"));
}

absl::Status PeerAuth::CheckCaller(const grpc::CallbackServerContext& context,
                                   absl::string_view node_id) const {
  if (IsUnixSocketPeer(context.peer())) {
    return absl::PermissionDeniedError(
        "the peer service is for daemons over the network and is refused on the unix socket: a "
        "local client cannot act as a peer");
  }
  if (!mtls_) return absl::OkStatus();  // the insecure mode, announced at start-up
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  return CheckClaimedNodeId("the caller",
                            auth ? CertificateNames(*auth) : std::vector<std::string>{}, node_id);
}

absl::Status PeerAuth::CheckCallee(const grpc::ClientContext& context, absl::string_view address,
                                   absl::string_view node_id) const {
  if (!mtls_) return absl::OkStatus();
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  return CheckClaimedNodeId(absl::StrCat("the daemon at ", address),
                            auth ? CertificateNames(*auth) : std::vector<std::string>{}, node_id);
}

absl::Status PeerAuth::CheckAdvertised(const grpc::CallbackServerContext& context,
                                       absl::string_view what, absl::string_view address) const {
  if (!mtls_ || address.empty()) return absl::OkStatus();
  absl::StatusOr<HostPort> where = ParseHostPort(address);
  if (!where.ok()) where = HostPort{std::string(address), 0};  // a bare host (a data host)
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  const std::vector<std::string> dns =
      auth ? Values(*auth, GRPC_PEER_DNS_PROPERTY_NAME) : std::vector<std::string>{};
  const std::vector<std::string> ips =
      auth ? Values(*auth, GRPC_PEER_IP_PROPERTY_NAME) : std::vector<std::string>{};
  const std::string ip = IpBytes(where->host);
  if (ip.empty()) {
    for (const std::string& name : dns) {
      if (DnsNameMatches(name, where->host)) return absl::OkStatus();
    }
  } else {
    for (const std::string& san : ips) {
      if (IpBytes(san) == ip) return absl::OkStatus();
    }
  }
  std::vector<std::string> names = dns;
  names.insert(names.end(), ips.begin(), ips.end());
  return absl::PermissionDeniedError(
      absl::StrCat("the caller advertises ", what, " '", address,
                   "' but its certificate's subjectAltNames are [", absl::StrJoin(names, ", "),
                   "]: add ", ip.empty() ? "DNS:" : "IP:", where->host,
                   " to its tls.cert, or advertise an address the certificate names"));
}

}  // namespace xferd::service
