// OpenSSL objects owned by std::unique_ptr, and the steps the daemon's two
// TLS users share: the service's mTLS set-up (service/tls.cc) and the TCP
// lanes' TLS (transport/tcp/tcp_tls.cc) read PEM text and report OpenSSL's
// errors the same way. Like transport/verbs/ibv.h for libibverbs.
#pragma once

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <memory>
#include <string>

#include "absl/strings/string_view.h"

namespace xferd {

// Releases each kind of object the daemon holds (a stack of certificates
// with the certificates in it).
struct OpenSslDeleter {
  void operator()(BIO* bio) const { BIO_free(bio); }
  void operator()(X509* cert) const { X509_free(cert); }
  void operator()(STACK_OF(X509) * certs) const { sk_X509_pop_free(certs, X509_free); }
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
  void operator()(X509_STORE_CTX* ctx) const { X509_STORE_CTX_free(ctx); }
  void operator()(SSL_CTX* ctx) const { SSL_CTX_free(ctx); }
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};

using UniqueBio = std::unique_ptr<BIO, OpenSslDeleter>;
using UniqueX509 = std::unique_ptr<X509, OpenSslDeleter>;
using UniqueX509Stack = std::unique_ptr<STACK_OF(X509), OpenSslDeleter>;
using UniqueKey = std::unique_ptr<EVP_PKEY, OpenSslDeleter>;
using UniqueStoreCtx = std::unique_ptr<X509_STORE_CTX, OpenSslDeleter>;
using UniqueSslCtx = std::unique_ptr<SSL_CTX, OpenSslDeleter>;
using UniqueSsl = std::unique_ptr<SSL, OpenSslDeleter>;

// Every certificate of a PEM text, in order; an empty stack when it holds
// none. Leaves no error queued. Any thread.
UniqueX509Stack ReadCertificates(absl::string_view pem);

// The private key of a PEM text, or null, with OpenSSL's reason queued for
// OpenSslError(). Any thread.
UniqueKey ReadPrivateKey(absl::string_view pem);

// The oldest OpenSSL error queued on this thread, as text (`fallback` when
// there is none), and clears the queue so the next call starts afresh.
std::string OpenSslError(const char* fallback = "unknown OpenSSL error");

}  // namespace xferd
