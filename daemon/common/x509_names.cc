#include "daemon/common/x509_names.h"

#include <openssl/x509v3.h>

#include "absl/strings/match.h"

namespace xferd {

std::vector<std::string> X509IdentityNames(X509* cert) {
  std::vector<std::string> names;
  auto* sans =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(cert, NID_subject_alt_name, nullptr, nullptr));
  if (sans != nullptr) {
    for (int i = 0; i < sk_GENERAL_NAME_num(sans); ++i) {
      const GENERAL_NAME* san = sk_GENERAL_NAME_value(sans, i);
      if (san->type != GEN_DNS) continue;
      const ASN1_STRING* dns = san->d.dNSName;
      names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(dns)),
                         ASN1_STRING_length(dns));
    }
    GENERAL_NAMES_free(sans);
    return names;  // SANs present: the CN does not count (as in gRPC and RFC 6125)
  }
  X509_NAME* subject = X509_get_subject_name(cert);
  const int index = X509_NAME_get_index_by_NID(subject, NID_commonName, -1);
  if (index >= 0) {
    const ASN1_STRING* cn = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(subject, index));
    names.emplace_back(reinterpret_cast<const char*>(ASN1_STRING_get0_data(cn)),
                       ASN1_STRING_length(cn));
  }
  return names;
}

bool DnsNameMatches(absl::string_view san, absl::string_view host) {
  if (absl::EqualsIgnoreCase(san, host)) return true;
  if (!absl::StartsWith(san, "*.")) return false;
  const size_t dot = host.find('.');
  return dot != absl::string_view::npos && dot > 0 &&
         absl::EqualsIgnoreCase(san.substr(1), host.substr(dot));
}

}  // namespace xferd
