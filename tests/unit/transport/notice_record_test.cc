#include "daemon/transport/verbs/notice_record.h"

#include <gtest/gtest.h>

#include <cstring>

namespace xferd::transport::verbs {
namespace {

class NoticeRecordTest : public testing::Test {
 protected:
  void SetUp() override {
    dst_ = Register("dst", 1 << 20, true, {});
    readonly_ = Register("readonly", 4096, false, {});
    private_ = Register("private", 4096, true, {"someone-else"});
  }

  std::shared_ptr<memory::Region> Register(std::string name, uint64_t size, bool remote_write,
                                           std::vector<std::string> acl) {
    memory::RegionSpec spec;
    spec.name = std::move(name);
    spec.size = size;
    spec.access.remote_write = remote_write;
    spec.allowed_peers = std::move(acl);
    auto region = regions_.Register(spec, nullptr);
    EXPECT_TRUE(region.ok()) << region.status();
    return *region;
  }

  // The record for `blocks` blocks and `bytes` payload bytes in dst's span.
  NoticeRecord Record(uint64_t offset, uint64_t length, uint64_t blocks, uint64_t bytes) const {
    return NoticeRecord{dst_->id(), LandingNotice{77, offset, length, blocks, bytes}};
  }

  memory::RegionRegistry regions_{memory::RegistryOptions{}};
  std::shared_ptr<memory::Region> dst_, readonly_, private_;
};

TEST_F(NoticeRecordTest, RoundTripsEveryField) {
  const NoticeRecord in{0x01020304, LandingNotice{0x1112131415161718, 0x2122232425262728,
                                                  0x3132333435363738, 0x41424344, 0x5152535455}};
  uint8_t bytes[kNoticeRecordBytes];
  EncodeNoticeRecord(in, bytes);
  // Little-endian at fixed offsets: the peer may be another build.
  EXPECT_EQ(bytes[0], 0x58);  // "XRFN"
  EXPECT_EQ(bytes[4], 0x04);
  EXPECT_EQ(bytes[32], 0x44);
  EXPECT_EQ(bytes[40], 0x55);
  NoticeRecord out;
  ASSERT_TRUE(DecodeNoticeRecord(bytes, &out));
  EXPECT_EQ(out.region_id, in.region_id);
  EXPECT_EQ(out.notice.transfer_id, in.notice.transfer_id);
  EXPECT_EQ(out.notice.offset, in.notice.offset);
  EXPECT_EQ(out.notice.length, in.notice.length);
  EXPECT_EQ(out.notice.blocks, in.notice.blocks);
  EXPECT_EQ(out.notice.bytes, in.notice.bytes);
}

TEST_F(NoticeRecordTest, RejectsWrongMagic) {
  uint8_t bytes[kNoticeRecordBytes];
  EncodeNoticeRecord(Record(0, 4096, 1, 4096), bytes);
  bytes[0] ^= 1;
  NoticeRecord out;
  EXPECT_FALSE(DecodeNoticeRecord(bytes, &out));
}

TEST_F(NoticeRecordTest, AcceptsManyBlocksInsideTheirSpan) {
  EXPECT_EQ(AcceptNotice(Record(0, 1 << 20, 1, 1 << 20), regions_, "a"), dst_);
  // 100 scattered 4 KiB blocks between byte 8192 and the end.
  EXPECT_EQ(AcceptNotice(Record(8192, (1 << 20) - 8192, 100, 409600), regions_, "a"), dst_);
}

TEST_F(NoticeRecordTest, RefusesPayloadThatDoesNotFitItsSpan) {
  EXPECT_EQ(AcceptNotice(Record(0, 4096, 2, 8192), regions_, "a"), nullptr);     // bytes > span
  EXPECT_EQ(AcceptNotice(Record(0, 4096, 4097, 4096), regions_, "a"), nullptr);  // empty blocks
  EXPECT_EQ(AcceptNotice(Record(0, 4096, 0, 4096), regions_, "a"), nullptr);     // no block
}

TEST_F(NoticeRecordTest, RefusesWhatThePeerMayNotWrite) {
  EXPECT_EQ(AcceptNotice(Record(4096, 1 << 20, 1, 1 << 20), regions_, "a"), nullptr);  // range
  NoticeRecord readonly{readonly_->id(), LandingNotice{1, 0, 4096, 1, 4096}};
  EXPECT_EQ(AcceptNotice(readonly, regions_, "a"), nullptr);
  NoticeRecord acl{private_->id(), LandingNotice{1, 0, 4096, 1, 4096}};
  EXPECT_EQ(AcceptNotice(acl, regions_, "a"), nullptr);
  EXPECT_EQ(AcceptNotice(acl, regions_, "someone-else"), private_);
  NoticeRecord unknown{999, LandingNotice{1, 0, 4096, 1, 4096}};
  EXPECT_EQ(AcceptNotice(unknown, regions_, "a"), nullptr);
}

}  // namespace
}  // namespace xferd::transport::verbs
