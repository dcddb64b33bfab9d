// The identity names of an X.509 certificate, by the one rule every check in
// the daemon applies (gRPC's peer checks, the TCP data lanes' TLS binding):
// its DNS subjectAltNames, or its CN when it has no subjectAltName at all.
#pragma once

#include <openssl/x509.h>

#include <string>
#include <vector>

namespace xferd {

// Thread-safe; `cert` is borrowed.
std::vector<std::string> X509IdentityNames(X509* cert);

}  // namespace xferd
