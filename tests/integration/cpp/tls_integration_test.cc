// mTLS with the C++ client and xferctl: two daemons with certificates of one
// CA (made with openssl at test time) connect and move bytes; a client with
// a certificate reaches a daemon over TCP, one without is refused; xferctl's
// --tls-* flags do the same. The refusals and their "nothing written" checks
// for every kind of intruder are in tests/integration/python/security_test.py.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cpp/xferd_client.h"
#include "tests/integration/cpp/daemon_harness.h"
#include "tests/testing/test_certs.h"

namespace xferd::integration {
namespace {

using client::Client;
using client::ClientOptions;
using testing::TestCa;
using testing::TestCert;

constexpr uint64_t kSize = 1 << 20;

template <typename T>
T Unwrap(absl::StatusOr<T> value, const char* what) {
  EXPECT_TRUE(value.ok()) << what << ": " << value.status();
  if (!value.ok()) std::abort();
  return *std::move(value);
}

class TlsIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = Unwrap(ScratchDir::Create(), "scratch dir");
    ca_ = std::make_unique<TestCa>(Unwrap(TestCa::Create(dir_->path(), "ca"), "CA"));
    a_ = StartDaemon("node-a");
    b_ = StartDaemon("node-b");
    ops_ = Unwrap(ca_->Issue("ops", "subjectAltName=DNS:ops"), "client certificate");
  }

  void TearDown() override {
    for (std::unique_ptr<Daemon>* d : {&a_, &b_}) {
      absl::StatusOr<int> code = (*d)->Stop();
      EXPECT_TRUE(code.ok() && *code == 0) << (*d)->node_id() << "\n" << (*d)->Log();
    }
  }

  std::unique_ptr<Daemon> StartDaemon(const std::string& name) {
    const TestCert cert = Unwrap(ca_->IssueForDaemon(name), "daemon certificate");
    DaemonOptions options;
    options.node_id = name;
    options.extra_args = {"--tls-cert", cert.cert, "--tls-key", cert.key, "--tls-ca", ca_->cert()};
    return Unwrap(Daemon::Start(RunfilePath("daemon/xferd"), dir_->path(), options), "start");
  }

  absl::StatusOr<std::unique_ptr<Client>> TcpClient(const Daemon& d, const std::string& cert,
                                                    const std::string& key,
                                                    absl::Duration timeout = absl::Seconds(10)) {
    ClientOptions options;
    options.credentials = Unwrap(client::TlsCredentials(ca_->cert(), cert, key), "credentials");
    return Client::Connect(d.grpc_address(), timeout, options);
  }

  // Runs xferctl with `args` after environment settings `env` ("A=1 B=2 ");
  // returns its exit code and sets `*out` to its output.
  int Xferctl(const std::string& env, const std::string& args, std::string* out) {
    out->clear();
    const std::string command =
        absl::StrCat("env ", env, RunfilePath("client/cpp/xferctl"), " ", args, " 2>&1");
    FILE* pipe = ::popen(command.c_str(), "r");
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) out->append(buffer, n);
    return WEXITSTATUS(::pclose(pipe));
  }

  std::unique_ptr<ScratchDir> dir_;
  std::unique_ptr<TestCa> ca_;
  std::unique_ptr<Daemon> a_, b_;
  TestCert ops_;
};

TEST_F(TlsIntegrationTest, DaemonsConnectOverMtlsAndMoveBytes) {
  std::unique_ptr<Client> a = Unwrap(TcpClient(*a_, ops_.cert, ops_.key), "client of A over TCP");
  std::unique_ptr<Client> b =
      Unwrap(Client::Connect(b_->unix_target(), absl::Seconds(5)), "client of B");
  const v1::NodeInfo info = Unwrap(a->GetNodeInfo(), "node info");
  EXPECT_TRUE(absl::StartsWith(info.security(), "mtls")) << info.security();
  // With [tls] the TCP data lanes are encrypted by default, and say so.
  EXPECT_TRUE(absl::StrContains(info.transport_reason(), "data lanes: TLS 1.3"))
      << info.transport_reason();
  EXPECT_EQ(Unwrap(a->ConnectPeer(b_->grpc_address()), "connect").node_id(), "node-b");

  v1::RegisterRegionRequest r;
  r.set_name("dst");
  r.set_size(kSize);
  r.set_backing(v1::REGION_BACKING_SHM);
  r.mutable_access()->set_remote_write(true);
  Unwrap(b->RegisterRegion(r), "dst");
  std::unique_ptr<client::ShmRegion> dst = Unwrap(b->MapShmRegion("dst"), "map dst");
  std::memset(dst->data(), 0xab, kSize);
  r.set_name("src");  // anonymous memory: zeros
  r.set_backing(v1::REGION_BACKING_ANONYMOUS);
  r.mutable_access()->set_remote_write(false);
  Unwrap(a->RegisterRegion(r), "src");

  v1::WriteRequest w;
  w.set_src_region("src");
  w.set_peer("node-b");
  w.set_dst_region("dst");
  w.set_length(kSize);
  w.set_wait(true);
  const v1::Transfer t = Unwrap(a->Write(w), "write");
  EXPECT_EQ(t.state(), v1::TRANSFER_STATE_DONE) << t.error().message();
  for (uint64_t i = 0; i < kSize; ++i) ASSERT_EQ(dst->data()[i], 0) << "byte " << i;
}

TEST_F(TlsIntegrationTest, ClientWithoutCertificateIsRefusedOverTcp) {
  // The handshake fails at once; the short bound only ends the retrying.
  absl::StatusOr<std::unique_ptr<Client>> c = TcpClient(*a_, "", "", absl::Seconds(1));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(c.status().message().find("TLS handshake failed"), absl::string_view::npos)
      << c.status();
}

TEST_F(TlsIntegrationTest, XferctlTalksMtls) {
  std::string out;
  const std::string target = absl::StrCat("--target ", a_->grpc_address());
  const std::string tls =
      absl::StrCat(" --tls-ca ", ca_->cert(), " --tls-cert ", ops_.cert, " --tls-key ", ops_.key);
  EXPECT_EQ(Xferctl("", target + tls + " info", &out), 0) << out;
  EXPECT_NE(out.find("mtls: peers and remote clients need"), std::string::npos) << out;
  // The environment works as the flags do.
  const std::string env = absl::StrCat("XFERD_TLS_CA=", ca_->cert(), " XFERD_TLS_CERT=", ops_.cert,
                                       " XFERD_TLS_KEY=", ops_.key, " ");
  EXPECT_EQ(Xferctl(env, target + " info --json", &out), 0) << out;
  EXPECT_NE(out.find("\"security\":\"mtls"), std::string::npos) << out;
}

}  // namespace
}  // namespace xferd::integration
