#include "daemon/metrics/scrape_security.h"

#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>

#include <ctime>
#include <memory>
#include <tuple>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/time.h"
#include "daemon/base/status_macros.h"

namespace xferd::metrics {
namespace {

absl::Status Invalid(absl::string_view key, const std::string& path, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "config key '", key, "'", path.empty() ? "" : absl::StrCat(" (", path, ")"), ": ", why));
}

gnutls_datum_t Datum(const std::string& text) {
  return {reinterpret_cast<unsigned char*>(const_cast<char*>(text.data())),
          static_cast<unsigned>(text.size())};
}

struct CredentialsFree {
  void operator()(gnutls_certificate_credentials_st* c) const {
    gnutls_certificate_free_credentials(c);
  }
};
struct PrivkeyFree {
  void operator()(gnutls_x509_privkey_int* k) const { gnutls_x509_privkey_deinit(k); }
};

// The certificate chain parses and its leaf is valid now.
absl::Status CheckCertificate(const std::string& pem, const std::string& path) {
  gnutls_x509_crt_t* certs = nullptr;
  unsigned count = 0;
  const gnutls_datum_t datum = Datum(pem);
  const int rc = gnutls_x509_crt_list_import2(&certs, &count, &datum, GNUTLS_X509_FMT_PEM, 0);
  if (rc < 0) {
    return Invalid("metrics.tls_cert", path,
                   absl::StrCat("not a PEM certificate: ", gnutls_strerror(rc)));
  }
  const time_t now = std::time(nullptr);
  time_t not_before = 0, not_after = 0;
  if (count > 0) {
    not_before = gnutls_x509_crt_get_activation_time(certs[0]);
    not_after = gnutls_x509_crt_get_expiration_time(certs[0]);
  }
  for (unsigned i = 0; i < count; ++i) gnutls_x509_crt_deinit(certs[i]);
  gnutls_free(certs);
  if (count == 0) return Invalid("metrics.tls_cert", path, "no PEM certificate found");
  if (now < not_before) {
    return Invalid(
        "metrics.tls_cert", path,
        absl::StrCat("is not valid before ",
                     absl::FormatTime(absl::FromTimeT(not_before), absl::UTCTimeZone())));
  }
  if (now > not_after) {
    return Invalid("metrics.tls_cert", path,
                   absl::StrCat("expired on ",
                                absl::FormatTime(absl::FromTimeT(not_after), absl::UTCTimeZone())));
  }
  return absl::OkStatus();
}

}  // namespace

// The files as GnuTLS will load them: the certificate valid now, a private
// key (unencrypted) that matches it, a client CA file with certificates in it.
absl::Status CheckScrapeTls(const ScrapeSecurity& s, const MetricsConfig& paths) {
  if (!s.tls()) {
    if (!s.key_pem.empty() || !s.client_ca_pem.empty()) {
      return Invalid("metrics.tls_cert", paths.tls_cert,
                     "is not set: HTTPS needs metrics.tls_cert and metrics.tls_key");
    }
    return absl::OkStatus();
  }
  if (s.key_pem.empty()) {
    return Invalid("metrics.tls_key", paths.tls_key,
                   "is not set: HTTPS needs metrics.tls_cert and metrics.tls_key");
  }
  RETURN_IF_ERROR(CheckCertificate(s.cert_pem, paths.tls_cert));
  gnutls_x509_privkey_t raw_key = nullptr;
  gnutls_x509_privkey_init(&raw_key);
  const std::unique_ptr<gnutls_x509_privkey_int, PrivkeyFree> key(raw_key);
  const gnutls_datum_t key_datum = Datum(s.key_pem);
  if (const int rc =
          gnutls_x509_privkey_import2(key.get(), &key_datum, GNUTLS_X509_FMT_PEM, nullptr, 0);
      rc < 0) {
    return Invalid("metrics.tls_key", paths.tls_key,
                   absl::StrCat("not an unencrypted PEM private key: ", gnutls_strerror(rc)));
  }
  gnutls_certificate_credentials_t raw_credentials = nullptr;
  gnutls_certificate_allocate_credentials(&raw_credentials);
  const std::unique_ptr<gnutls_certificate_credentials_st, CredentialsFree> credentials(
      raw_credentials);
  const gnutls_datum_t cert_datum = Datum(s.cert_pem);
  if (const int rc = gnutls_certificate_set_x509_key_mem2(
          credentials.get(), &cert_datum, &key_datum, GNUTLS_X509_FMT_PEM, nullptr, 0);
      rc < 0) {
    return Invalid(
        "metrics.tls_key", paths.tls_key,
        rc == GNUTLS_E_CERTIFICATE_KEY_MISMATCH
            ? absl::StrCat("does not match the certificate", paths.tls_cert.empty() ? "" : " in ",
                           paths.tls_cert)
            : absl::StrCat("cannot be used with the certificate: ", gnutls_strerror(rc)));
  }
  if (!s.client_ca_pem.empty()) {
    const gnutls_datum_t ca = Datum(s.client_ca_pem);
    const int n =
        gnutls_certificate_set_x509_trust_mem(credentials.get(), &ca, GNUTLS_X509_FMT_PEM);
    if (n <= 0) {
      return Invalid("metrics.tls_client_ca", paths.tls_client_ca,
                     absl::StrCat("not a PEM CA bundle: ",
                                  n < 0 ? gnutls_strerror(n) : "no certificate found"));
    }
  }
  return absl::OkStatus();
}

namespace {

// A secret from the file `key` names, without its trailing newline.
absl::StatusOr<std::string> ReadSecret(absl::string_view key, const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadKeyFile(key, path));
  std::string secret(absl::StripTrailingAsciiWhitespace(text));
  if (secret.empty()) return Invalid(key, path, "is empty");
  return secret;
}

// Equal in time independent of where they differ (and of their lengths:
// the digests are compared).
bool SecureEquals(absl::string_view a, absl::string_view b) {
  unsigned char da[32], db[32];  // SHA-256
  if (gnutls_hash_fast(GNUTLS_DIG_SHA256, a.data(), a.size(), da) < 0 ||
      gnutls_hash_fast(GNUTLS_DIG_SHA256, b.data(), b.size(), db) < 0) {
    return false;
  }
  return gnutls_memcmp(da, db, sizeof(da)) == 0;
}

}  // namespace

bool ScrapeSecurity::Accepts(const char* header) const {
  const ScrapeSecurity& security = *this;
  if (!security.auth_required()) return true;
  if (header == nullptr) return false;
  absl::string_view value = absl::StripAsciiWhitespace(header);
  const size_t space = value.find(' ');
  if (space == absl::string_view::npos) return false;
  const absl::string_view scheme = value.substr(0, space);
  const absl::string_view credentials = absl::StripLeadingAsciiWhitespace(value.substr(space));
  if (!security.bearer_token.empty() && absl::EqualsIgnoreCase(scheme, "Bearer")) {
    return SecureEquals(credentials, security.bearer_token);
  }
  std::string decoded;
  if (!security.basic_password.empty() && absl::EqualsIgnoreCase(scheme, "Basic") &&
      absl::Base64Unescape(credentials, &decoded)) {
    return SecureEquals(decoded, absl::StrCat(security.basic_user, ":", security.basic_password));
  }
  return false;
}

absl::StatusOr<ScrapeSecurity> LoadScrapeSecurity(const MetricsConfig& m) {
  ScrapeSecurity s;
  s.basic_user = m.basic_auth_user;
  if (!m.basic_auth_password_file.empty()) {
    ASSIGN_OR_RETURN(s.basic_password,
                     ReadSecret("metrics.basic_auth_password_file", m.basic_auth_password_file));
  }
  if (!m.bearer_token_file.empty()) {
    ASSIGN_OR_RETURN(s.bearer_token, ReadSecret("metrics.bearer_token_file", m.bearer_token_file));
  }
  const std::tuple<const char*, const std::string*, std::string*> pem_files[] = {
      {"metrics.tls_cert", &m.tls_cert, &s.cert_pem},
      {"metrics.tls_key", &m.tls_key, &s.key_pem},
      {"metrics.tls_client_ca", &m.tls_client_ca, &s.client_ca_pem}};
  for (const auto& [key, path, pem] : pem_files) {
    if (!path->empty()) {
      ASSIGN_OR_RETURN(*pem, ReadKeyFile(key, *path));
    }
  }
  RETURN_IF_ERROR(CheckScrapeTls(s, m));
  return s;
}

}  // namespace xferd::metrics
