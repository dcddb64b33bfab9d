// Entries as a client writes them, read as the daemon does: what each form
// becomes, and refusals that name the field. Arbitrary bytes are the fuzz
// target's (tests/fuzz/ring_entry_fuzzer.cc).
#include "daemon/rings/entry_reader.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace xferd::rings {
namespace {

class EntryReaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    peer_ = *names_.Intern("node-b");
    src_ = *names_.Intern("src");
    dst_ = *names_.Intern("dst");
  }
  Sqe Entry(uint8_t form = kFormRange) const {
    Sqe e{};
    e.opcode = kOpWrite;
    e.form = form;
    e.peer = peer_;
    e.src = src_;
    e.dst = dst_;
    e.user_data = 42;
    return e;
  }
  absl::StatusOr<RingRequest> Read(const Sqe& e, const std::vector<uint64_t>& inline_words,
                                   const std::vector<uint64_t>& buffer_words) const {
    inline_.resize(inline_words.size() * 8);
    if (!inline_words.empty()) std::memcpy(inline_.data(), inline_words.data(), inline_.size());
    buffer_.resize(buffer_words.size() * 8);
    if (!buffer_words.empty()) std::memcpy(buffer_.data(), buffer_words.data(), buffer_.size());
    return ReadEntry(e, EntryArrays{inline_, buffer_}, names_);
  }
  static void ExpectRefused(const absl::StatusOr<RingRequest>& r, absl::string_view says) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(says), absl::string_view::npos) << r.status();
  }

  NameTable names_;
  uint32_t peer_ = 0, src_ = 0, dst_ = 0;
  mutable std::vector<std::byte> inline_, buffer_;
};

TEST_F(EntryReaderTest, ARangeIsItsFields) {
  Sqe e = Entry();
  e.opcode = kOpRead;
  e.flags = kFlagQueuedNotice | kFlagDetached;
  e.a = 4096;
  e.b = 8192;
  e.c = 65536;
  e.slice_kib = 64;
  e.timeout_ms = 1500;
  const absl::StatusOr<RingRequest> r = Read(e, {}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.direction, transport::OpKind::kRead);
  EXPECT_TRUE(r->queued_notice);
  EXPECT_TRUE(r->spec.detached);
  EXPECT_EQ(r->spec.peer, "node-b");
  EXPECT_EQ(r->spec.src_region, "src");
  EXPECT_EQ(r->spec.dst_region, "dst");
  EXPECT_EQ(r->spec.src_offset, 4096u);
  EXPECT_EQ(r->spec.dst_offset, 8192u);
  EXPECT_EQ(r->spec.length, 65536u);
  EXPECT_EQ(r->spec.slice_size, 64u << 10);
  EXPECT_EQ(r->spec.timeout, absl::Milliseconds(1500));
  EXPECT_EQ(r->spec.user_data, 42u);
  EXPECT_EQ(r->spec.priority, engine::Priority::kNormal);  // 0: the default
}

TEST_F(EntryReaderTest, APriorityByteNamesItsClass) {
  Sqe e = Entry();
  e.priority = 1;
  absl::StatusOr<RingRequest> r = Read(e, {}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.priority, engine::Priority::kCritical);
  e.priority = 4;
  r = Read(e, {}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.priority, engine::Priority::kBackground);
}

TEST_F(EntryReaderTest, ListsComeInlineOrFromTheBuffer) {
  Sqe e = Entry(kFormList);
  e.a = 2;
  e.b = 4096;
  e.ext = 1;
  absl::StatusOr<RingRequest> r = Read(e, {0, 8192, 4096, 0, 0, 0, 0, 0}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.blocks.src_offsets, (std::vector<uint64_t>{0, 8192}));
  EXPECT_EQ(r->spec.blocks.dst_offsets, (std::vector<uint64_t>{4096, 0}));
  EXPECT_EQ(r->spec.blocks.block_length, 4096u);

  e.ext = 0;
  e.b = 0;  // a lengths array follows the offsets
  e.c = 8;  // at byte 8 of the buffer area
  r = Read(e, {}, {0xdead, 0, 100, 500, 0, 50, 60});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.blocks.src_offsets, (std::vector<uint64_t>{0, 100}));
  EXPECT_EQ(r->spec.blocks.dst_offsets, (std::vector<uint64_t>{500, 0}));
  EXPECT_EQ(r->spec.blocks.lengths, (std::vector<uint64_t>{50, 60}));
}

TEST_F(EntryReaderTest, VerifyIsAskedForEitherWayOrLeftToTheDaemon) {
  Sqe e = Entry();
  e.c = 4096;
  absl::StatusOr<RingRequest> r = Read(e, {}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->spec.verify.has_value());  // the daemon's engine.verify
  e.flags = kFlagVerify;
  r = Read(e, {}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.verify, std::optional<bool>(true));
  e.flags = kFlagNoVerify;
  r = Read(e, {}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.verify, std::optional<bool>(false));
  EXPECT_EQ(r->spec.expected_checksums, nullptr);
}

TEST_F(EntryReaderTest, ExpectedChecksumsFollowTheArraysWhereverTheyAre) {
  // A range has no arrays: its checksums are inline.
  Sqe e = Entry();
  e.opcode = kOpRead;
  e.c = 3 << 20;
  e.expected = 3;
  e.ext = 1;
  absl::StatusOr<RingRequest> r = Read(e, {11, 22, 33, 0, 0, 0, 0, 0}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.length, 3u << 20);
  EXPECT_FALSE(r->spec.verify.has_value());  // implied, by the engine
  ASSERT_NE(r->spec.expected_checksums, nullptr);
  EXPECT_EQ(*r->spec.expected_checksums, (std::vector<uint64_t>{11, 22, 33}));
  // A list in the buffer area: its checksums after its two offset arrays.
  e = Entry(kFormList);
  e.opcode = kOpRead;
  e.a = 2;
  e.b = 4096;
  e.c = 8;
  e.expected = 2;
  r = Read(e, {}, {0xdead, 0, 8192, 4096, 0, 0xc1, 0xc2});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.blocks.src_offsets, (std::vector<uint64_t>{0, 8192}));
  EXPECT_EQ(r->spec.blocks.dst_offsets, (std::vector<uint64_t>{4096, 0}));
  ASSERT_NE(r->spec.expected_checksums, nullptr);
  EXPECT_EQ(*r->spec.expected_checksums, (std::vector<uint64_t>{0xc1, 0xc2}));
  // ... and bounded with them: one checksum short of the area.
  ExpectRefused(Read(e, {}, {0xdead, 0, 8192, 4096, 0, 0xc1}), "exceed the buffer area");
}

// What only the engine can refuse (it does, as for gRPC) passes through.
TEST_F(EntryReaderTest, ExpectedChecksumsOnAWriteOrWithoutVerifyAreTheEnginesToRefuse) {
  Sqe e = Entry();  // a write
  e.c = 4096;
  e.expected = 1;
  e.ext = 1;
  absl::StatusOr<RingRequest> r = Read(e, {9, 0, 0, 0, 0, 0, 0, 0}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_NE(r->spec.expected_checksums, nullptr);
  e.opcode = kOpRead;
  e.flags = kFlagNoVerify;
  r = Read(e, {9, 0, 0, 0, 0, 0, 0, 0}, {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->spec.verify, std::optional<bool>(false));
  ASSERT_NE(r->spec.expected_checksums, nullptr);
}

TEST_F(EntryReaderTest, RefusalsNameWhatIsWrong) {
  Sqe e = Entry();
  e.opcode = 9;
  ExpectRefused(Read(e, {}, {}), "opcode");
  e = Entry();
  e.flags = 0x80;
  ExpectRefused(Read(e, {}, {}), "flags");
  e = Entry();
  e.priority = 5;
  ExpectRefused(Read(e, {}, {}), "priority 5 is unknown");
  e = Entry();
  e.dst = 77;
  ExpectRefused(Read(e, {}, {}), "dst");
  e = Entry(kFormList);
  e.a = 3;
  e.b = 4096;
  e.c = 8;  // 48 bytes from byte 8 of a 40-byte buffer
  ExpectRefused(Read(e, {}, {1, 2, 3, 4, 5}), "exceed the buffer area");
  e.c = ~uint64_t{0} - 4;  // an offset that wraps
  ExpectRefused(Read(e, {}, {1, 2, 3, 4, 5}), "exceed the buffer area");
  e = Entry(kFormList);
  e.a = 2;
  e.b = 4096;
  e.ext = 1;
  e.c = 16;
  ExpectRefused(Read(e, {0, 0, 0, 0, 0, 0, 0, 0}, {}), "c must be 0");
  e = Entry(kFormList);
  e.a = uint64_t{1} << 40;
  e.b = 4096;
  ExpectRefused(Read(e, {}, {}), "give 1 to");
  e = Entry();
  e.flags = kFlagVerify | kFlagNoVerify;
  ExpectRefused(Read(e, {}, {}), "verify and for no verify");
  e = Entry();
  e.opcode = kOpRead;
  e.expected = 1;
  e.ext = 0;  // a range's checksums are inline
  ExpectRefused(Read(e, {}, {1}), "ext > 0 exactly when expected > 0");
  e = Entry();
  e.ext = 1;  // a range without checksums has no slots
  ExpectRefused(Read(e, {0, 0, 0, 0, 0, 0, 0, 0}, {}), "ext > 0 exactly when expected > 0");
}

}  // namespace
}  // namespace xferd::rings
