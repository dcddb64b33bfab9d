// Encrypted TCP lanes beyond the conformance suite: a lane is refused unless
// its certificate comes from the CA and names the node whose link it joins
// (and nothing lands), and no plaintext crosses the wire: a relay on
// loopback between the two transports records every byte, and a known
// pattern written through it must be absent with TLS and present without.
// Peers that differ in how much of TLS their kernel does interoperate.
// Where the kernel has TLS (the Soft-RoCE VM sets XFERD_EXPECT_KERNEL_TLS),
// every lane must run it both ways, and a non-data record arriving under
// kernel receive must break the lane with nothing of it placed in a region;
// elsewhere lanes are still prepared for it and settle in user space.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <linux/tls.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "daemon/memory/region_registry.h"
#include "daemon/transport/tcp/tcp_frame.h"
#include "daemon/transport/tcp/tcp_transport.h"
#include "tests/testing/test_certs.h"
#include "tests/transport/transport_factories.h"

namespace xferd::transport::tcp {
namespace {

constexpr absl::Duration kTimeout = absl::Seconds(20);
constexpr char kCanary[] = "XFERD-PLAINTEXT-CANARY-7f3a9c";

bool ExpectKernelTls() { return std::getenv("XFERD_EXPECT_KERNEL_TLS") != nullptr; }

struct Sink : CompletionSink {
  std::vector<absl::Status> done;
  void OnOpDone(const OpCompletion& c) override {
    done.push_back(c.error == nullptr ? absl::OkStatus() : *c.error);
  }
  // Landings go to their region's watchers, as the engine announces them.
  void OnLanded(Landing landing) override { PublishLanding(landing); }
};

struct Side {
  std::unique_ptr<memory::RegionRegistry> regions;
  std::unique_ptr<TcpTransport> transport;
  Sink sink;
};

// Forwards loopback connections to `target_port`, recording every byte
// either way. Blocking sockets, two threads per connection.
class Relay {
 public:
  explicit Relay(uint16_t target_port) : target_port_(target_port) {
    listen_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listen_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(listen_, 16);
    socklen_t len = sizeof(addr);
    ::getsockname(listen_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { AcceptLoop(); });
  }
  ~Relay() {
    ::shutdown(listen_, SHUT_RDWR);
    ::close(listen_);
    acceptor_.join();
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (int fd : fds_) ::shutdown(fd, SHUT_RDWR);
    }
    for (std::thread& t : pumps_) t.join();
    for (int fd : fds_) ::close(fd);
  }
  uint16_t port() const { return port_; }
  std::string captured() {
    std::lock_guard<std::mutex> lock(mu_);
    std::string all;
    for (const std::string& s : streams_) all += s;
    return all;
  }
  size_t connections() {
    std::lock_guard<std::mutex> lock(mu_);
    return streams_.size() / 2;
  }

 private:
  void AcceptLoop() {
    for (;;) {
      const int in = ::accept(listen_, nullptr, nullptr);
      if (in < 0) return;
      const int out = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in addr{};
      addr.sin_family = AF_INET;
      addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      addr.sin_port = htons(target_port_);
      ::connect(out, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
      std::lock_guard<std::mutex> lock(mu_);
      fds_.push_back(in);
      fds_.push_back(out);
      streams_.emplace_back();
      streams_.emplace_back();
      const size_t n = streams_.size();
      pumps_.emplace_back([this, in, out, i = n - 2] { Pump(in, out, i); });
      pumps_.emplace_back([this, in, out, i = n - 1] { Pump(out, in, i); });
    }
  }
  void Pump(int from, int to, size_t stream) {
    char buf[65536];
    for (;;) {
      const ssize_t n = ::recv(from, buf, sizeof(buf), 0);
      if (n <= 0) break;
      {
        std::lock_guard<std::mutex> lock(mu_);
        streams_[stream].append(buf, static_cast<size_t>(n));
      }
      if (::send(to, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
    }
    ::shutdown(to, SHUT_WR);
  }

  const uint16_t target_port_;
  int listen_ = -1;
  uint16_t port_ = 0;
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<int> fds_;
  std::vector<std::string> streams_;  // per connection: a->b, b->a
  std::vector<std::thread> pumps_;
};

class TcpTlsTest : public ::testing::Test {
 protected:
  // Side `s` with TLS files `files` (none: plain lanes). Lanes are prepared
  // for kernel receive even on a kernel without "tls" (they then settle in
  // user space), so that path runs everywhere.
  void Start(Side& s, const std::optional<LaneTlsFiles>& files,
             KernelTls kernel = KernelTls::kAuto) {
    memory::RegistryOptions options;
    s.regions = std::make_unique<memory::RegionRegistry>(options);
    TcpTransportOptions t;
    t.pollers = 2;
    t.lane_depth = 16;
    t.tls = files;
    t.kernel_tls = kernel;
    t.assume_kernel_tls = true;
    auto transport = TcpTransport::Create(t, *s.regions);
    ASSERT_TRUE(transport.ok()) << transport.status();
    s.transport = *std::move(transport);
  }

  bool Pump(const std::function<bool()>& done) {
    return PumpUntil(
        done,
        [this] {
          for (Side* s : {&a_, &b_}) {
            for (uint32_t i = 0; i < 2; ++i) s->transport->worker(i).Poll(s->sink);
          }
        },
        kTimeout);
  }

  // Links a ("a") to b ("b") as the engine would, through `relay_port` if
  // set; returns Connect's status.
  absl::Status Link(uint16_t relay_port = 0) {
    LinkEndpoints offer, answer;
    auto initiator = a_.transport->CreateLink(&offer);
    if (!initiator.ok()) return initiator.status();
    auto responder = b_.transport->AcceptLink(PeerIdentity{"a", 1}, offer, &answer);
    if (!responder.ok()) return responder.status();
    a_link_ = *initiator;
    b_link_ = *responder;
    token_ = answer.tcp.session_token;
    if (relay_port != 0) answer.tcp.port = relay_port;
    return a_link_->Connect(PeerIdentity{"b", 2}, answer, absl::Now() + kTimeout);
  }

  std::shared_ptr<memory::Region> Register(Side& s, const std::string& name, uint64_t size) {
    memory::RegionSpec spec;
    spec.name = name;
    spec.size = size;
    spec.access.remote_write = true;
    spec.access.remote_read = true;
    auto region = s.regions->Register(spec, s.transport.get());
    EXPECT_TRUE(region.ok()) << region.status();
    return *region;
  }

  static absl::StatusOr<LaneTlsFiles> OtherCaFiles(const std::string& node) {
    const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/other";
    ::mkdir(dir.c_str(), 0700);
    absl::StatusOr<testing::TestCa> ca = testing::TestCa::Create(dir, "other-ca");
    if (!ca.ok()) return ca.status();
    absl::StatusOr<testing::TestCert> cert = ca->IssueForDaemon(node);
    if (!cert.ok()) return cert.status();
    return LaneTlsFiles{testing::ReadTestFile(cert->cert), testing::ReadTestFile(cert->key),
                        testing::ReadTestFile(ca->cert())};
  }

  // a's lanes never reached b: refused there, b's link never ready, the
  // region b exposes still all zero after a moment of pumping.
  void ExpectRefused(const absl::Status& connected) {
    EXPECT_FALSE(connected.ok());
    // The acceptor's thread logs its refusal on its own time: the dialer
    // may see the connection die first.
    EXPECT_TRUE(Pump([&] { return b_.transport->refused_connections() >= 1; }));
    const absl::Time until = absl::Now() + absl::Milliseconds(300);
    Pump([&] { return absl::Now() > until; });
    EXPECT_FALSE(b_link_->ready());
    EXPECT_EQ(b_.transport->stats().lanes, 0u);
  }

  // Writes a known pattern from a to b through a relay (one big block, and
  // many small blocks that TLS gathers into records); checks the bytes
  // landed and returns what crossed the wire.
  std::string WriteThroughRelay(size_t* relayed) {
    constexpr uint32_t kSize = 1 << 20;
    auto src = Register(a_, "src", kSize);
    auto dst = Register(b_, "dst", kSize);
    for (uint32_t i = 0; i < kSize; ++i) {
      src->data()[i] = static_cast<std::byte>(kCanary[i % (sizeof(kCanary) - 1)]);
    }
    Relay relay(b_.transport->data_port());
    EXPECT_TRUE(Link(relay.port()).ok());
    std::vector<Block> big = {{0, 0, kSize / 2}};
    std::vector<Block> small;
    for (uint32_t i = 0; i < kMaxBlocksPerOp; ++i) {
      small.push_back({kSize / 2 + i * 100, kSize / 2 + i * 100, 100});
    }
    EXPECT_TRUE(Transfer(OpKind::kWrite, *src, *dst, big).ok());
    EXPECT_TRUE(Transfer(OpKind::kWrite, *src, *dst, small).ok());
    EXPECT_EQ(std::memcmp(src->data(), dst->data(), kSize / 2 + kMaxBlocksPerOp * 100), 0);
    *relayed = relay.connections();
    return relay.captured();
  }

  // One op on a's lane 0 between a's `local` and b's `remote`; its status.
  absl::Status Transfer(OpKind kind, memory::Region& local, memory::Region& remote,
                        const std::vector<Block>& blocks) {
    // TCP hands out the region's id at once, whatever the link.
    const RemoteRegion key = *b_.transport->GrantRegion(*b_link_, remote, absl::Now());
    DataOp op;
    op.kind = kind;
    op.local_base = local.data();
    op.local_registration = local.registration();
    op.remote = &key;
    op.blocks = blocks.data();
    op.block_count = static_cast<uint32_t>(blocks.size());
    for (const Block& block : blocks) op.length += block.length;
    const size_t done = a_.sink.done.size();
    if (!Pump([&] { return a_link_->lane(0).credits() > 0; }) ||
        a_link_->lane(0).Post({&op, 1}) != 1 ||
        !Pump([&] { return a_.sink.done.size() > done; })) {
      return absl::DeadlineExceededError("op not done");
    }
    return a_.sink.done.back();
  }

  void CloseLinks() {
    a_link_->Close(absl::CancelledError("test done"));
    b_link_->Close(absl::CancelledError("test done"));
    Pump([&] { return a_.transport->stats().lanes == 0 && b_.transport->stats().lanes == 0; });
    a_link_.reset();
    b_link_.reset();
  }

  // Where the kernel has TLS: every one of `s`'s lanes (two per link, as
  // Start makes them) sends through it, and receives through it or not.
  static void ExpectKernelLanes(const Side& s, bool send, bool receive) {
    if (!ExpectKernelTls()) return;
    EXPECT_EQ(s.transport->kernel_tls_send_lanes(), send ? 2u : 0u);
    EXPECT_EQ(s.transport->kernel_tls_receive_lanes(), receive ? 2u : 0u);
  }

  Side a_, b_;
  std::shared_ptr<transport::Link> a_link_, b_link_;
  std::string token_;
};

TEST_F(TcpTlsTest, LaneFromACertificateForAnotherNodeIsRefused) {
  absl::StatusOr<LaneTlsFiles> mallory = TestLaneTlsFiles("mallory");  // same CA
  absl::StatusOr<LaneTlsFiles> b = TestLaneTlsFiles("b");
  ASSERT_TRUE(mallory.ok() && b.ok());
  Start(a_, *mallory);
  Start(b_, *b);
  auto dst = Register(b_, "dst", 4096);
  ExpectRefused(Link());
  EXPECT_TRUE(
      std::all_of(dst->data(), dst->data() + 4096, [](std::byte c) { return c == std::byte{0}; }));
}

TEST_F(TcpTlsTest, LaneFromAnotherCaIsRefused) {
  absl::StatusOr<LaneTlsFiles> forged = OtherCaFiles("a");  // the right name, the wrong CA
  absl::StatusOr<LaneTlsFiles> b = TestLaneTlsFiles("b");
  ASSERT_TRUE(forged.ok() && b.ok()) << forged.status();
  // a trusts b's CA, so the handshake gets as far as b judging a's
  // certificate: the refusal is b's, not a's distrust of b.
  forged->ca_pem = b->ca_pem;
  Start(a_, *forged);
  Start(b_, *b);
  absl::Status s = Link();
  ExpectRefused(s);
  EXPECT_NE(s.message().find("TLS"), absl::string_view::npos) << s;
}

TEST_F(TcpTlsTest, DialerRefusesAResponderNamedOtherwise) {
  absl::StatusOr<LaneTlsFiles> a = TestLaneTlsFiles("a");
  absl::StatusOr<LaneTlsFiles> impostor = TestLaneTlsFiles("not-b");
  ASSERT_TRUE(a.ok() && impostor.ok());
  Start(a_, *a);
  Start(b_, *impostor);
  absl::Status s = Link();
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_NE(s.message().find("names [not-b"), absl::string_view::npos) << s;
}

TEST_F(TcpTlsTest, NoPlaintextCrossesTheWire) {
  for (const bool encrypted : {false, true}) {
    SCOPED_TRACE(encrypted ? "tls" : "off");
    a_ = Side();
    b_ = Side();
    std::optional<LaneTlsFiles> fa, fb;
    if (encrypted) {
      fa = *TestLaneTlsFiles("a");
      fb = *TestLaneTlsFiles("b");
    }
    Start(a_, fa);
    Start(b_, fb);
    size_t relayed = 0;
    const std::string wire = WriteThroughRelay(&relayed);
    EXPECT_EQ(relayed, 2u);  // every lane went through the relay
    EXPECT_GT(wire.size(), 1u << 19);
    const bool canary = wire.find(kCanary) != std::string::npos;
    const bool token = wire.find(token_) != std::string::npos;
    // Without encryption the pattern and the session token are there to
    // find: the search works, so its failing to find them with TLS counts.
    EXPECT_EQ(canary, !encrypted);
    EXPECT_EQ(token, !encrypted);
    // Where the kernel offers kTLS (the Soft-RoCE VM loads the tls module
    // and says so), every lane must have handed it both directions.
    ExpectKernelLanes(a_, encrypted, encrypted);
    ExpectKernelLanes(b_, encrypted, encrypted);
    CloseLinks();
  }
}

// The wire is standard TLS whoever does the records: a daemon whose records
// OpenSSL handles (tcp_kernel_tls "off", or "send") and one with kernel TLS
// both ways exchange writes and reads, every byte checked.
TEST_F(TcpTlsTest, PeersOfDifferentKernelTlsInteroperate) {
  for (const KernelTls a_kernel : {KernelTls::kOff, KernelTls::kSend}) {
    SCOPED_TRACE(a_kernel == KernelTls::kOff ? "off" : "send");
    a_ = Side();
    b_ = Side();
    Start(a_, *TestLaneTlsFiles("a"), a_kernel);
    Start(b_, *TestLaneTlsFiles("b"));
    constexpr uint32_t kSize = 1 << 20;
    auto src = Register(a_, "src", kSize);
    auto back = Register(a_, "back", kSize);
    auto dst = Register(b_, "dst", kSize);
    for (uint32_t i = 0; i < kSize; ++i) src->data()[i] = static_cast<std::byte>(i * 7 + i / 4096);
    ASSERT_TRUE(Link().ok());
    std::vector<Block> all = {{0, 0, kSize}};
    EXPECT_TRUE(Transfer(OpKind::kWrite, *src, *dst, all).ok());
    EXPECT_TRUE(Transfer(OpKind::kRead, *back, *dst, all).ok());
    EXPECT_EQ(std::memcmp(src->data(), dst->data(), kSize), 0);
    EXPECT_EQ(std::memcmp(src->data(), back->data(), kSize), 0);
    ExpectKernelLanes(a_, a_kernel == KernelTls::kSend, false);
    ExpectKernelLanes(b_, true, true);
    CloseLinks();
  }
}


// Under kernel receive a record that is not data (a KeyUpdate the kernel
// cannot follow, an alert) arriving in the middle of a WRITE's payload
// breaks the lane, saying what came, and none of it reaches the region.
// The peer's kernel makes the records: its lane writes plaintext, and the
// odd record type through TLS_SET_RECORD_TYPE.
TEST_F(TcpTlsTest, NonDataRecordUnderKernelReceiveBreaksTheLaneCleanly) {
  struct Case {
    uint8_t type;
    std::vector<uint8_t> body;
    const char* says;
  };
  const Case cases[] = {{22, {24, 0, 0, 1, 0}, "KeyUpdate"}, {21, {1, 0}, "close_notify"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.says);
    a_ = Side();
    b_ = Side();
    Start(a_, *TestLaneTlsFiles("a"));
    Start(b_, *TestLaneTlsFiles("b"));
    auto dst = Register(b_, "dst", 4096);
    ASSERT_TRUE(Link().ok());
    ASSERT_TRUE(Pump([&] {
      return a_link_->lane(0).credits() > 0 && b_.transport->stats().lanes == 2;
    }));
    if (b_.transport->kernel_tls_receive_lanes() == 0) {
      ASSERT_FALSE(ExpectKernelTls()) << "kernel TLS receive did not engage";
      GTEST_SKIP() << "this kernel has no TLS: lanes receive through OpenSSL";
    }
    FrameHeader write;
    write.type = FrameType::kWrite;
    write.blocks = 1;
    write.word = b_.transport->GrantRegion(*b_link_, *dst, absl::Now())->region_id;
    write.length = 200;
    write.seq = 1;
    uint8_t frame[kHeaderBytes + kBlockEntryBytes + 100];
    EncodeHeader(write, frame);
    EncodeBlockEntry(0, 200, frame + kHeaderBytes);
    std::memset(frame + kHeaderBytes + kBlockEntryBytes, 0xab, 100);
    const int fd = static_cast<TcpLane&>(a_link_->lane(0)).fd();
    ASSERT_EQ(::send(fd, frame, sizeof(frame), MSG_NOSIGNAL), static_cast<ssize_t>(sizeof(frame)));
    alignas(cmsghdr) char control[CMSG_SPACE(1)] = {};
    iovec iov{const_cast<uint8_t*>(c.body.data()), c.body.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_TLS;
    cmsg->cmsg_type = TLS_SET_RECORD_TYPE;
    cmsg->cmsg_len = CMSG_LEN(1);
    *CMSG_DATA(cmsg) = c.type;
    ASSERT_EQ(::sendmsg(fd, &msg, MSG_NOSIGNAL), static_cast<ssize_t>(c.body.size()));
    ASSERT_TRUE(Pump([&] { return b_link_->broken(); }));
    const std::string why(b_link_->status().message());
    EXPECT_NE(why.find(c.says), std::string::npos) << why;
    EXPECT_TRUE(std::all_of(dst->data(), dst->data() + 100,
                            [](std::byte x) { return x == std::byte{0xab}; }));
    EXPECT_TRUE(std::all_of(dst->data() + 100, dst->data() + 4096,
                            [](std::byte x) { return x == std::byte{0}; }));
    CloseLinks();
  }
}

}  // namespace
}  // namespace xferd::transport::tcp
