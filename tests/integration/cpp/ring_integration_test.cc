// The request rings between a local client and its daemon, with two real
// daemons on loopback: the same requests through the rings and over gRPC get
// the same outcomes (done with every byte in place, or the same refusal);
// ring transfers are the daemon's like any other; and hostile clients that
// write garbage into their rings, break the indices or die mid-transfer hurt
// no one but themselves and leave nothing behind.
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "client/cpp/local_socket.h"
#include "client/cpp/ring_requests.h"
#include "client/cpp/xferd_client.h"
#include "daemon/base/ring_layout.h"
#include "tests/integration/cpp/daemon_harness.h"
#include "xferd/v1/local.pb.h"

namespace xferd::integration {
namespace {

using client::Client;

constexpr uint64_t kSize = 8 << 20;

template <typename T>
T Unwrap(absl::StatusOr<T> value, const char* what) {
  EXPECT_TRUE(value.ok()) << what << ": " << value.status();
  if (!value.ok()) std::abort();
  return *std::move(value);
}

std::string Packed(const std::vector<uint64_t>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * 8);
}

std::string Packed32(const std::vector<uint32_t>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * 4);
}

// Descriptors the daemon holds open now.
size_t OpenFds(pid_t pid) {
  size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd")) {
    (void)entry;
    ++n;
  }
  return n;
}

// A client that speaks the local socket and maps its rings itself, to do
// what no well-behaved client does.
class RawRings {
 public:
  explicit RawRings(const std::string& unix_target) {
    absl::StatusOr<int> socket = client::ConnectLocalSocket(client::LocalSocketFor(unix_target));
    EXPECT_TRUE(socket.ok()) << socket.status();
    fd_ = socket.value_or(-1);
    v1::LocalRequest request;
    request.mutable_open_rings()->set_sq_entries(16);
    std::vector<int> fds;
    reply_ = Exchange(request, &fds);
    EXPECT_EQ(fds.size(), 3u);
    if (fds.size() != 3) return;
    memory_ = fds[0];
    submit_ = fds[1];
    complete_ = fds[2];
    size_ = reply_.rings().total_bytes();
    base_ = static_cast<std::byte*>(
        ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, memory_, 0));
    std::memcpy(&g_, base_, sizeof(g_));
  }
  ~RawRings() { Close(); }

  void Close() {
    if (base_ != nullptr) ::munmap(base_, size_);
    base_ = nullptr;
    for (int* fd : {&fd_, &memory_, &submit_, &complete_}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
  }

  v1::LocalReply Exchange(const v1::LocalRequest& request, std::vector<int>* fds) {
    absl::StatusOr<v1::LocalReply> reply = client::LocalExchange(fd_, request, fds);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.value_or(v1::LocalReply());
  }

  uint32_t Intern(const std::string& name) {
    v1::LocalRequest request;
    request.mutable_intern()->add_names(name);
    std::vector<int> fds;
    const v1::LocalReply reply = Exchange(request, &fds);
    return reply.interned().handles_size() == 1 ? reply.interned().handles(0) : 0;
  }

  rings::Header& header() { return *reinterpret_cast<rings::Header*>(base_); }
  rings::Sqe* sq() { return reinterpret_cast<rings::Sqe*>(base_ + g_.sq_offset); }
  const rings::Cqe* cq() { return reinterpret_cast<const rings::Cqe*>(base_ + g_.cq_offset); }
  std::byte* buffer() { return base_ + g_.buffer_offset; }
  const rings::Geometry& geometry() const { return g_; }

  // Publishes entries up to `tail` and rings the doorbell.
  void Publish(uint64_t tail) {
    rings::StoreRelease(header().sq_tail.value, tail);
    const uint64_t one = 1;
    (void)!::write(submit_, &one, sizeof(one));
  }
  // The completion at `position`, waiting up to 10 s; nullopt if none came.
  std::optional<rings::Cqe> Completion(uint64_t position, std::string* message = nullptr) {
    const rings::Cqe& c = cq()[position & (g_.cq_entries - 1)];
    const absl::Time deadline = absl::Now() + absl::Seconds(10);
    while (rings::LoadAcquire(c.seq) != position + 1) {
      if (absl::Now() > deadline) return std::nullopt;
      absl::SleepFor(absl::Microseconds(100));
    }
    if (message != nullptr) {
      *message = std::string(reinterpret_cast<const char*>(base_ + g_.messages_offset) +
                                 (position & (g_.cq_entries - 1)) * rings::kMessageBytes,
                             c.message_bytes);
    }
    rings::StoreRelease(header().cq_head.value, position + 1);
    return c;
  }

 private:
  int fd_ = -1, memory_ = -1, submit_ = -1, complete_ = -1;
  std::byte* base_ = nullptr;
  size_t size_ = 0;
  rings::Geometry g_{};
  v1::LocalReply reply_;
};

// Runs tests/integration/cpp/ring_writer (`mode` "waits" or "detached") on
// the daemon at `target`, writing kSize bytes src -> dst: a process of its
// own (a fork of this one would share its gRPC state). Its pid, or -1.
pid_t SpawnWriter(const std::string& target, const std::string& mode) {
  const std::string writer = RunfilePath("tests/integration/cpp/ring_writer");
  const std::string size = std::to_string(kSize);
  char* argv[] = {const_cast<char*>(writer.c_str()), const_cast<char*>(target.c_str()),
                  const_cast<char*>(size.c_str()), const_cast<char*>(mode.c_str()), nullptr};
  pid_t child = 0;
  return ::posix_spawn(&child, writer.c_str(), nullptr, nullptr, argv, environ) == 0 ? child : -1;
}

class RingIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = Unwrap(ScratchDir::Create(), "scratch dir");
    for (auto [daemon, name] : {std::pair{&a_, "node-a"}, std::pair{&b_, "node-b"}}) {
      DaemonOptions options;
      options.node_id = name;
      *daemon = Unwrap(Daemon::Start(RunfilePath("daemon/xferd"), dir_->path(), options), name);
    }
    ring_ = Unwrap(Client::Connect(a_->unix_target(), absl::Seconds(10)), "connect A (rings)");
    client::ClientOptions grpc_only;
    grpc_only.rings = false;
    grpc_ = Unwrap(Client::Connect(a_->unix_target(), absl::Seconds(10), grpc_only),
                   "connect A (gRPC)");
    b_client_ = Unwrap(Client::Connect(b_->grpc_address(), absl::Seconds(10)), "connect B");
    Unwrap(ring_->ConnectPeer(b_->grpc_address()), "A connects B");
    src_ = AddShm(*ring_, *a_, "src", false, false);
    dst_ = AddShm(*b_client_, *b_, "dst", true, true);
    for (uint64_t i = 0; i < kSize; ++i) src_->data()[i] = static_cast<uint8_t>(i * 7 + i / 4096);
  }

  void TearDown() override {
    ring_.reset();
    grpc_.reset();
    b_client_.reset();
    for (std::unique_ptr<Daemon>* d : {&a_, &b_}) {
      absl::StatusOr<int> code = (*d)->Stop();
      EXPECT_TRUE(code.ok() && *code == 0) << (*d)->Log();
    }
  }

  // Registers through `c`, maps through `daemon`'s local socket (B's
  // client talks over TCP).
  std::unique_ptr<client::ShmRegion> AddShm(Client& c, const Daemon& daemon,
                                            const std::string& name, bool write, bool read) {
    v1::RegisterRegionRequest request;
    request.set_name(name);
    request.set_size(kSize);
    request.set_backing(v1::REGION_BACKING_SHM);
    request.mutable_access()->set_remote_write(write);
    request.mutable_access()->set_remote_read(read);
    Unwrap(c.RegisterRegion(request), "register");
    return Unwrap(client::ShmRegion::Open(client::LocalSocketFor(daemon.unix_target()), name),
                  "map shm");
  }

  static v1::WriteRequest Write(uint64_t src_offset, uint64_t dst_offset, uint64_t length) {
    v1::WriteRequest w;
    w.set_src_region("src");
    w.set_src_offset(src_offset);
    w.set_peer("node-b");
    w.set_dst_region("dst");
    w.set_dst_offset(dst_offset);
    w.set_length(length);
    w.set_wait(true);
    return w;
  }

  std::unique_ptr<ScratchDir> dir_;
  std::unique_ptr<Daemon> a_, b_;
  std::unique_ptr<Client> ring_, grpc_, b_client_;
  // Waits (20 s at most) until daemon a has no transfer in flight and no
  // more descriptors open than `fds_before`; then its newest transfer.
  v1::Transfer LastOnceAllEnded(size_t fds_before) {
    bool ended = false;
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (!ended && absl::Now() < deadline) {
      ended = Unwrap(grpc_->ListTransfers({}), "list").transfers_size() == 0 &&
              OpenFds(a_->pid()) <= fds_before;
      if (!ended) absl::SleepFor(absl::Milliseconds(5));
    }
    EXPECT_TRUE(ended) << "fds before " << fds_before << ", now " << OpenFds(a_->pid());
    v1::ListTransfersRequest finished;
    finished.set_include_finished(true);
    const v1::ListTransfersResponse all = Unwrap(grpc_->ListTransfers(finished), "list");
    EXPECT_GE(all.transfers_size(), 1);
    return all.transfers_size() > 0 ? all.transfers(0) : v1::Transfer();
  }

  std::unique_ptr<client::ShmRegion> src_, dst_;
};

TEST_F(RingIntegrationTest, UnixClientsUseTheRingsAndTcpClientsDoNot) {
  EXPECT_NE(ring_->rings(), nullptr);
  EXPECT_EQ(grpc_->rings(), nullptr);
  EXPECT_EQ(b_client_->rings(), nullptr);
  const v1::NodeInfo node = Unwrap(ring_->GetNodeInfo(), "node info");
  EXPECT_EQ(node.local_socket(), a_->unix_target().substr(5) + ".local");
}

// Every form and every refusal: the ring's outcome is the gRPC one, and the
// bytes of each done request are in place.
TEST_F(RingIntegrationTest, RingAndGrpcAgreeOnEveryRequest) {
  std::vector<std::pair<std::string, v1::WriteRequest>> cases;
  cases.push_back({"range", Write(4096, 8192, 65536 + 17)});
  v1::WriteRequest small = Write(0, 0, 0);
  std::vector<uint64_t> offsets = {0, 3 * 4096, 9 * 4096};
  small.mutable_blocks()->mutable_list()->set_src_offsets(Packed(offsets));
  small.mutable_blocks()->mutable_list()->set_dst_offsets(Packed({40960, 0, 81920}));
  small.mutable_blocks()->mutable_list()->set_block_length(4096);
  cases.push_back({"list inline", small});
  v1::WriteRequest large = Write(0, 0, 0);
  std::vector<uint64_t> src(2000), dst(2000);
  for (uint64_t i = 0; i < 2000; ++i) {
    src[i] = i * 4096;
    dst[i] = (1999 - i) * 4096;
  }
  large.mutable_blocks()->mutable_list()->set_src_offsets(Packed(src));
  large.mutable_blocks()->mutable_list()->set_dst_offsets(Packed(dst));
  large.mutable_blocks()->mutable_list()->set_block_length(1024);
  cases.push_back({"list in the buffer area", large});
  v1::WriteRequest strided = Write(0, 0, 0);
  v1::StridedRun* run = strided.mutable_blocks()->mutable_strided()->add_runs();
  run->set_src_start(0);
  run->set_dst_start(1 << 20);
  run->set_block_length(512);
  run->set_src_stride(4096);
  run->set_dst_stride(1024);
  run->set_count(300);
  cases.push_back({"strided", strided});
  cases.push_back({"unknown source region", [] {
                     v1::WriteRequest w = Write(0, 0, 4096);
                     w.set_src_region("nope");
                     return w;
                   }()});
  cases.push_back({"beyond the destination", Write(0, kSize - 100, 4096)});
  cases.push_back({"zero length", Write(0, 0, 0)});
  cases.push_back({"unknown peer", [] {
                     v1::WriteRequest w = Write(0, 0, 4096);
                     w.set_peer("node-z");
                     return w;
                   }()});
  cases.push_back({"slice too small", [] {
                     v1::WriteRequest w = Write(0, 0, 65536);
                     w.set_slice_size(1024);
                     return w;
                   }()});
  v1::WriteRequest overlap = small;
  overlap.mutable_blocks()->mutable_list()->set_dst_offsets(Packed({0, 2048, 81920}));
  cases.push_back({"overlapping blocks", overlap});
  for (const auto& [name, request] : cases) {
    std::memset(dst_->data(), 0, kSize);
    absl::StatusOr<v1::Transfer> over_ring = ring_->Write(request);
    const std::vector<uint8_t> ring_bytes(dst_->data(), dst_->data() + kSize);
    std::memset(dst_->data(), 0, kSize);
    absl::StatusOr<v1::Transfer> over_grpc = grpc_->Write(request);
    ASSERT_EQ(over_ring.status(), over_grpc.status()) << name;
    if (!over_ring.ok()) continue;
    EXPECT_EQ(over_ring->state(), over_grpc->state()) << name;
    EXPECT_EQ(over_ring->state(), v1::TRANSFER_STATE_DONE) << name << ": "
                                                           << over_ring->error().message();
    EXPECT_EQ(over_ring->length(), over_grpc->length()) << name;
    EXPECT_EQ(over_ring->bytes_done(), over_grpc->bytes_done()) << name;
    EXPECT_EQ(over_ring->blocks(), over_grpc->blocks()) << name;
    EXPECT_EQ(over_ring->slices(), over_grpc->slices()) << name;
    EXPECT_TRUE(std::equal(ring_bytes.begin(), ring_bytes.end(), dst_->data()))
        << name << ": the ring placed other bytes than gRPC";
    EXPECT_FALSE(std::all_of(ring_bytes.begin(), ring_bytes.end(), [](uint8_t b) { return b == 0; }))
        << name << ": nothing landed";
  }
}

TEST_F(RingIntegrationTest, ReadsAndLayoutsGoThroughTheRingToo) {
  for (uint64_t i = 0; i < kSize; ++i) dst_->data()[i] = static_cast<uint8_t>(i * 13);
  v1::ReadRequest read;
  read.set_peer("node-b");
  read.set_src_region("dst");
  read.set_src_offset(12345);
  read.set_dst_region("src");
  read.set_dst_offset(0);
  read.set_length(1 << 20);
  read.set_wait(true);
  const v1::Transfer t = Unwrap(ring_->Read(read), "read");
  ASSERT_EQ(t.state(), v1::TRANSFER_STATE_DONE) << t.error().message();
  EXPECT_EQ(t.direction(), v1::Transfer::DIRECTION_READ);
  EXPECT_EQ(std::memcmp(src_->data(), dst_->data() + 12345, 1 << 20), 0);

  v1::PrepareLayoutRequest local, remote;
  local.set_name("l-src");
  local.set_region("src");
  local.set_block_length(4096);
  local.set_count(64);
  local.set_stride(4096);
  remote = local;
  remote.set_name("l-dst");
  remote.set_region("dst");
  remote.set_peer("node-b");
  Unwrap(ring_->PrepareLayout(local), "local layout");
  Unwrap(ring_->PrepareLayout(remote), "remote layout");
  v1::WriteRequest w;
  w.set_peer("node-b");
  w.set_wait(true);
  std::vector<uint32_t> from = {0, 1, 2, 63}, to = {10, 11, 12, 0};
  w.mutable_blocks()->mutable_layout()->set_src_layout("l-src");
  w.mutable_blocks()->mutable_layout()->set_dst_layout("l-dst");
  w.mutable_blocks()->mutable_layout()->set_src_indices(Packed32(from));
  w.mutable_blocks()->mutable_layout()->set_dst_indices(Packed32(to));
  const v1::Transfer lt = Unwrap(ring_->Write(w), "layout write");
  ASSERT_EQ(lt.state(), v1::TRANSFER_STATE_DONE) << lt.error().message();
  EXPECT_EQ(lt.blocks(), 4u);
  for (size_t i = 0; i < from.size(); ++i) {
    EXPECT_EQ(std::memcmp(src_->data() + from[i] * 4096, dst_->data() + to[i] * 4096, 4096), 0);
  }
}

// A verified request takes the ring when its checksums fit a completion
// (64 of them), and comes back as over gRPC: the same CRC-64s, a restore
// checked against them, the same DATA_LOSS when the source changed since;
// with more checksums it goes over gRPC and gets them all.
TEST_F(RingIntegrationTest, VerifiedRequestsRideTheRingWhenTheirChecksumsFit) {
  const uint64_t default_slice = Unwrap(ring_->GetNodeInfo(), "node info").default_slice_size();
  v1::WriteRequest blocks = Write(0, 0, 0);
  std::vector<uint64_t> from(64), to(64);
  for (uint64_t i = 0; i < 64; ++i) {
    from[i] = i * 16384;
    to[i] = (63 - i) * 16384;
  }
  blocks.mutable_blocks()->mutable_list()->set_src_offsets(Packed(from));
  blocks.mutable_blocks()->mutable_list()->set_dst_offsets(Packed(to));
  blocks.mutable_blocks()->mutable_list()->set_block_length(16384);
  blocks.set_verify(true);
  v1::WriteRequest range = Write(0, 0, 1 << 20);
  range.set_slice_size(64 << 10);  // 16 checksums
  range.set_verify(true);
  for (const v1::WriteRequest* w : {&blocks, &range}) {
    ASSERT_TRUE(client::RingWrite(*w, default_slice).has_value());
    std::memset(dst_->data(), 0, kSize);
    const v1::Transfer over_ring = Unwrap(ring_->Write(*w), "verified ring write");
    ASSERT_EQ(over_ring.state(), v1::TRANSFER_STATE_DONE) << over_ring.error().message();
    const v1::Transfer over_grpc = Unwrap(grpc_->Write(*w), "verified gRPC write");
    EXPECT_TRUE(over_ring.verify());
    EXPECT_EQ(over_ring.checksums().size(), (w == &blocks ? 64u : 16u) * 8);
    EXPECT_EQ(over_ring.checksums(), over_grpc.checksums());
  }
  const std::string stored = Unwrap(ring_->Write(range), "write").checksums();
  v1::ReadRequest restore;
  restore.set_peer("node-b");
  restore.set_src_region("dst");
  restore.set_dst_region("src");
  restore.set_length(1 << 20);
  restore.set_slice_size(64 << 10);
  restore.set_expected_checksums(stored);
  restore.set_wait(true);
  ASSERT_TRUE(client::RingRead(restore, default_slice).has_value());
  const v1::Transfer restored = Unwrap(ring_->Read(restore), "restore");
  ASSERT_EQ(restored.state(), v1::TRANSFER_STATE_DONE) << restored.error().message();
  EXPECT_EQ(restored.checksums(), stored);
  dst_->data()[7 * 65536 + 5] ^= 0xff;  // altered since: slice 7 differs
  const v1::Transfer ring_says = Unwrap(ring_->Read(restore), "altered restore (ring)");
  const v1::Transfer grpc_says = Unwrap(grpc_->Read(restore), "altered restore (gRPC)");
  EXPECT_EQ(ring_says.error().code(), static_cast<int>(absl::StatusCode::kDataLoss));
  EXPECT_EQ(ring_says.error().code(), grpc_says.error().code());
  EXPECT_NE(ring_says.error().message().find("block #7 "), std::string::npos)
      << ring_says.error().message();
  // 128 checksums: over gRPC, every one of them.
  range.set_slice_size(8 << 10);
  EXPECT_FALSE(client::RingWrite(range, default_slice).has_value());
  EXPECT_EQ(Unwrap(ring_->Write(range), "write").checksums().size(), 128u * 8);
}

// A ring transfer is the daemon's like any other: queued with its id,
// listed, watched and waited for over gRPC, counted in the stats.
TEST_F(RingIntegrationTest, RingTransfersAreListedWatchedAndCounted) {
  v1::WriteRequest w = Write(0, 0, 4 << 20);
  w.set_wait(false);
  w.set_slice_size(64 << 10);
  w.set_label("from-the-ring");
  const v1::Transfer queued = Unwrap(ring_->Write(w), "write");
  ASSERT_NE(queued.id(), 0u);
  EXPECT_EQ(queued.length(), 4u << 20);
  const v1::Transfer done = Unwrap(grpc_->WaitTransfer(queued.id()), "wait over gRPC");
  EXPECT_EQ(done.state(), v1::TRANSFER_STATE_DONE);
  EXPECT_EQ(done.label(), "from-the-ring");
  EXPECT_EQ(std::memcmp(src_->data(), dst_->data(), 4 << 20), 0);
  v1::ListTransfersRequest list;
  list.set_include_finished(true);
  const v1::ListTransfersResponse all = Unwrap(grpc_->ListTransfers(list), "list");
  EXPECT_TRUE(std::any_of(all.transfers().begin(), all.transfers().end(),
                          [&](const v1::Transfer& t) { return t.id() == queued.id(); }));
  const v1::Stats stats = Unwrap(grpc_->GetStats(), "stats");
  EXPECT_GE(stats.transfers_done(), 1u);
}

// Garbage in its own rings gets a client errors, never the daemon's
// attention elsewhere: another client's writes carry on meanwhile.
TEST_F(RingIntegrationTest, AHostileClientGetsErrorsAndHurtsNoOneElse) {
  RawRings raw(a_->unix_target());
  const uint32_t peer = raw.Intern("node-b"), src = raw.Intern("src"), dst = raw.Intern("dst");
  ASSERT_NE(peer, 0u);
  std::mt19937_64 random(7);
  uint64_t tail = 0;
  auto put = [&](const rings::Sqe& e) {
    raw.sq()[tail & (raw.geometry().sq_entries - 1)] = e;
    raw.Publish(++tail);
  };
  // Random bytes as an entry: refused, naming what is wrong.
  rings::Sqe junk;
  for (auto* w = reinterpret_cast<uint64_t*>(&junk); w < reinterpret_cast<uint64_t*>(&junk + 1);
       ++w) {
    *w = random();
  }
  junk.ext = 0;
  put(junk);
  std::string message;
  std::optional<rings::Cqe> c = raw.Completion(0, &message);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->code, static_cast<uint32_t>(absl::StatusCode::kInvalidArgument)) << message;
  EXPECT_EQ(c->transfer_id, 0u);
  // Arrays beyond the buffer area: refused.
  rings::Sqe list{};
  list.opcode = rings::kOpWrite;
  list.form = rings::kFormList;
  list.peer = peer;
  list.src = src;
  list.dst = dst;
  list.user_data = 42;
  list.a = 1000;
  list.b = 4096;
  list.c = raw.geometry().buffer_bytes - 8;
  put(list);
  c = raw.Completion(1, &message);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->user_data, 42u);
  EXPECT_EQ(c->code, static_cast<uint32_t>(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(message.find("exceed the buffer area"), std::string::npos) << message;
  // A handle never interned: refused, naming the field.
  rings::Sqe unknown = list;
  unknown.form = rings::kFormRange;
  unknown.c = 4096;
  unknown.dst = 999;
  put(unknown);
  c = raw.Completion(2, &message);
  ASSERT_TRUE(c.has_value());
  EXPECT_NE(message.find("dst is handle 999"), std::string::npos) << message;
  // Meanwhile a well-behaved client moves data as ever.
  const v1::Transfer t = Unwrap(ring_->Write(Write(0, 0, 1 << 20)), "write");
  EXPECT_EQ(t.state(), v1::TRANSFER_STATE_DONE);
  EXPECT_EQ(std::memcmp(src_->data(), dst_->data(), 1 << 20), 0);
  // The tail moved a whole ring ahead: the daemon stops serving these rings
  // and says so; the other client is unaffected.
  raw.Publish(tail + 1000);
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (rings::LoadAcquire(raw.header().closed.value) == 0 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  EXPECT_EQ(rings::LoadAcquire(raw.header().closed.value), 2u);
  const v1::Transfer again = Unwrap(ring_->Write(Write(4096, 4096, 65536)), "write after");
  EXPECT_EQ(again.state(), v1::TRANSFER_STATE_DONE);
}

// A client killed mid-transfer: its transfer ends, and its memory and
// descriptors go with its session; nothing stays behind.
TEST_F(RingIntegrationTest, AClientKilledMidTransferLeavesNothingBehind) {
  const size_t fds_before = OpenFds(a_->pid());
  const pid_t child = SpawnWriter(a_->unix_target(), "waits");
  ASSERT_GT(child, 0);
  // Until its transfer runs.
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  bool running = false;
  while (!running && absl::Now() < deadline) {
    const v1::ListTransfersResponse live = Unwrap(grpc_->ListTransfers({}), "list");
    running = live.transfers_size() > 0;
    if (!running) absl::SleepFor(absl::Milliseconds(2));
  }
  ASSERT_TRUE(running) << "the child's transfer never started";
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status)) << "the writer ended before it was killed";
  // Its transfer ends (cancelled with its session), and its session's
  // descriptors close.
  const v1::Transfer last = LastOnceAllEnded(fds_before);
  EXPECT_EQ(last.state(), v1::TRANSFER_STATE_CANCELLED);
  EXPECT_NE(last.error().message().find("session closed"), std::string::npos)
      << last.error().message();
}

// A write submitted detached (what the C++ client does for a request it
// does not wait for, as `xferctl write --no-wait`) runs on to its end after
// its client exits, as over gRPC; every byte lands, and the session's
// descriptors close once it ends.
TEST_F(RingIntegrationTest, ADetachedWriteOutlivesItsClient) {
  std::memset(dst_->data(), 0, kSize);
  const size_t fds_before = OpenFds(a_->pid());
  const pid_t child = SpawnWriter(a_->unix_target(), "detached");
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "the writer failed: " << status;
  const v1::Transfer last = LastOnceAllEnded(fds_before);
  EXPECT_EQ(last.state(), v1::TRANSFER_STATE_DONE) << last.error().message();
  EXPECT_EQ(std::memcmp(src_->data(), dst_->data(), kSize), 0) << "the detached write's bytes";
}

// Sessions opened and closed by a thousand clients leave no descriptor or
// mapping behind in the daemon.
TEST_F(RingIntegrationTest, AThousandSessionsLeakNothing) {
  const size_t fds_before = OpenFds(a_->pid());
  for (int i = 0; i < 1000; ++i) {
    RawRings raw(a_->unix_target());
    ASSERT_NE(raw.Intern("src"), 0u);
  }
  bool settled = false;
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (!settled && absl::Now() < deadline) {
    settled = OpenFds(a_->pid()) <= fds_before;
    if (!settled) absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_TRUE(settled) << "fds before " << fds_before << ", after " << OpenFds(a_->pid());
  std::ifstream maps("/proc/" + std::to_string(a_->pid()) + "/maps");
  std::string line;
  int ring_maps = 0;
  while (std::getline(maps, line)) ring_maps += line.find("xferd-rings") != std::string::npos;
  EXPECT_LE(ring_maps, 2) << "ring mappings left (the two test clients' own are allowed)";
}

}  // namespace
}  // namespace xferd::integration
