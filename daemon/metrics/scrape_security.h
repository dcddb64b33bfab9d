// Who may scrape the metrics endpoint, and over what: the HTTPS material
// (checked as GnuTLS, the server's TLS library, will load it) and the
// credentials a scrape must carry (HTTP basic auth, bearer tokens), compared
// in constant time. Loaded once at start-up and by --check-config.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "daemon/common/config.h"

namespace xferd::metrics {

// Empty fields: that part is off; with none set, anyone who reaches the
// address may, over plain HTTP (bind it to a trusted interface).
struct ScrapeSecurity {
  // HTTP basic auth, and/or a bearer token: a scrape must carry one of them.
  std::string basic_user;
  std::string basic_password;
  std::string bearer_token;
  // HTTPS: this certificate (PEM, leaf first, then intermediates) and its
  // key. With client_ca_pem too, the TLS handshake requires a client
  // certificate that a CA in it signed.
  std::string cert_pem;
  std::string key_pem;
  std::string client_ca_pem;

  bool auth_required() const { return !basic_password.empty() || !bearer_token.empty(); }
  bool tls() const { return !cert_pem.empty(); }
  // Whether an Authorization header (null: none) carries credentials this
  // accepts: "Basic base64(user:password)" or "Bearer token". True when no
  // credentials are required. Any thread.
  bool Accepts(const char* authorization) const;
};

// The secrets and PEM files `config` names, read and checked (the key matches
// the certificate, which is valid now; the client CA file holds
// certificates), so bad files fail at start-up and in --check-config, not at
// the first scrape. Errors are INVALID_ARGUMENT and name the key.
absl::StatusOr<ScrapeSecurity> LoadScrapeSecurity(const MetricsConfig& config);

// The checks of LoadScrapeSecurity on material already in memory; `paths`
// names the files in errors (empty: none named).
absl::Status CheckScrapeTls(const ScrapeSecurity& security, const MetricsConfig& paths);

}  // namespace xferd::metrics
