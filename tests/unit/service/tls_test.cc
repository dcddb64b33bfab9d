// LoadTlsMaterial and CaVerifier on certificates made with the openssl CLI
// at test time (in TEST_TMPDIR), and the pure identity checks of PeerAuth.
#include "daemon/service/tls.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "daemon/service/peer_auth.h"

namespace xferd::service {
namespace {

class TlsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = new std::string(absl::StrCat(tmp ? tmp : "/tmp", "/tls_test"));
    Sh(absl::StrCat("rm -rf ", *dir_, " && mkdir -p ", *dir_));
    MakeCa("ca");
    MakeCa("other");
    Issue("ca", "a", "subjectAltName=DNS:a,DNS:localhost,IP:127.0.0.1");
    Issue("ca", "cn-only", "");
    Issue("ca", "server-only", "extendedKeyUsage=serverAuth");
    Issue("other", "stranger", "subjectAltName=DNS:stranger");
  }

  static void Sh(const std::string& command) {
    ASSERT_EQ(std::system(absl::StrCat("set -e; ", command, " 2>/dev/null").c_str()), 0) << command;
  }
  static std::string Path(const std::string& name) { return absl::StrCat(*dir_, "/", name); }
  static void MakeCa(const std::string& ca) {
    Sh(absl::StrCat("cd ", *dir_, "; openssl genpkey -algorithm EC -pkeyopt ",
                    "ec_paramgen_curve:P-256 -out ", ca, ".key; openssl req -x509 -new -key ", ca,
                    ".key -out ", ca, ".pem -days 1 -subj /CN=", ca,
                    " -addext basicConstraints=critical,CA:TRUE"));
  }
  static void Issue(const std::string& ca, const std::string& name, const std::string& ext) {
    Sh(absl::StrCat("cd ", *dir_, "; openssl genpkey -algorithm EC -pkeyopt ",
                    "ec_paramgen_curve:P-256 -out ", name, ".key; openssl req -new -key ", name,
                    ".key -out ", name, ".csr -subj /CN=", name, "; printf '", ext, "\\n' > ", name,
                    ".ext; openssl x509 -req -in ", name, ".csr -CA ", ca, ".pem -CAkey ", ca,
                    ".key -out ", name, ".pem -days 1 -set_serial 7 -extfile ", name, ".ext"));
  }
  static TlsConfig Config(const std::string& cert, const std::string& key,
                          const std::string& ca = "ca") {
    return TlsConfig{Path(cert + ".pem"), Path(key + ".key"), Path(ca + ".pem")};
  }
  static std::string Read(const std::string& name) {
    std::ifstream in(Path(name));
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  static std::string* dir_;
};

std::string* TlsTest::dir_ = nullptr;

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
  EXPECT_EQ(*PemCertificateNames(Read("a.pem")), (std::vector<std::string>{"a", "localhost"}));
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
  s = LoadTlsMaterial(Config("a", "a", "a.key")).status();  // the key is no CA
  EXPECT_NE(s.message().find("'tls.ca'"), absl::string_view::npos) << s;
}

TEST_F(TlsTest, CaVerifierAcceptsOnlyItsOwnCertificates) {
  absl::StatusOr<std::unique_ptr<CaVerifier>> ca = CaVerifier::Create(Read("ca.pem"));
  ASSERT_TRUE(ca.ok()) << ca.status();
  EXPECT_TRUE((*ca)->Verify(Read("a.pem"), "").ok());
  EXPECT_EQ((*ca)->Verify(Read("stranger.pem"), "").code(), absl::StatusCode::kPermissionDenied);
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
