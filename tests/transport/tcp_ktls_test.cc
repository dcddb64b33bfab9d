// Kernel TLS receive's key material, checked where no kernel TLS is needed:
// HKDF-Expand-Label against RFC 8448's trace, and the layout the kernel
// takes.
#include "daemon/transport/tcp/tcp_ktls.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"

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

}  // namespace
}  // namespace xferd::transport::tcp
