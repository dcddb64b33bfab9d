// The TCP transport's own check of a peer's endpoints (the rest of the
// transport is the conformance suite's).
#include "daemon/transport/tcp/tcp_transport.h"

#include <gtest/gtest.h>

#include <string>

namespace xferd::transport::tcp {
namespace {

TEST(TcpTransportTest, CheckEndpointsBoundsHostAndToken) {
  LinkEndpoints e;
  e.kind = TransportKind::kTcp;
  e.lanes = 2;
  e.tcp = TcpEndpoint{std::string(255, 'h'), 7301, std::string(64, 't')};
  EXPECT_TRUE(CheckEndpoints(e).ok());
  LinkEndpoints long_host = e;
  long_host.tcp.host.push_back('h');
  LinkEndpoints long_token = e;
  long_token.tcp.session_token.push_back('t');
  for (const LinkEndpoints& bad : {long_host, long_token}) {
    const absl::Status s = CheckEndpoints(bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(s.message(), "malformed TCP endpoint in handshake");
  }
  // Verbs endpoints are the link's to refuse, naming both transports.
  LinkEndpoints verbs = long_host;
  verbs.kind = TransportKind::kVerbs;
  EXPECT_TRUE(CheckEndpoints(verbs).ok());
}

}  // namespace
}  // namespace xferd::transport::tcp
