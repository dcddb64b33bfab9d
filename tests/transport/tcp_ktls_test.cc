// Kernel TLS receive's key material, checked where no kernel TLS is needed:
// HKDF-Expand-Label against RFC 8448's trace, and, over real OpenSSL
// sessions on a socket pair, the key, IV and record count the daemon would
// give the kernel, by opening the peer's next record off the wire with them
// as the kernel would; and the refusals that keep a lane on OpenSSL.
#include "daemon/transport/tcp/tcp_ktls.h"

#include <gtest/gtest.h>
#include <openssl/evp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "daemon/transport/tcp/tcp_tls.h"
#include "tests/transport/transport_factories.h"

namespace xferd::transport::tcp {
namespace {

// RFC 8448 §3 (simple 1-RTT handshake): the application traffic secrets and
// the write keys and IVs derived from them.
constexpr char kServerSecret[] = "a11af9f05531f856ad47116b45a950328204b4f44bfb6b3a4b4f1f3fcb631643";
constexpr char kServerKey[] = "9f02283b6c9c07efc26bb9f2ac92e356";
constexpr char kServerIv[] = "cf782b88dd83549aadf1e984";
constexpr char kClientSecret[] = "9e40646ce79a7f9dc05af8889bce6552875afa0b06df0087f792ebb7c17504a5";
constexpr char kClientKey[] = "17422dda596ed5d9acd890e3c63f5051";
constexpr char kClientIv[] = "5b78923dee08579033e523d9";

std::vector<uint8_t> Bytes(const char* hex) {
  const std::string raw = absl::HexStringToBytes(hex);
  return std::vector<uint8_t>(raw.begin(), raw.end());
}

std::string Hex(absl::Span<const uint8_t> bytes) {
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

std::string Expand(const char* secret, const char* label, size_t len) {
  std::vector<uint8_t> out(len);
  EXPECT_TRUE(ExpandLabel("SHA256", Bytes(secret), label, absl::MakeSpan(out)).ok());
  return Hex(out);
}

TEST(ExpandLabelTest, MatchesRfc8448) {
  EXPECT_EQ(Expand(kServerSecret, "key", 16), kServerKey);
  EXPECT_EQ(Expand(kServerSecret, "iv", 12), kServerIv);
  EXPECT_EQ(Expand(kClientSecret, "key", 16), kClientKey);
  EXPECT_EQ(Expand(kClientSecret, "iv", 12), kClientIv);
}

TEST(KernelRxKeyTest, LaysOutKeyIvAndSequenceAsTheKernelTakesThem) {
  absl::StatusOr<KernelRxKey> key = KernelRxKey::FromSecret(0x1301, Bytes(kServerSecret), 7);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(Hex(key->key()), kServerKey);
  uint8_t nonce[12];
  key->Nonce(nonce);
  EXPECT_EQ(Hex(nonce), kServerIv);
  EXPECT_EQ(key->record_sequence(), 7u);
  ASSERT_EQ(key->size(), sizeof(tls12_crypto_info_aes_gcm_128));
  const auto* info = static_cast<const tls12_crypto_info_aes_gcm_128*>(key->data());
  EXPECT_EQ(info->info.version, TLS_1_3_VERSION);
  EXPECT_EQ(info->info.cipher_type, TLS_CIPHER_AES_GCM_128);

  const std::vector<uint8_t> secret384(48, 0x5a);
  key = KernelRxKey::FromSecret(0x1302, secret384, 0);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->size(), sizeof(tls12_crypto_info_aes_gcm_256));
  EXPECT_EQ(key->key().size(), 32u);
  // ChaCha20 is not taken here; a secret of the wrong size is refused.
  EXPECT_EQ(KernelRxKey::FromSecret(0x1303, Bytes(kServerSecret), 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(KernelRxKey::FromSecret(0x1302, Bytes(kServerSecret), 0).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(KernelTlsAvailableTest, AgreesWithTheKernelsListOfUlps) {
  const bool available = KernelTlsAvailable();  // may load the module first
  std::ifstream file("/proc/sys/net/ipv4/tcp_available_ulp");
  std::stringstream ulps;
  ulps << file.rdbuf();
  const std::string list = " " + ulps.str() + " ";
  const bool listed =
      list.find(" tls ") != std::string::npos || list.find(" tls\n") != std::string::npos;
  EXPECT_EQ(available, listed) << list;
}

bool ReadFull(int fd, void* data, size_t len) {
  auto* p = static_cast<uint8_t*>(data);
  while (len > 0) {
    const ssize_t n = ::read(fd, p, len);
    if (n <= 0) return false;
    p += n;
    len -= static_cast<size_t>(n);
  }
  return true;
}

// Reads one TLS record off `fd` and opens it as the kernel would with
// `key` as record `seq` (AES-GCM, nonce = IV xor sequence, the header as
// AAD: RFC 8446 §5.2, §5.3). Returns the inner plaintext (content, then
// the content type), or "" if it does not authenticate.
std::string OpenRecord(int fd, const KernelRxKey& key, uint64_t seq) {
  uint8_t header[5];
  if (!ReadFull(fd, header, sizeof(header))) return "";
  const size_t len = size_t{header[3]} << 8 | header[4];
  std::vector<uint8_t> body(len);
  if (len < 17 || !ReadFull(fd, body.data(), len)) return "";
  uint8_t nonce[12];
  key.Nonce(nonce);
  for (int i = 0; i < 8; ++i) nonce[4 + i] ^= static_cast<uint8_t>(seq >> (56 - 8 * i));
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  const EVP_CIPHER* cipher = key.key().size() == 16 ? EVP_aes_128_gcm() : EVP_aes_256_gcm();
  std::string out(len - 16, '\0');
  int n = 0;
  bool ok = EVP_DecryptInit_ex(ctx, cipher, nullptr, key.key().data(), nonce) == 1 &&
            EVP_DecryptUpdate(ctx, nullptr, &n, header, sizeof(header)) == 1 &&
            EVP_DecryptUpdate(ctx, reinterpret_cast<uint8_t*>(out.data()), &n, body.data(),
                              static_cast<int>(len - 16)) == 1 &&
            EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, 16, body.data() + len - 16) == 1;
  uint8_t rest[16];
  ok = ok && EVP_DecryptFinal_ex(ctx, rest, &n) == 1;
  EVP_CIPHER_CTX_free(ctx);
  return ok ? out : "";
}

// The switch is refused for `ssl`, saying `why`.
void ExpectRefused(SSL* ssl, const char* why) {
  absl::StatusOr<KernelRxKey> key = PeerTrafficKey(ssl);
  EXPECT_EQ(key.status().code(), absl::StatusCode::kFailedPrecondition);
  const std::string refused(key.status().message());
  EXPECT_NE(refused.find(why), std::string::npos) << refused;
}

// A dialer "a" and a responder "b" handshaken on a socket pair, as lanes do.
class TrackedSessionTest : public ::testing::Test {
 protected:
  void Handshake(bool kernel_receive) {
    absl::StatusOr<LaneTlsFiles> fa = TestLaneTlsFiles("a");
    absl::StatusOr<LaneTlsFiles> fb = TestLaneTlsFiles("b");
    ASSERT_TRUE(fa.ok() && fb.ok()) << fa.status() << fb.status();
    auto a = LaneTls::Create(*fa, KernelTls::kAuto, kernel_receive);
    auto b = LaneTls::Create(*fb, KernelTls::kAuto, kernel_receive);
    ASSERT_TRUE(a.ok() && b.ok());
    a_ = *std::move(a);
    b_ = *std::move(b);
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds_), 0);
    std::thread responder([&] {
      absl::StatusOr<UniqueSsl> ssl = b_->NewServerSession(fds_[1]);
      if (!ssl.ok()) return;
      std::string error;
      TlsStep step;
      do {
        step = LaneTls::Accept(ssl->get(), &error);
      } while (step == TlsStep::kWantRead || step == TlsStep::kWantWrite);
      if (step == TlsStep::kDone) server_ = *std::move(ssl);
    });
    absl::StatusOr<UniqueSsl> client = a_->Connect(fds_[0], "b", Deadline());
    responder.join();
    ASSERT_TRUE(client.ok()) << client.status();
    ASSERT_NE(server_, nullptr);
    client_ = *std::move(client);
  }
  void TearDown() override {
    client_.reset();
    server_.reset();
    for (int fd : fds_) {
      if (fd >= 0) ::close(fd);
    }
  }
  static absl::Time Deadline() { return absl::Now() + absl::Seconds(20); }
  void Send(SSL* ssl, const std::string& text) {
    ASSERT_TRUE(LaneTls::WriteExactly(ssl, text.data(), text.size(), Deadline()).ok());
  }
  std::string Receive(SSL* ssl, size_t len) {
    std::string text(len, '\0');
    EXPECT_TRUE(LaneTls::ReadExactly(ssl, text.data(), len, Deadline()).ok());
    return text;
  }

  std::unique_ptr<LaneTls> a_, b_;
  int fds_[2] = {-1, -1};
  UniqueSsl client_, server_;
};

TEST_F(TrackedSessionTest, KeyAndRecordCountOpenThePeersNextRecords) {
  Handshake(/*kernel_receive=*/true);
  Send(client_.get(), "HELLO");  // the lane's HELLO: one record
  EXPECT_EQ(Receive(server_.get(), 5), "HELLO");
  absl::StatusOr<KernelRxKey> server_key = PeerTrafficKey(server_.get());
  absl::StatusOr<KernelRxKey> client_key = PeerTrafficKey(client_.get());
  ASSERT_TRUE(server_key.ok()) << server_key.status();
  ASSERT_TRUE(client_key.ok()) << client_key.status();
  EXPECT_EQ(server_key->record_sequence(), 1u);
  EXPECT_EQ(client_key->record_sequence(), 0u);
  // What each peer writes next, the kernel (here: the test) opens with them.
  Send(client_.get(), "first frame");
  EXPECT_EQ(OpenRecord(fds_[1], *server_key, 1), std::string("first frame\x17", 12));
  Send(server_.get(), "answer");
  EXPECT_EQ(OpenRecord(fds_[0], *client_key, 0), std::string("answer\x17", 7));
}

TEST_F(TrackedSessionTest, BytesBufferedInOpenSslRefuseTheSwitch) {
  Handshake(/*kernel_receive=*/true);
  Send(client_.get(), "xy");  // one record, of which the responder reads half
  EXPECT_EQ(Receive(server_.get(), 1), "x");
  ExpectRefused(server_.get(), "holds bytes");
}

TEST_F(TrackedSessionTest, PostHandshakeMessageRefusesTheSwitch) {
  Handshake(/*kernel_receive=*/true);
  ASSERT_EQ(SSL_key_update(server_.get(), SSL_KEY_UPDATE_NOT_REQUESTED), 1);
  Send(server_.get(), "z");  // the KeyUpdate goes out first
  EXPECT_EQ(Receive(client_.get(), 1), "z");
  ExpectRefused(client_.get(), "post-handshake");
}

TEST_F(TrackedSessionTest, WithoutKernelSendTheLaneSettlesInUserSpaceAndReadsAhead) {
  Handshake(/*kernel_receive=*/true);
  EXPECT_EQ(SSL_get_read_ahead(client_.get()), 0);  // exact reads until settled
  std::string why;
  EXPECT_EQ(a_->Settle(client_.get(), fds_[0], &why), TlsPath::kUserSpace);
  EXPECT_NE(why.find("send side"), std::string::npos) << why;
  EXPECT_EQ(SSL_get_read_ahead(client_.get()), 1);
  EXPECT_EQ(a_->kernel_send_lanes() + a_->kernel_receive_lanes(), 0u);
  Send(server_.get(), "still works");
  EXPECT_EQ(Receive(client_.get(), 11), "still works");
  EXPECT_STREQ(LaneTls::PathName(TlsPath::kKernel), "tls (kernel send and receive)");
}

TEST_F(TrackedSessionTest, UntrackedSessionsAreNotSwitched) {
  Handshake(/*kernel_receive=*/false);
  EXPECT_EQ(SSL_get_read_ahead(client_.get()), 1);
  ExpectRefused(client_.get(), "not prepared");
  std::string why;
  EXPECT_EQ(a_->Settle(client_.get(), fds_[0], &why), TlsPath::kUserSpace);
  EXPECT_EQ(why, "");
}

}  // namespace
}  // namespace xferd::transport::tcp
