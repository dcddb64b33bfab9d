// WatchRegion's reactor on a real gRPC server over loopback TCP, with the
// region's hub fed by a thread standing in for a poller.
#include "daemon/service/region_watch.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "daemon/memory/memory_backing.h"
#include "xferd/v1/xferd.grpc.pb.h"

namespace xferd::service {
namespace {

// Answers WatchRegion for one region only.
class OneRegionService final : public v1::Xferd::CallbackService {
 public:
  OneRegionService(std::shared_ptr<memory::Region> region, WatchLoop& loop)
      : region_(std::move(region)), loop_(loop) {}
  grpc::ServerWriteReactor<v1::RegionEvent>* WatchRegion(grpc::CallbackServerContext*,
                                                         const v1::WatchRegionRequest*) override {
    return new RegionWatchReactor(region_, loop_);
  }

 private:
  const std::shared_ptr<memory::Region> region_;
  WatchLoop& loop_;
};

std::shared_ptr<memory::Region> MakeRegion() {
  memory::RegionSpec spec;
  spec.name = "dst";
  spec.size = 4096;
  return std::make_shared<memory::Region>(
      1, spec, *memory::MemoryBacking::Create({memory::Backing::kAnonymous, 4096}));
}

class RegionWatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    // A fixed, small receive window: a client that stops reading stops the
    // server's writes soon, as a slow application on a real network would.
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
    args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 64 * 1024);
    stub_ = v1::Xferd::NewStub(grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port),
                                                         grpc::InsecureChannelCredentials(), args));
  }
  void TearDown() override { server_->Shutdown(std::chrono::system_clock::now()); }

  std::shared_ptr<memory::Region> region_ = MakeRegion();
  WatchLoop loop_;
  OneRegionService service_{region_, loop_};
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<v1::Xferd::Stub> stub_;
};

// A watcher that stops reading cannot hold up the poller that publishes: the
// poller's events all go through while nothing is read, and the watcher,
// reading at last, accounts for every event, received or dropped.
TEST_F(RegionWatchTest, AStuckWatcherNeverHoldsUpThePoller) {
  constexpr uint64_t kEvents = 200000;
  grpc::ClientContext context;
  v1::WatchRegionRequest request;
  request.set_name("dst");
  std::unique_ptr<grpc::ClientReader<v1::RegionEvent>> reader =
      stub_->WatchRegion(&context, request);
  v1::RegionEvent event;
  ASSERT_TRUE(reader->Read(&event));
  ASSERT_EQ(event.kind(), v1::RegionEvent::KIND_SUBSCRIBED);

  absl::Duration slowest;
  std::thread poller([&] {
    for (uint64_t i = 1; i <= kEvents; ++i) {
      const absl::Time start = absl::Now();
      region_->landed().Publish(memory::LandedEvent{i * 16, 16, "node-a", i});
      slowest = std::max(slowest, absl::Now() - start);
    }
  });
  poller.join();  // a poller held up by the watcher would never get here
  RecordProperty("slowest_publish_us", static_cast<int>(absl::ToInt64Microseconds(slowest)));

  uint64_t received = 0, dropped = 0, last = 0;
  while (last < kEvents) {
    ASSERT_TRUE(reader->Read(&event)) << "after sequence " << last;
    ASSERT_EQ(event.kind(), v1::RegionEvent::KIND_LANDED);
    ASSERT_EQ(event.sequence(), last + 1 + event.dropped());
    ASSERT_EQ(event.source_transfer_id(), event.sequence());
    ASSERT_EQ(event.offset(), event.sequence() * 16);
    EXPECT_EQ(event.source_node(), "node-a");
    EXPECT_EQ(event.region(), "dst");
    last = event.sequence();
    ++received;
    dropped += event.dropped();
  }
  EXPECT_EQ(received + dropped, kEvents);
  EXPECT_GT(dropped, 0u) << "the watcher read everything: it was never stuck";
  RecordProperty("dropped", static_cast<int>(dropped));

  region_->landed().Close();
  ASSERT_TRUE(reader->Read(&event));
  EXPECT_EQ(event.kind(), v1::RegionEvent::KIND_DEREGISTERED);
  EXPECT_FALSE(reader->Read(&event));
  EXPECT_TRUE(reader->Finish().ok());
}

}  // namespace
}  // namespace xferd::service
