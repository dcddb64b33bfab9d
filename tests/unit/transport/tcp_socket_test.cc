#include "daemon/transport/tcp/tcp_socket.h"

#include <gtest/gtest.h>
#include <sys/socket.h>

#include <thread>

#include "absl/strings/str_cat.h"

namespace xferd::transport::tcp {
namespace {

// Socket errors are UNAVAILABLE and name what failed and where.
void ExpectUnavailableSaying(const absl::StatusOr<UniqueFd>& result, const std::string& text) {
  EXPECT_EQ(result.status().code(), absl::StatusCode::kUnavailable) << result.status();
  EXPECT_NE(result.status().message().find(text), absl::string_view::npos) << result.status();
}

TEST(TcpSocketTest, ListenDialExchange) {
  auto listener = Listen(HostPort{"127.0.0.1", 0}, 4);
  ASSERT_TRUE(listener.ok()) << listener.status();
  auto port = LocalPort(listener->get());
  ASSERT_TRUE(port.ok());
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  auto client = Dial(HostPort{"127.0.0.1", *port}, deadline);
  ASSERT_TRUE(client.ok()) << client.status();
  int accepted = -1;
  for (int i = 0; i < 500 && accepted < 0; ++i) {
    accepted = ::accept(listener->get(), nullptr, nullptr);
    if (accepted < 0) absl::SleepFor(absl::Milliseconds(2));
  }
  ASSERT_GE(accepted, 0);
  UniqueFd server(accepted);
  ASSERT_TRUE(SendExactly(client->get(), "ping", 4, deadline).ok());
  char buf[4];
  ASSERT_TRUE(RecvExactly(server.get(), buf, 4, deadline).ok());
  EXPECT_EQ(std::string(buf, 4), "ping");
  EXPECT_NE(PeerAddress(server.get()).find("127.0.0.1:"), std::string::npos);
  ASSERT_TRUE(ConfigureDataSocket(server.get(), DataSocketOptions{}).ok());
}

TEST(TcpSocketTest, RecvTimesOutAndSeesClose) {
  auto listener = Listen(HostPort{"127.0.0.1", 0}, 4);
  ASSERT_TRUE(listener.ok());
  auto client =
      Dial(HostPort{"127.0.0.1", *LocalPort(listener->get())}, absl::Now() + absl::Seconds(5));
  ASSERT_TRUE(client.ok());
  char buf[1];
  EXPECT_EQ(RecvExactly(client->get(), buf, 1, absl::Now() + absl::Milliseconds(50)).code(),
            absl::StatusCode::kDeadlineExceeded);
  int accepted = -1;
  for (int i = 0; i < 500 && accepted < 0; ++i) {
    accepted = ::accept(listener->get(), nullptr, nullptr);
    if (accepted < 0) absl::SleepFor(absl::Milliseconds(2));
  }
  ASSERT_GE(accepted, 0);
  UniqueFd(accepted).reset();  // the server side closes
  EXPECT_EQ(RecvExactly(client->get(), buf, 1, absl::Now() + absl::Seconds(5)).code(),
            absl::StatusCode::kUnavailable);
}

TEST(TcpSocketTest, DialRefusedIsUnavailable) {
  auto listener = Listen(HostPort{"127.0.0.1", 0}, 1);
  ASSERT_TRUE(listener.ok());
  const uint16_t port = *LocalPort(listener->get());
  listener->reset();  // nobody listens there now
  ExpectUnavailableSaying(Dial(HostPort{"127.0.0.1", port}, absl::Now() + absl::Seconds(2)),
                          absl::StrCat("connect to 127.0.0.1:", port));
}

TEST(TcpSocketTest, ListenOnABusyPortSaysWhere) {
  auto first = Listen(HostPort{"127.0.0.1", 0}, 1);
  ASSERT_TRUE(first.ok()) << first.status();
  const uint16_t port = *LocalPort(first->get());
  ExpectUnavailableSaying(Listen(HostPort{"127.0.0.1", port}, 1),
                          absl::StrCat("cannot listen on 127.0.0.1:", port));
}

TEST(TcpSocketTest, DialReachesAListenerBehindAName) {
  // "localhost" may resolve to ::1 before 127.0.0.1: a refused address must
  // not end the dial while another one is left.
  auto listener = Listen(HostPort{"127.0.0.1", 0}, 1);
  ASSERT_TRUE(listener.ok()) << listener.status();
  auto client =
      Dial(HostPort{"localhost", *LocalPort(listener->get())}, absl::Now() + absl::Seconds(5));
  EXPECT_TRUE(client.ok()) << client.status();
}

}  // namespace
}  // namespace xferd::transport::tcp
