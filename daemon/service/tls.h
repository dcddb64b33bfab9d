// mTLS material of the daemon: the [tls] files loaded and checked once at
// start-up with OpenSSL (key matches certificate, certificate chains to the
// CA, its names), and the gRPC credentials built from them. Errors name the
// config key and the fix, so a bad deployment fails before serving.
#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/auth_metadata_processor.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/common/config.h"

namespace xferd::service {

struct TlsMaterial {
  std::string cert_pem;       // this daemon's certificate chain (leaf first)
  std::string key_pem;        // its private key
  std::string ca_pem;         // CA bundle of daemon certificates
  std::string client_ca_pem;  // CA bundle of remote clients' certificates ("" = ca_pem)
  // The certificate's identity names: its DNS SANs, or its CN if it has no
  // SAN at all (the same rule the peers apply to it).
  std::vector<std::string> names;
};

// Reads and checks tls.cert, tls.key, tls.ca (and tls.client_ca). Errors:
// INVALID_ARGUMENT naming the key (unreadable, not PEM, key does not match,
// certificate not issued by tls.ca, expired, not usable for both TLS client
// and server).
absl::StatusOr<TlsMaterial> LoadTlsMaterial(const TlsConfig& tls);

// The identity names of the first certificate in `pem` (DNS SANs, else CN).
// INVALID_ARGUMENT if it is not a PEM certificate.
absl::StatusOr<std::vector<std::string>> PemCertificateNames(absl::string_view pem);

// Checks that certificate `leaf_pem` (with intermediates in `chain_pem`,
// may be empty) was issued under the CAs in `ca_pem`. Thread-safe.
class CaVerifier {
 public:
  static absl::StatusOr<std::unique_ptr<CaVerifier>> Create(absl::string_view ca_pem);
  ~CaVerifier();
  // PERMISSION_DENIED with OpenSSL's reason if it was not.
  absl::Status Verify(absl::string_view leaf_pem, absl::string_view chain_pem) const;

 private:
  explicit CaVerifier(void* store) : store_(store) {}
  void* store_;  // X509_STORE*, kept out of this header
};

// Who may make which call on the TLS listener, decided from the connection's
// certificate before any handler runs (so a new RPC cannot skip it):
// - PeerService: with a separate client_ca, only certificates of tls.ca;
// - the client API (xferd.v1.Xferd): with allowed_clients, only those names.
// Node-id binding of PeerService needs the request and is done there.
class TcpCallAuthorizer final : public grpc::AuthMetadataProcessor {
 public:
  TcpCallAuthorizer(std::unique_ptr<CaVerifier> daemon_ca, std::vector<std::string> allowed_clients)
      : daemon_ca_(std::move(daemon_ca)), allowed_clients_(std::move(allowed_clients)) {}
  ~TcpCallAuthorizer() override = default;

  // In-memory checks only: run inline on gRPC's thread.
  bool IsBlocking() const override { return false; }
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  const std::unique_ptr<CaVerifier> daemon_ca_;  // null: every verified certificate
  const std::vector<std::string> allowed_clients_;
};

// The TCP listener's credentials: TLS that requires and verifies a client
// certificate from tls.ca (or tls.client_ca), with TcpCallAuthorizer.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MtlsServerCredentials(
    const TlsMaterial& material, const TlsConfig& tls);

// Peer channels: TLS presenting this daemon's certificate, verifying the
// callee against tls.ca and the host of the address dialed.
std::shared_ptr<grpc::ChannelCredentials> MtlsChannelCredentials(const TlsMaterial& material);

}  // namespace xferd::service
