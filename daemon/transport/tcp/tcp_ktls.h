// Kernel TLS receive for TLS 1.3 data lanes. Debian 12's OpenSSL 3.0 hands
// only the send side to the kernel, so the daemon installs the receive side
// itself: OpenSSL's key log yields the peer's application traffic secret
// during the handshake, HKDF-Expand-Label (RFC 8446 §7.1, §7.3) turns it
// into key and IV, and setsockopt(SOL_TLS, TLS_RX) gives them to the kernel
// with the count of records OpenSSL already took under that key. Records
// are then decrypted by the kernel straight into the lane's buffers.
//
// The count must be exact, so a tracked session reads without read-ahead
// until the switch, and the switch is refused (the lane stays on OpenSSL)
// if anything beyond whole records is buffered in OpenSSL or the peer sent
// a post-handshake message (a KeyUpdate would have changed the key).
#pragma once

#include <linux/tls.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace xferd::transport::tcp {

// Whether this kernel has the "tls" TCP ULP. Asking may load the module, as
// OpenSSL's own setsockopt(TCP_ULP) would on the first lane.
bool KernelTlsAvailable();

// Makes `ctx` capture traffic secrets and count records of the sessions
// TrackSession marks (its other sessions are untouched).
void EnableKernelReceiveTracking(SSL_CTX* ctx);
// Marks a new session of such a context for the switch: no read-ahead, and
// its peer's traffic secret and records are recorded. False: out of memory.
bool TrackSession(SSL* ssl);
// Ends the tracking of `ssl` (after the switch, or when it is refused) and
// wipes the captured secret; read-ahead comes back if OpenSSL keeps reading.
void StopTracking(SSL* ssl, bool openssl_keeps_reading);

// HKDF-Expand-Label(secret, label, "", out.size()) with `digest` ("SHA256",
// "SHA384"), by OpenSSL's HKDF (RFC 8446 §7.1: "tls13 " prefix, empty
// context). INTERNAL if OpenSSL refuses.
absl::Status ExpandLabel(const char* digest, absl::Span<const uint8_t> secret,
                         absl::string_view label, absl::Span<uint8_t> out);

// What setsockopt(SOL_TLS, TLS_RX) takes for the peer's direction of a
// session. Wiped when destroyed: it holds the traffic key.
class KernelRxKey {
 public:
  KernelRxKey() = default;
  KernelRxKey(const KernelRxKey& other) = default;
  KernelRxKey& operator=(const KernelRxKey& other) = default;
  ~KernelRxKey();

  // From a traffic secret: `suite` is the TLS 1.3 cipher suite id (0x1301
  // AES-128-GCM-SHA256 or 0x1302 AES-256-GCM-SHA384), `records` how many
  // records were already received under it. FAILED_PRECONDITION for a suite
  // the kernel cannot take here.
  static absl::StatusOr<KernelRxKey> FromSecret(uint16_t suite, absl::Span<const uint8_t> secret,
                                                uint64_t records);

  const void* data() const { return &info_; }
  socklen_t size() const { return size_; }
  // The AEAD nonce base (salt then IV: 12 bytes), key and record sequence,
  // as the kernel will use them (tests check them against the wire).
  void Nonce(uint8_t out[12]) const;
  absl::Span<const uint8_t> key() const;
  uint64_t record_sequence() const;

 private:
  union {
    tls_crypto_info base;
    tls12_crypto_info_aes_gcm_128 gcm128;
    tls12_crypto_info_aes_gcm_256 gcm256;
  } info_{};
  socklen_t size_ = 0;
};

// The key for the peer's direction of handshaken, tracked `ssl`, with the
// exact record count; FAILED_PRECONDITION saying why the switch is refused.
absl::StatusOr<KernelRxKey> PeerTrafficKey(SSL* ssl);

// setsockopt(TLS_RX) on `fd`, whose send side OpenSSL already put in the
// kernel (so the "tls" ULP is on). UNAVAILABLE with the kernel's reason.
// TLS_RX_EXPECT_NO_PAD stays off on purpose: with it the kernel decrypts
// TLS 1.3 records optimistically into the reader's buffer, i.e. into region
// memory, before it knows the record holds data (an alert or KeyUpdate) or
// is authentic. Without it each record is decrypted in the kernel's buffer
// and copied into the region once, like the bytes of a plain lane.
absl::Status InstallKernelReceive(int fd, const KernelRxKey& key);

// Why a kernel TLS receive failed with EIO: reads the record at the head of
// `fd` with its TLS_GET_RECORD_TYPE (into a buffer of its own, never into a
// region) and says what it is: an alert (and which) or a handshake message
// such as KeyUpdate, which this path cannot follow.
std::string DescribeNonDataRecord(int fd);

}  // namespace xferd::transport::tcp
