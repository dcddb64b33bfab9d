#include "daemon/service/proto_convert.h"

#include <gtest/gtest.h>

#include "daemon/service/blocks_convert.h"
#include "daemon/service/status_convert.h"

namespace xferd::service {
namespace {

TEST(ProtoConvertTest, RegisterRequest) {
  v1::RegisterRegionRequest r;
  r.set_name("x");
  r.set_size(4096);
  r.set_backing(v1::REGION_BACKING_FILE);
  r.set_file_path("/data/f");
  r.set_create(true);
  r.mutable_access()->set_remote_write(true);
  r.add_allowed_peers("b");
  auto spec = FromProto(r);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->backing, memory::Backing::kFile);
  EXPECT_TRUE(spec->create);
  EXPECT_TRUE(spec->access.remote_write);
  EXPECT_EQ(spec->allowed_peers, std::vector<std::string>{"b"});
  EXPECT_FALSE(spec->landed_ranges);
  r.set_landed_ranges(true);
  EXPECT_TRUE(FromProto(r)->landed_ranges);
  r.set_backing(static_cast<v1::RegionBacking>(42));
  EXPECT_EQ(FromProto(r).status(),
            absl::InvalidArgumentError("unknown region backing 42: choose anonymous, shm or file"));
  // No default: the caller says who may map it and what outlives the daemon.
  r.set_backing(v1::REGION_BACKING_UNSPECIFIED);
  EXPECT_EQ(FromProto(r).status(),
            absl::InvalidArgumentError(
                "region 'x' has no backing: choose anonymous (daemon memory), shm (memory local "
                "clients map) or file (a mapped file under regions.file_dirs)"));
  r.set_backing(v1::REGION_BACKING_ANONYMOUS);
  EXPECT_EQ(FromProto(r)->backing, memory::Backing::kAnonymous);
}

TEST(ProtoConvertTest, WriteRequestDurations) {
  v1::WriteRequest w;
  w.set_src_region("s");
  w.set_peer("b");
  w.set_dst_region("d");
  w.set_length(10);
  auto spec = FromProto(w);
  ASSERT_TRUE(spec.ok());
  EXPECT_EQ(spec->timeout, absl::InfiniteDuration());
  w.mutable_timeout()->set_seconds(2);
  w.mutable_timeout()->set_nanos(500000000);
  EXPECT_EQ(FromProto(w)->timeout, absl::Milliseconds(2500));
  w.mutable_timeout()->set_seconds(-1);
  EXPECT_EQ(FromProto(w).status().code(), absl::StatusCode::kInvalidArgument);
  w.clear_timeout();
  w.clear_peer();
  EXPECT_EQ(FromProto(w).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ProtoConvertTest, PackedBlocksAreLittleEndianAndWhole) {
  v1::ReadRequest r;
  r.set_peer("b");
  r.set_src_region("s");
  r.set_dst_region("d");
  const std::string src("\x01\0\0\0\0\0\0\0\0\x01\0\0\0\0\0\0", 16);  // 1, 256
  r.mutable_blocks()->mutable_list()->set_src_offsets(src);
  r.mutable_blocks()->mutable_list()->set_dst_offsets(src);
  r.mutable_blocks()->mutable_list()->set_block_length(4);
  auto spec = FromProto(r);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->direction, transport::OpKind::kRead);
  EXPECT_EQ(spec->blocks.src_offsets, (std::vector<uint64_t>{1, 256}));
  r.mutable_blocks()->mutable_list()->set_dst_offsets(src.substr(0, 12));
  EXPECT_EQ(FromProto(r).status().message(),
            "blocks.list.dst_offsets is 12 bytes: not a multiple of 8 (one little-endian uint64 "
            "per block, e.g. numpy .astype('<u8').tobytes())");
  r.mutable_blocks()->clear_list();
  EXPECT_EQ(FromProto(r).status().message(), "blocks has no form: set list, strided or layout");
}

TEST(ProtoConvertTest, TransferInfoCarriesTransportAndError) {
  engine::TransferInfo info;
  info.id = 3;
  info.state = engine::TransferState::kFailed;
  info.transport = transport::TransportKind::kVerbs;
  info.error = absl::UnavailableError("peer gone");
  info.submitted_at = absl::FromUnixSeconds(100);
  info.finished_at = absl::FromUnixSeconds(101);
  info.peer_node = "b";
  v1::Transfer t;
  ToProto(info, &t);
  EXPECT_EQ(t.state(), v1::TRANSFER_STATE_FAILED);
  EXPECT_EQ(t.transport(), v1::TRANSPORT_KIND_VERBS);
  EXPECT_EQ(t.error().code(), 14);
  EXPECT_EQ(t.error().message(), "peer gone");
  EXPECT_EQ(t.finished_at().seconds(), 101);
  EXPECT_EQ(t.peer(), "b");
}

TEST(ProtoConvertTest, LandedRangesOnlyForAWatcherThatAsked) {
  memory::LandedEvent e{4096, 8192, "a", 7};
  e.blocks = 2;
  e.bytes = 4096;
  auto ranges = std::make_shared<memory::LandedRanges>();
  ranges->offsets = std::string("\x00\x10\0\0\0\0\0\0\x00\x30\0\0\0\0\0\0", 16);
  ranges->lengths = std::string("\x00\x08\0\0\0\0\0\0\x00\x08\0\0\0\0\0\0", 16);
  e.ranges = ranges;
  v1::RegionEvent asked, plain;
  ToProto(e, "dst", /*ranges=*/true, &asked);
  ToProto(e, "dst", /*ranges=*/false, &plain);
  EXPECT_EQ(asked.range_offsets(), ranges->offsets);
  EXPECT_EQ(asked.range_lengths(), ranges->lengths);
  EXPECT_FALSE(asked.ranges_missing());
  EXPECT_TRUE(plain.range_offsets().empty());
  EXPECT_TRUE(plain.range_lengths().empty());
  EXPECT_EQ(plain.blocks(), 2u);
  e.ranges = nullptr;
  e.ranges_missing = true;
  v1::RegionEvent missing;
  ToProto(e, "dst", /*ranges=*/true, &missing);
  EXPECT_TRUE(missing.ranges_missing());
  EXPECT_TRUE(missing.range_offsets().empty());
}

TEST(StatusConvertTest, KeepsCodeAndMessage) {
  const absl::Status s = absl::OutOfRangeError("too far");
  const grpc::Status g = ToGrpc(s);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::OUT_OF_RANGE);
  EXPECT_EQ(g.error_message(), "too far");
  EXPECT_EQ(FromGrpc(g), s);
  EXPECT_TRUE(ToGrpc(absl::OkStatus()).ok());
}

}  // namespace
}  // namespace xferd::service
