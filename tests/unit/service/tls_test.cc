// LoadTlsMaterial and CaVerifier on certificates made with the openssl CLI
// at test time (in TEST_TMPDIR), and the pure identity checks of PeerAuth.
#include "daemon/service/tls.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <map>

#include "absl/strings/str_cat.h"
#include "daemon/service/peer_auth.h"
#include "tests/testing/test_certs.h"

namespace xferd::service {
namespace {

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = new std::string(absl::StrCat(tmp ? tmp : "/tmp", "/tls_test"));
    ASSERT_EQ(std::system(absl::StrCat("rm -rf ", *dir_, "; mkdir -p ", *dir_).c_str()), 0);
    testing::TestCa ca = Unwrap(testing::TestCa::Create(*dir_, "ca"));
    testing::TestCa other = Unwrap(testing::TestCa::Create(*dir_, "other"));
    certs_ = new std::map<std::string, testing::TestCert>{
        {"ca", {ca.cert(), ""}},
        {"a", Unwrap(ca.Issue("a", "subjectAltName=DNS:a,DNS:localhost,IP:127.0.0.1"))},
        {"cn-only", Unwrap(ca.Issue("cn-only", ""))},
        {"server-only", Unwrap(ca.Issue("server-only", "extendedKeyUsage=serverAuth"))},
        {"stranger", Unwrap(other.Issue("stranger", "subjectAltName=DNS:stranger"))},
    };
  }

  template <typename T>
  static T Unwrap(absl::StatusOr<T> value) {
    if (!value.ok()) {
      ADD_FAILURE() << value.status();
      std::abort();
    }
    return *std::move(value);
  }
  static const testing::TestCert& Cert(const std::string& name) { return certs_->at(name); }
  static TlsConfig Config(const std::string& cert, const std::string& key,
                          const std::string& ca = "") {
    return TlsConfig{Cert(cert).cert, Cert(key).key, ca.empty() ? Cert("ca").cert : ca};
  }
  static std::string Pem(const std::string& name) { return testing::ReadTestFile(Cert(name).cert); }

  static std::string* dir_;
  static std::map<std::string, testing::TestCert>* certs_;
};

std::string* TlsTest::dir_ = nullptr;
std::map<std::string, testing::TestCert>* TlsTest::certs_ = nullptr;

TEST_F(TlsTest, LoadsMaterialAndNamesFromSans) {
  absl::StatusOr<TlsMaterial> m = LoadTlsMaterial(Config("a", "a"));
  ASSERT_TRUE(m.ok()) << m.status();
  // DNS SANs only: the IP SAN and the CN do not name a node.
  EXPECT_EQ(m->names, (std::vector<std::string>{"a", "localhost"}));
  EXPECT_FALSE(m->key_pem.empty());
  EXPECT_TRUE(m->client_ca_pem.empty());
}

TEST_F(TlsTest, CommonNameCountsOnlyWithoutSans) {
  absl::StatusOr<TlsMaterial> m = LoadTlsMaterial(Config("cn-only", "cn-only"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->names, std::vector<std::string>{"cn-only"});
  EXPECT_EQ(*PemCertificateNames(Pem("a")), (std::vector<std::string>{"a", "localhost"}));
  EXPECT_FALSE(PemCertificateNames("not a certificate").ok());
}

TEST_F(TlsTest, RefusesMismatchedKeyOtherCaAndOneSidedUse) {
  absl::Status s = LoadTlsMaterial(Config("a", "cn-only")).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("'tls.key'"), absl::string_view::npos) << s;
  EXPECT_NE(s.message().find("does not match the certificate"), absl::string_view::npos) << s;
  s = LoadTlsMaterial(Config("stranger", "stranger")).status();
  EXPECT_NE(s.message().find("is not accepted by the CA"), absl::string_view::npos) << s;
  s = LoadTlsMaterial(Config("server-only", "server-only")).status();
  EXPECT_NE(s.message().find("both TLS server and client"), absl::string_view::npos) << s;
  s = LoadTlsMaterial(Config("a", "a", Cert("a").key)).status();  // the key is no CA
  EXPECT_NE(s.message().find("'tls.ca'"), absl::string_view::npos) << s;
}

TEST_F(TlsTest, CaVerifierAcceptsOnlyItsOwnCertificates) {
  absl::StatusOr<std::unique_ptr<CaVerifier>> ca = CaVerifier::Create(Pem("ca"));
  ASSERT_TRUE(ca.ok()) << ca.status();
  EXPECT_TRUE((*ca)->Verify(Pem("a"), "").ok());
  EXPECT_EQ((*ca)->Verify(Pem("stranger"), "").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ((*ca)->Verify("", "").code(), absl::StatusCode::kPermissionDenied);
}

TEST(PeerAuthTest, ClaimedNodeIdMustBeACertificateName) {
  EXPECT_TRUE(CheckClaimedNodeId("the caller", {"a", "localhost"}, "a").ok());
  absl::Status s = CheckClaimedNodeId("the caller", {"mallory", "localhost"}, "a");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("the caller claims node id 'a' but its certificate names [mallory, "
                             "localhost]"),
            absl::string_view::npos)
      << s;
  s = CheckClaimedNodeId("the caller", {}, "a");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("no certificate"), absl::string_view::npos) << s;
}

TEST(PeerAuthTest, RecognisesUnixSocketPeers) {
  EXPECT_TRUE(IsUnixSocketPeer("unix:"));
  EXPECT_TRUE(IsUnixSocketPeer("unix:/run/xferd/xferd.sock"));
  EXPECT_TRUE(IsUnixSocketPeer("unix-abstract:xferd"));
  EXPECT_FALSE(IsUnixSocketPeer("ipv4:127.0.0.1:4242"));
  EXPECT_FALSE(IsUnixSocketPeer("ipv6:[::1]:4242"));
}

}  // namespace
}  // namespace xferd::service
