#include "tests/unit/engine/engine_harness.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace xferd::testing {

EngineHarness::EngineHarness(EngineConfig config, TransportMaker make_transport)
    : config_(config), make_transport_(std::move(make_transport)) {}

EngineHarness::~EngineHarness() {
  for (auto& [name, node] : nodes_) node->engine->Stop();
}

Node& EngineHarness::Add(const std::string& name) {
  auto node = std::make_unique<Node>();
  node->name = name;
  memory::RegistryOptions options;
  node->regions = std::make_unique<memory::RegionRegistry>(options);
  transport::Transport* transport = nullptr;
  if (make_transport_ != nullptr) {
    auto made = make_transport_(*node->regions, config_.pollers, name);
    if (!made.ok()) {
      std::fprintf(stderr, "cannot make the transport of %s: %s\n", name.c_str(),
                   made.status().ToString().c_str());
      std::abort();
    }
    node->real_transport = *std::move(made);
    transport = node->real_transport.get();
  } else {
    node->transport = std::make_unique<FakeTransport>(fabric_, *node->regions, config_.pollers,
                                                      config_.lane_depth, fake_kind);
    transport = node->transport.get();
  }
  auto engine = engine::Engine::Create(config_, engine::NodeIdentity{"", 1, ""}, *transport,
                                       *node->regions, rpc_);
  if (!engine.ok()) std::abort();
  node->engine = *std::move(engine);
  node->engine->SetIdentity(name, "addr-" + name);
  rpc_.Add("addr-" + name, node->engine.get());
  return *(nodes_[name] = std::move(node));
}

absl::StatusOr<std::shared_ptr<memory::Region>> EngineHarness::Register(Node& node,
                                                                        memory::RegionSpec spec) {
  std::promise<absl::StatusOr<std::shared_ptr<memory::Region>>> done;
  node.engine->RegisterRegion(std::move(spec), [&](auto r) { done.set_value(std::move(r)); });
  return done.get_future().get();
}

std::shared_ptr<memory::Region> EngineHarness::RegisterOrDie(Node& node, const std::string& name,
                                                             uint64_t size, bool remote_write) {
  memory::RegionSpec spec;
  spec.name = name;
  spec.size = size;
  spec.access.remote_write = remote_write;
  auto region = Register(node, spec);
  if (!region.ok()) std::abort();
  return *region;
}

absl::StatusOr<engine::PeerInfo> EngineHarness::Connect(Node& from, Node& to) {
  std::promise<absl::StatusOr<engine::PeerInfo>> done;
  from.engine->ConnectPeer("addr-" + to.name, absl::Seconds(5),
                           [&](auto r) { done.set_value(std::move(r)); });
  return done.get_future().get();
}

absl::StatusOr<std::vector<std::shared_ptr<engine::Transfer>>> EngineHarness::Submit(
    Node& from, std::vector<engine::TransferSpec> writes, bool batch) {
  std::promise<absl::StatusOr<std::vector<std::shared_ptr<engine::Transfer>>>> done;
  from.engine->Submit(std::move(writes), batch, [&](auto r) { done.set_value(std::move(r)); });
  return done.get_future().get();
}

engine::TransferInfo EngineHarness::Wait(const std::shared_ptr<engine::Transfer>& t,
                                         absl::Duration timeout) {
  WaitUntil([&] { return t->announced(); }, timeout);
  return t->Info();
}

void TwoEngineTest::SetUp() {
  a_ = &h_.Add("a");
  b_ = &h_.Add("b");
  src_ = h_.RegisterOrDie(*a_, "src", 1 << 20, false);
  dst_ = h_.RegisterOrDie(*b_, "dst", 1 << 20, true);
  if (connect_) {
    absl::StatusOr<engine::PeerInfo> peer = h_.Connect(*a_, *b_);
    ASSERT_TRUE(peer.ok()) << peer.status();
  }
}

engine::TransferInfo TwoEngineTest::Write(uint64_t length) {
  Fill(*src_, static_cast<uint8_t>(++writes_));
  absl::StatusOr<std::vector<std::shared_ptr<engine::Transfer>>> submitted =
      h_.Submit(*a_, {Spec("src", "b", "dst", length)});
  EXPECT_TRUE(submitted.ok()) << submitted.status();
  if (!submitted.ok()) return engine::TransferInfo{};
  const engine::TransferInfo info = h_.Wait((*submitted)[0]);
  if (info.state == engine::TransferState::kDone) {
    EXPECT_EQ(std::memcmp(src_->data(), dst_->data(), length), 0) << "dst differs from src";
  }
  return info;
}

engine::TransferSpec Spec(const std::string& src, const std::string& peer, const std::string& dst,
                       uint64_t length, uint64_t src_offset, uint64_t dst_offset) {
  engine::TransferSpec spec;
  spec.src_region = src;
  spec.peer = peer;
  spec.dst_region = dst;
  spec.length = length;
  spec.src_offset = src_offset;
  spec.dst_offset = dst_offset;
  return spec;
}

void Fill(memory::Region& region, uint8_t seed) {
  for (uint64_t i = 0; i < region.size(); ++i) {
    region.data()[i] = static_cast<std::byte>((i * 167 + seed) & 0xff);
  }
}

}  // namespace xferd::testing
