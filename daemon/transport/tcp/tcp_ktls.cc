#include "daemon/transport/tcp/tcp_ktls.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/kdf.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace xferd::transport::tcp {
namespace {

// TLS 1.3 cipher suites the kernel path takes (RFC 8446 B.4).
constexpr uint16_t kAes128GcmSha256 = 0x1301;
constexpr uint16_t kAes256GcmSha384 = 0x1302;
// TLS content types and handshake messages (RFC 8446 B.1, B.3).
constexpr uint8_t kAlert = 21;
constexpr uint8_t kHandshake = 22;
constexpr uint8_t kNewSessionTicket = 4;
constexpr uint8_t kKeyUpdate = 24;

// What a tracked session records until the switch.
struct Tracking {
  uint8_t secret[EVP_MAX_MD_SIZE];
  size_t secret_len = 0;
  bool peer_finished = false;   // records after this are under the secret
  bool post_handshake = false;  // a handshake message after the Finished
  uint64_t records = 0;         // records read after the peer's Finished
};

void FreeTracking(void*, void* ptr, CRYPTO_EX_DATA*, int, long, void*) {
  if (ptr == nullptr) return;
  OPENSSL_cleanse(ptr, sizeof(Tracking));
  delete static_cast<Tracking*>(ptr);
}

int TrackingIndex() {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, &FreeTracking);
  return index;
}

Tracking* Get(const SSL* ssl) { return static_cast<Tracking*>(SSL_get_ex_data(ssl, TrackingIndex())); }

// OpenSSL's key log: "LABEL <client random> <secret>" in hex, one line per
// secret as it is derived. Only the peer's first application traffic secret
// is kept (the one the kernel will decrypt with).
void OnKeyLog(const SSL* ssl, const char* line) {
  Tracking* t = Get(ssl);
  if (t == nullptr) return;
  const absl::string_view want =
      SSL_is_server(ssl) ? "CLIENT_TRAFFIC_SECRET_0 " : "SERVER_TRAFFIC_SECRET_0 ";
  if (std::strncmp(line, want.data(), want.size()) != 0) return;
  const char* secret = std::strrchr(line, ' ');
  size_t len = 0;
  if (secret != nullptr && OPENSSL_hexstr2buf_ex(t->secret, sizeof(t->secret), &len, secret + 1, '\0') == 1) {
    t->secret_len = len;
  }
}

// Counts the records OpenSSL reads under the peer's application key: every
// record header read after the peer's Finished (TLS 1.3 changes keys only
// at record boundaries, RFC 8446 §5.1).
void OnMessage(int write_p, int, int content_type, const void* buf, size_t len, SSL* ssl, void*) {
  Tracking* t = Get(ssl);
  if (t == nullptr || write_p != 0) return;
  if (content_type == SSL3_RT_HEADER) {
    if (t->peer_finished) ++t->records;
  } else if (content_type == SSL3_RT_HANDSHAKE && len > 0) {
    if (t->peer_finished) {
      t->post_handshake = true;
    } else if (static_cast<const uint8_t*>(buf)[0] == SSL3_MT_FINISHED) {
      t->peer_finished = true;
    }
  }
}

template <typename Info>
void Fill(Info& info, uint16_t cipher, const uint8_t* key, const uint8_t iv[12], uint64_t records) {
  info.info.version = TLS_1_3_VERSION;
  info.info.cipher_type = cipher;
  // The 12-byte TLS 1.3 IV is the kernel's salt (4 bytes) then iv (8).
  static_assert(sizeof(Info::salt) + sizeof(Info::iv) == 12);
  std::memcpy(info.salt, iv, sizeof(info.salt));
  std::memcpy(info.iv, iv + sizeof(info.salt), sizeof(info.iv));
  std::memcpy(info.key, key, sizeof(info.key));
  for (size_t i = 0; i < sizeof(info.rec_seq); ++i) {
    info.rec_seq[i] = static_cast<unsigned char>(records >> (8 * (sizeof(info.rec_seq) - 1 - i)));
  }
}

const char* AlertName(uint8_t description) {
  switch (description) {
    case 0:
      return "close_notify";
    case 10:
      return "unexpected_message";
    case 20:
      return "bad_record_mac";
    case 80:
      return "internal_error";
    case 90:
      return "user_canceled";
    default:
      return "alert";
  }
}

}  // namespace

bool KernelTlsAvailable() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  // The ULP only attaches to a connected socket: ENOTCONN says it exists,
  // ENOENT that the kernel has (and could load) no such module.
  const int rc = ::setsockopt(fd, IPPROTO_TCP, TCP_ULP, "tls", 3);
  const int error = errno;
  ::close(fd);
  return rc == 0 || error == ENOTCONN;
}

void EnableKernelReceiveTracking(SSL_CTX* ctx) { SSL_CTX_set_keylog_callback(ctx, &OnKeyLog); }

bool TrackSession(SSL* ssl) {
  auto* t = new (std::nothrow) Tracking();
  if (t == nullptr || SSL_set_ex_data(ssl, TrackingIndex(), t) != 1) {
    delete t;
    return false;
  }
  // Without read-ahead OpenSSL reads exactly the records it needs, so the
  // socket still holds everything after the HELLO when the kernel takes over.
  SSL_set_read_ahead(ssl, 0);
  SSL_set_msg_callback(ssl, &OnMessage);
  return true;
}

void StopTracking(SSL* ssl, bool openssl_keeps_reading) {
  SSL_set_msg_callback(ssl, nullptr);
  if (Tracking* t = Get(ssl)) {
    SSL_set_ex_data(ssl, TrackingIndex(), nullptr);
    FreeTracking(nullptr, t, nullptr, 0, 0, nullptr);
  }
  if (openssl_keeps_reading) SSL_set_read_ahead(ssl, 1);
}

absl::Status ExpandLabel(const char* digest, absl::Span<const uint8_t> secret,
                         absl::string_view label, absl::Span<uint8_t> out) {
  // struct HkdfLabel { uint16 length; opaque label<7..255>; opaque context<0..255>; }
  constexpr absl::string_view kPrefix = "tls13 ";
  uint8_t info[2 + 1 + 255 + 1];
  if (kPrefix.size() + label.size() > 255 || out.size() > 0xffff) {
    return absl::InvalidArgumentError("HKDF-Expand-Label: label or length too long");
  }
  size_t n = 0;
  info[n++] = static_cast<uint8_t>(out.size() >> 8);
  info[n++] = static_cast<uint8_t>(out.size());
  info[n++] = static_cast<uint8_t>(kPrefix.size() + label.size());
  std::memcpy(info + n, kPrefix.data(), kPrefix.size());
  n += kPrefix.size();
  std::memcpy(info + n, label.data(), label.size());
  n += label.size();
  info[n++] = 0;  // empty context
  EVP_KDF* kdf = EVP_KDF_fetch(nullptr, OSSL_KDF_NAME_HKDF, nullptr);
  EVP_KDF_CTX* ctx = kdf != nullptr ? EVP_KDF_CTX_new(kdf) : nullptr;
  EVP_KDF_free(kdf);
  int mode = EVP_KDF_HKDF_MODE_EXPAND_ONLY;
  const OSSL_PARAM params[] = {
      OSSL_PARAM_construct_int(OSSL_KDF_PARAM_MODE, &mode),
      OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, const_cast<char*>(digest), 0),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, const_cast<uint8_t*>(secret.data()),
                                        secret.size()),
      OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, info, n),
      OSSL_PARAM_construct_end()};
  const bool ok = ctx != nullptr && EVP_KDF_derive(ctx, out.data(), out.size(), params) == 1;
  EVP_KDF_CTX_free(ctx);
  if (!ok) return absl::InternalError("HKDF-Expand-Label: OpenSSL's HKDF refused");
  return absl::OkStatus();
}

KernelRxKey::~KernelRxKey() { OPENSSL_cleanse(&info_, sizeof(info_)); }

absl::StatusOr<KernelRxKey> KernelRxKey::FromSecret(uint16_t suite,
                                                    absl::Span<const uint8_t> secret,
                                                    uint64_t records) {
  const bool aes128 = suite == kAes128GcmSha256;
  if (!aes128 && suite != kAes256GcmSha384) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "cipher suite 0x%04x: kernel receive here takes AES-GCM-128 and -256 only", suite));
  }
  const char* digest = aes128 ? "SHA256" : "SHA384";
  const size_t key_len = aes128 ? 16 : 32;
  if (secret.size() != (aes128 ? 32u : 48u)) {
    return absl::FailedPreconditionError("the traffic secret does not fit the cipher suite");
  }
  uint8_t key[32];
  uint8_t iv[12];
  absl::Status status = ExpandLabel(digest, secret, "key", absl::MakeSpan(key, key_len));
  if (status.ok()) status = ExpandLabel(digest, secret, "iv", absl::MakeSpan(iv));
  KernelRxKey out;
  if (status.ok() && aes128) {
    Fill(out.info_.gcm128, TLS_CIPHER_AES_GCM_128, key, iv, records);
    out.size_ = sizeof(out.info_.gcm128);
  } else if (status.ok()) {
    Fill(out.info_.gcm256, TLS_CIPHER_AES_GCM_256, key, iv, records);
    out.size_ = sizeof(out.info_.gcm256);
  }
  OPENSSL_cleanse(key, sizeof(key));
  OPENSSL_cleanse(iv, sizeof(iv));
  if (!status.ok()) return status;
  return out;
}

void KernelRxKey::Nonce(uint8_t out[12]) const {
  const bool aes128 = info_.base.cipher_type == TLS_CIPHER_AES_GCM_128;
  const unsigned char* salt = aes128 ? info_.gcm128.salt : info_.gcm256.salt;
  const unsigned char* iv = aes128 ? info_.gcm128.iv : info_.gcm256.iv;
  std::memcpy(out, salt, 4);
  std::memcpy(out + 4, iv, 8);
}

absl::Span<const uint8_t> KernelRxKey::key() const {
  if (info_.base.cipher_type == TLS_CIPHER_AES_GCM_128) return info_.gcm128.key;
  return info_.gcm256.key;
}

uint64_t KernelRxKey::record_sequence() const {
  const unsigned char* seq = info_.base.cipher_type == TLS_CIPHER_AES_GCM_128
                                 ? info_.gcm128.rec_seq
                                 : info_.gcm256.rec_seq;
  uint64_t value = 0;
  for (int i = 0; i < 8; ++i) value = value << 8 | seq[i];
  return value;
}

absl::StatusOr<KernelRxKey> PeerTrafficKey(SSL* ssl) {
  const Tracking* t = Get(ssl);
  if (t == nullptr) return absl::FailedPreconditionError("the session was not prepared for it");
  if (SSL_version(ssl) != TLS1_3_VERSION) return absl::FailedPreconditionError("not TLS 1.3");
  if (!t->peer_finished || t->secret_len == 0) {
    return absl::FailedPreconditionError("OpenSSL logged no traffic secret of the peer");
  }
  if (t->post_handshake) {
    return absl::FailedPreconditionError(
        "the peer sent a post-handshake message (session ticket or key update)");
  }
  // Bytes OpenSSL holds (decrypted, or read but not yet a whole record)
  // would be lost to the kernel and its record count would be wrong.
  if (SSL_has_pending(ssl) != 0 || std::strcmp(SSL_rstate_string(ssl), "RH") != 0) {
    return absl::FailedPreconditionError("OpenSSL holds bytes read beyond the HELLO");
  }
  const uint16_t suite = SSL_CIPHER_get_protocol_id(SSL_get_current_cipher(ssl));
  return KernelRxKey::FromSecret(suite, absl::MakeConstSpan(t->secret, t->secret_len), t->records);
}

absl::Status InstallKernelReceive(int fd, const KernelRxKey& key) {
  if (::setsockopt(fd, SOL_TLS, TLS_RX, key.data(), key.size()) != 0) {
    return absl::UnavailableError(absl::StrCat("setsockopt(TLS_RX): ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

std::string DescribeNonDataRecord(int fd) {
  uint8_t body[64];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(uint8_t))];
  iovec iov{body, sizeof(body)};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof(control);
  const ssize_t n = ::recvmsg(fd, &msg, MSG_DONTWAIT);
  if (n < 0) return absl::StrCat("kernel TLS receive failed: ", std::strerror(errno));
  if (n == 0) return "the peer closed the connection";
  int type = -1;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level == SOL_TLS && c->cmsg_type == TLS_GET_RECORD_TYPE) type = *CMSG_DATA(c);
  }
  if (type == kAlert && n >= 2) {
    return absl::StrCat("the peer sent a TLS alert (", AlertName(body[1]), ", level ", body[0],
                        " description ", body[1], ")");
  }
  if (type == kHandshake && n >= 1 && body[0] == kKeyUpdate) {
    return "the peer sent a TLS KeyUpdate, which a lane on kernel TLS receive cannot follow";
  }
  if (type == kHandshake && n >= 1) {
    return absl::StrCat("the peer sent a post-handshake TLS message (type ", body[0],
                        body[0] == kNewSessionTicket ? ", NewSessionTicket" : "", ")");
  }
  if (type < 0) return "kernel TLS receive failed: Input/output error";
  return absl::StrCat("the peer sent a TLS record of content type ", type, ", not data");
}

}  // namespace xferd::transport::tcp
