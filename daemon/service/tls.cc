#include "daemon/service/tls.h"

#include <grpc/grpc_security_constants.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/openssl_util.h"
#include "daemon/common/x509_names.h"
#include "daemon/service/peer_auth.h"

namespace xferd::service {
namespace {

constexpr char kPeerServicePrefix[] = "/xferd.v1.PeerService/";
constexpr char kClientServicePrefix[] = "/xferd.v1.Xferd/";

absl::Status Invalid(const char* key, const std::string& path, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("config key '", key, "' (", path, "): ", why));
}

// The certificate and key belong together and can act as TLS client and server.
absl::Status CheckCertificateAndKey(const TlsConfig& tls, const TlsMaterial& m, X509* leaf) {
  UniqueKey key = ReadPrivateKey(m.key_pem);
  if (key == nullptr) {
    return Invalid("tls.key", tls.key, absl::StrCat("not a PEM private key: ", OpenSslError()));
  }
  if (X509_check_private_key(leaf, key.get()) != 1) {
    ERR_clear_error();
    return Invalid("tls.key", tls.key,
                   absl::StrCat("does not match the certificate in ", tls.cert));
  }
  // Each daemon is a TLS server to its peers and a TLS client of theirs.
  if (X509_check_purpose(leaf, X509_PURPOSE_SSL_SERVER, 0) != 1 ||
      X509_check_purpose(leaf, X509_PURPOSE_SSL_CLIENT, 0) != 1) {
    return Invalid("tls.cert", tls.cert,
                   "must allow both TLS server and client use (extendedKeyUsage serverAuth, "
                   "clientAuth, or none)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::string>> PemCertificateNames(absl::string_view pem) {
  UniqueX509Stack certs = ReadCertificates(pem);
  if (sk_X509_num(certs.get()) == 0) {
    return absl::InvalidArgumentError("no PEM certificate found");
  }
  return X509IdentityNames(sk_X509_value(certs.get(), 0));
}

absl::StatusOr<std::unique_ptr<CaVerifier>> CaVerifier::Create(absl::string_view ca_pem) {
  UniqueX509Stack cas = ReadCertificates(ca_pem);
  if (sk_X509_num(cas.get()) == 0) return absl::InvalidArgumentError("no PEM certificate found");
  X509_STORE* store = X509_STORE_new();
  for (int i = 0; i < sk_X509_num(cas.get()); ++i)
    X509_STORE_add_cert(store, sk_X509_value(cas.get(), i));
  return std::unique_ptr<CaVerifier>(new CaVerifier(store));
}

CaVerifier::~CaVerifier() { X509_STORE_free(static_cast<X509_STORE*>(store_)); }

absl::Status CaVerifier::Verify(absl::string_view leaf_pem, absl::string_view chain_pem) const {
  UniqueX509Stack leaf = ReadCertificates(leaf_pem);
  if (sk_X509_num(leaf.get()) == 0) {
    return absl::PermissionDeniedError("no certificate was presented");
  }
  UniqueX509Stack chain = ReadCertificates(chain_pem);
  UniqueStoreCtx ctx(X509_STORE_CTX_new());
  if (X509_STORE_CTX_init(ctx.get(), static_cast<X509_STORE*>(store_), sk_X509_value(leaf.get(), 0),
                          chain.get()) != 1) {
    return absl::InternalError(absl::StrCat("X509_STORE_CTX_init: ", OpenSslError()));
  }
  if (X509_verify_cert(ctx.get()) != 1) {
    const int error = X509_STORE_CTX_get_error(ctx.get());
    ERR_clear_error();
    return absl::PermissionDeniedError(X509_verify_cert_error_string(error));
  }
  return absl::OkStatus();
}

absl::StatusOr<TlsMaterial> LoadTlsMaterial(const TlsConfig& tls) {
  TlsMaterial m;
  ASSIGN_OR_RETURN(m.cert_pem, ReadKeyFile("tls.cert", tls.cert));
  ASSIGN_OR_RETURN(m.key_pem, ReadKeyFile("tls.key", tls.key));
  ASSIGN_OR_RETURN(m.ca_pem, ReadKeyFile("tls.ca", tls.ca));
  if (!tls.client_ca.empty()) {
    ASSIGN_OR_RETURN(m.client_ca_pem, ReadKeyFile("tls.client_ca", tls.client_ca));
    if (sk_X509_num(ReadCertificates(m.client_ca_pem).get()) == 0) {
      return Invalid("tls.client_ca", tls.client_ca, "no PEM certificate found");
    }
  }
  UniqueX509Stack chain = ReadCertificates(m.cert_pem);
  if (sk_X509_num(chain.get()) == 0)
    return Invalid("tls.cert", tls.cert, "no PEM certificate found");
  X509* leaf = sk_X509_value(chain.get(), 0);
  RETURN_IF_ERROR(CheckCertificateAndKey(tls, m, leaf));
  absl::StatusOr<std::unique_ptr<CaVerifier>> ca = CaVerifier::Create(m.ca_pem);
  if (!ca.ok()) return Invalid("tls.ca", tls.ca, ca.status().message());
  if (absl::Status s = (*ca)->Verify(m.cert_pem, m.cert_pem); !s.ok()) {
    return Invalid("tls.cert", tls.cert,
                   absl::StrCat("is not accepted by the CA in ", tls.ca, ": ", s.message(),
                                " (peers would refuse it)"));
  }
  m.names = X509IdentityNames(leaf);
  if (m.names.empty()) {
    return Invalid("tls.cert", tls.cert,
                   "names nobody: it needs a DNS subjectAltName (or a CN and no SANs) equal to the "
                   "daemon's node_id");
  }
  return m;
}

grpc::Status TcpCallAuthorizer::Process(const InputMetadata& auth_metadata,
                                        grpc::AuthContext* context, OutputMetadata*,
                                        OutputMetadata*) {
  auto path_it = auth_metadata.find(":path");
  if (path_it == auth_metadata.end() || context == nullptr) return grpc::Status::OK;
  const absl::string_view path(path_it->second.data(), path_it->second.size());
  if (daemon_ca_ != nullptr && absl::StartsWith(path, kPeerServicePrefix)) {
    auto first = [context](const char* property) {
      std::vector<grpc::string_ref> values = context->FindPropertyValues(property);
      return values.empty() ? std::string() : std::string(values[0].data(), values[0].size());
    };
    absl::Status s = daemon_ca_->Verify(first(GRPC_X509_PEM_CERT_PROPERTY_NAME),
                                        first(GRPC_X509_PEM_CERT_CHAIN_PROPERTY_NAME));
    if (!s.ok()) {
      return grpc::Status(
          grpc::StatusCode::PERMISSION_DENIED,
          absl::StrCat("the peer service needs a daemon certificate issued under "
                       "tls.ca; this one is not (",
                       s.message(), "): client certificates reach only the client API"));
    }
  }
  if (!allowed_clients_.empty() && absl::StartsWith(path, kClientServicePrefix)) {
    const std::vector<std::string> names = CertificateNames(*context);
    for (const std::string& name : names) {
      if (std::find(allowed_clients_.begin(), allowed_clients_.end(), name) !=
          allowed_clients_.end()) {
        return grpc::Status::OK;
      }
    }
    return grpc::Status(
        grpc::StatusCode::PERMISSION_DENIED,
        absl::StrCat("client certificate [", absl::StrJoin(names, ", "),
                     "] is not in tls.allowed_clients of this daemon: ask its operator to add "
                     "one of its names"));
  }
  return grpc::Status::OK;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MtlsServerCredentials(
    const TlsMaterial& material, const TlsConfig& tls) {
  grpc::SslServerCredentialsOptions options(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  options.pem_root_certs = material.ca_pem;
  if (!material.client_ca_pem.empty()) {
    options.pem_root_certs = absl::StrCat(material.ca_pem, "\n", material.client_ca_pem);
  }
  options.pem_key_cert_pairs.push_back({material.key_pem, material.cert_pem});
  std::shared_ptr<grpc::ServerCredentials> credentials = grpc::SslServerCredentials(options);
  std::unique_ptr<CaVerifier> daemon_ca;
  if (!material.client_ca_pem.empty()) {
    ASSIGN_OR_RETURN(daemon_ca, CaVerifier::Create(material.ca_pem));
  }
  credentials->SetAuthMetadataProcessor(
      std::make_shared<TcpCallAuthorizer>(std::move(daemon_ca), tls.allowed_clients));
  return credentials;
}

std::shared_ptr<grpc::ChannelCredentials> MtlsChannelCredentials(const TlsMaterial& material) {
  grpc::SslCredentialsOptions options;
  options.pem_root_certs = material.ca_pem;
  options.pem_private_key = material.key_pem;
  options.pem_cert_chain = material.cert_pem;
  return grpc::SslCredentials(options);
}

}  // namespace xferd::service
