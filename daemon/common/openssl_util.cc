#include "daemon/common/openssl_util.h"

#include <openssl/err.h>
#include <openssl/pem.h>

namespace xferd {
namespace {

// A read-only BIO over `text`, which must outlive it.
UniqueBio MemBio(absl::string_view text) {
  return UniqueBio(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

}  // namespace

UniqueX509Stack ReadCertificates(absl::string_view pem) {
  UniqueX509Stack certs(sk_X509_new_null());
  UniqueBio bio = MemBio(pem);
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr)) {
    sk_X509_push(certs.get(), cert);
  }
  ERR_clear_error();  // the read that ended the loop left "no start line"
  return certs;
}

UniqueKey ReadPrivateKey(absl::string_view pem) {
  UniqueBio bio = MemBio(pem);
  return UniqueKey(PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr));
}

std::string OpenSslError(const char* fallback) {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return fallback;
  char text[256];
  ERR_error_string_n(code, text, sizeof(text));
  return text;
}

}  // namespace xferd
