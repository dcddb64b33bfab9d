// The identity names of an X.509 certificate, by the one rule every check in
// the daemon applies (gRPC's peer checks, the TCP data lanes' TLS binding):
// its DNS subjectAltNames, or its CN when it has no subjectAltName at all;
// and how a DNS name of a certificate matches a host.
#pragma once

#include <openssl/x509.h>

#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace xferd {

// Thread-safe; `cert` is borrowed.
std::vector<std::string> X509IdentityNames(X509* cert);

// RFC 6125 matching of a DNS subjectAltName against a host: equal ignoring
// case, or a "*." SAN standing for exactly one non-empty left-most label.
bool DnsNameMatches(absl::string_view san, absl::string_view host);

}  // namespace xferd
