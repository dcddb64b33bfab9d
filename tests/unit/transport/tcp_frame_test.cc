#include "daemon/transport/tcp/tcp_frame.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace xferd::transport::tcp {
namespace {

FrameHeader Write(uint32_t length) {
  FrameHeader h;
  h.type = FrameType::kWrite;
  h.flags = kFlagNotice;
  h.word = 42;
  h.blocks = 3;
  h.length = length;
  h.seq = 0x1122334455667788ull;
  return h;
}

TEST(TcpFrameTest, RoundTripsEveryField) {
  uint8_t bytes[kHeaderBytes];
  EncodeHeader(Write(4096), bytes);
  FrameHeader decoded;
  ASSERT_TRUE(DecodeHeader(bytes, &decoded).ok());
  EXPECT_EQ(decoded.type, FrameType::kWrite);
  EXPECT_EQ(decoded.flags, kFlagNotice);
  EXPECT_EQ(decoded.word, 42u);
  EXPECT_EQ(decoded.length, 4096u);
  EXPECT_EQ(decoded.blocks, 3u);
  EXPECT_EQ(decoded.seq, 0x1122334455667788ull);
}

TEST(TcpFrameTest, WireIsLittleEndian) {
  uint8_t bytes[kHeaderBytes];
  EncodeHeader(Write(1), bytes);
  EXPECT_EQ(std::memcmp(bytes, "XFR2", 4), 0);
  EXPECT_EQ(bytes[6], 3);
  EXPECT_EQ(bytes[8], 42);
  EXPECT_EQ(bytes[24], 0x88);
  EXPECT_EQ(bytes[31], 0x11);
}

TEST(TcpFrameTest, RejectsWhatAPeerCouldGetWrong) {
  uint8_t bytes[kHeaderBytes];
  FrameHeader out;
  EncodeHeader(Write(0), bytes);  // empty WRITE
  EXPECT_FALSE(DecodeHeader(bytes, &out).ok());
  EncodeHeader(Write(kMaxSliceBytes + 1), bytes);
  EXPECT_FALSE(DecodeHeader(bytes, &out).ok());
  EncodeHeader(Write(kMaxSliceBytes), bytes);
  EXPECT_TRUE(DecodeHeader(bytes, &out).ok());

  EncodeHeader(Write(1), bytes);
  bytes[0] ^= 1;  // magic
  EXPECT_NE(DecodeHeader(bytes, &out).message().find("magic"), absl::string_view::npos);
  EncodeHeader(Write(1), bytes);
  bytes[4] = 77;  // type
  EXPECT_FALSE(DecodeHeader(bytes, &out).ok());
  EncodeHeader(Write(1), bytes);
  bytes[5] = 0x80;  // flags
  EXPECT_FALSE(DecodeHeader(bytes, &out).ok());
  EncodeHeader(Write(1), bytes);
  bytes[16] = 1;  // reserved
  EXPECT_FALSE(DecodeHeader(bytes, &out).ok());
  FrameHeader w = Write(1);
  w.blocks = 0;  // a WRITE needs a block table
  EncodeHeader(w, bytes);
  EXPECT_FALSE(DecodeHeader(bytes, &out).ok());
  w.blocks = kMaxBlocksPerOp + 1;
  EncodeHeader(w, bytes);
  EXPECT_FALSE(DecodeHeader(bytes, &out).ok());
  std::memcpy(bytes, "XFR1", 4);  // protocol 1
  EXPECT_NE(DecodeHeader(bytes, &out).message().find("protocol 1"), absl::string_view::npos);

  FrameHeader ack;
  ack.type = FrameType::kAck;
  ack.blocks = 0;
  ack.flags = kFlagNotice;  // only WRITE may carry a notice
  EncodeHeader(ack, bytes);
  EXPECT_FALSE(DecodeHeader(bytes, &out).ok());
  ack.flags = 0;
  ack.length = 5;  // ACKs have no payload
  EncodeHeader(ack, bytes);
  EXPECT_FALSE(DecodeHeader(bytes, &out).ok());

  FrameHeader hello;
  hello.type = FrameType::kHello;
  hello.length = 3;  // token must be 16 bytes
  EncodeHeader(hello, bytes);
  EXPECT_FALSE(DecodeHeader(bytes, &out).ok());

  FrameHeader nack;
  nack.type = FrameType::kNack;
  nack.length = kMaxNackMessage + 1;
  EncodeHeader(nack, bytes);
  EXPECT_FALSE(DecodeHeader(bytes, &out).ok());
}

TEST(TcpFrameTest, NoticeRoundTrip) {
  uint8_t bytes[kNoticeBytes];
  EncodeNotice(LandingNotice{7, 1ull << 40, 12345, 9, 12000}, bytes);
  const LandingNotice n = DecodeNotice(bytes);
  EXPECT_EQ(n.transfer_id, 7u);
  EXPECT_EQ(n.offset, 1ull << 40);
  EXPECT_EQ(n.length, 12345u);
  EXPECT_EQ(n.blocks, 9u);
  EXPECT_EQ(n.bytes, 12000u);
}

TEST(TcpFrameTest, BlockEntryRoundTrip) {
  uint8_t bytes[kBlockEntryBytes];
  EncodeBlockEntry(1ull << 50, 4096, bytes);
  uint64_t offset;
  uint32_t length;
  DecodeBlockEntry(bytes, &offset, &length);
  EXPECT_EQ(offset, 1ull << 50);
  EXPECT_EQ(length, 4096u);
}

TEST(TcpFrameTest, VerdictFlagOnlyWhereAPayloadComesFromMemory) {
  uint8_t bytes[kHeaderBytes];
  FrameHeader out;
  FrameHeader write = Write(4096);
  write.flags = kFlagNotice | kFlagVerdict;
  EncodeHeader(write, bytes);
  ASSERT_TRUE(DecodeHeader(bytes, &out).ok());
  EXPECT_EQ(out.flags, kFlagNotice | kFlagVerdict);

  FrameHeader resp;
  resp.type = FrameType::kReadResp;
  resp.flags = kFlagVerdict;
  resp.length = 4096;
  EncodeHeader(resp, bytes);
  ASSERT_TRUE(DecodeHeader(bytes, &out).ok());
  EXPECT_EQ(out.flags, kFlagVerdict);
  resp.flags = kFlagNotice;  // a read's answer never carries a notice
  EncodeHeader(resp, bytes);
  EXPECT_FALSE(DecodeHeader(bytes, &out).ok());

  FrameHeader req = Write(4096);
  req.type = FrameType::kReadReq;
  req.flags = kFlagVerdict;  // a request has no payload to vouch for
  EncodeHeader(req, bytes);
  EXPECT_FALSE(DecodeHeader(bytes, &out).ok());
}

TEST(TcpFrameTest, ChecksumsFlagOnVerifiedFramesOnly) {
  uint8_t bytes[kHeaderBytes];
  FrameHeader out;
  for (FrameType type : {FrameType::kWrite, FrameType::kReadReq, FrameType::kReadResp}) {
    FrameHeader h = Write(4096);
    h.type = type;
    h.flags = kFlagChecksums;
    EncodeHeader(h, bytes);
    ASSERT_TRUE(DecodeHeader(bytes, &out).ok()) << static_cast<int>(type);
    EXPECT_EQ(out.flags, kFlagChecksums);
    EXPECT_EQ(out.blocks, 3u);  // a READ_RESP's: the checksums after its payload
  }
  FrameHeader resp;
  resp.type = FrameType::kReadResp;
  resp.length = 4096;
  resp.flags = kFlagChecksums;  // without saying how many
  EncodeHeader(resp, bytes);
  EXPECT_FALSE(DecodeHeader(bytes, &out).ok());
  resp.flags = 0;
  resp.blocks = 2;  // a count with no checksums
  EncodeHeader(resp, bytes);
  EXPECT_FALSE(DecodeHeader(bytes, &out).ok());
  FrameHeader ack;
  ack.type = FrameType::kAck;
  ack.flags = kFlagChecksums;
  EncodeHeader(ack, bytes);
  EXPECT_FALSE(DecodeHeader(bytes, &out).ok());
}

// A large verified READ_RESP's table may come later, in a SUMS frame that
// says whose it is and how many checksums follow it.
TEST(TcpFrameTest, SumsLaterOnAReadResponseAndTheSumsFrameThatFollows) {
  uint8_t bytes[kHeaderBytes];
  FrameHeader out;
  FrameHeader resp;
  resp.type = FrameType::kReadResp;
  resp.length = 64 * 4096;
  resp.blocks = 64;
  resp.seq = 12;
  resp.flags = kFlagSumsLater;
  EncodeHeader(resp, bytes);
  ASSERT_TRUE(DecodeHeader(bytes, &out).ok());
  EXPECT_EQ(out.flags, kFlagSumsLater);
  EXPECT_EQ(out.blocks, 64u);
  resp.flags = kFlagSumsLater | kFlagChecksums;  // the table both after it and later
  EncodeHeader(resp, bytes);
  EXPECT_FALSE(DecodeHeader(bytes, &out).ok());
  resp.flags = kFlagSumsLater;
  resp.blocks = 0;  // later, but how many?
  EncodeHeader(resp, bytes);
  EXPECT_FALSE(DecodeHeader(bytes, &out).ok());
  for (FrameType type : {FrameType::kWrite, FrameType::kReadReq}) {
    FrameHeader h = Write(4096);
    h.type = type;
    h.flags = kFlagSumsLater;  // a READ_RESP's flag only
    EncodeHeader(h, bytes);
    EXPECT_FALSE(DecodeHeader(bytes, &out).ok()) << static_cast<int>(type);
  }

  FrameHeader sums;
  sums.type = FrameType::kSums;
  sums.blocks = 64;
  sums.seq = 12;
  EncodeHeader(sums, bytes);
  ASSERT_TRUE(DecodeHeader(bytes, &out).ok());
  EXPECT_EQ(out.type, FrameType::kSums);
  EXPECT_EQ(out.blocks, 64u);
  EXPECT_EQ(out.seq, 12u);
  for (uint16_t blocks : {uint16_t{0}, uint16_t{kMaxBlocksPerOp + 1}}) {
    sums.blocks = blocks;
    EncodeHeader(sums, bytes);
    EXPECT_FALSE(DecodeHeader(bytes, &out).ok()) << blocks;
  }
  sums.blocks = 1;
  sums.length = 8;  // its size is its count's
  EncodeHeader(sums, bytes);
  EXPECT_FALSE(DecodeHeader(bytes, &out).ok());
  sums.length = 0;
  sums.flags = kFlagChecksums;
  EncodeHeader(sums, bytes);
  EXPECT_FALSE(DecodeHeader(bytes, &out).ok());
}

TEST(TcpFrameTest, MismatchCarriesTheFirstBlockAndItsLandedChecksum) {
  uint8_t bytes[kHeaderBytes];
  FrameHeader m;
  m.type = FrameType::kMismatch;
  m.blocks = 2;
  m.word = 9;
  m.landed_checksum = 0xfedcba9876543210ull;
  m.seq = 77;
  EncodeHeader(m, bytes);
  FrameHeader out;
  ASSERT_TRUE(DecodeHeader(bytes, &out).ok());
  EXPECT_EQ(out.type, FrameType::kMismatch);
  EXPECT_EQ(out.blocks, 2u);
  EXPECT_EQ(out.word, 9u);
  EXPECT_EQ(out.landed_checksum, 0xfedcba9876543210ull);
  EXPECT_EQ(out.seq, 77u);
  m.blocks = 0;  // it names at least one block
  EncodeHeader(m, bytes);
  EXPECT_FALSE(DecodeHeader(bytes, &out).ok());
  m.blocks = 1;
  m.word = kMaxBlocksPerOp;  // beyond any table
  EncodeHeader(m, bytes);
  EXPECT_FALSE(DecodeHeader(bytes, &out).ok());
  m.word = 0;
  m.length = 8;  // it has no payload
  EncodeHeader(m, bytes);
  EXPECT_FALSE(DecodeHeader(bytes, &out).ok());
}

TEST(TcpFrameTest, VerdictRoundTrips) {
  // A good verdict is 8 zero bytes: what a sender sends with no fault.
  const std::string good = EncodeVerdict(absl::OkStatus());
  EXPECT_EQ(good, std::string(kVerdictBytes, '\0'));
  const std::string bad = EncodeVerdict(absl::FailedPreconditionError("region 'f' lost"));
  ASSERT_EQ(bad.size(), kVerdictBytes + 15);
  absl::StatusCode code;
  uint32_t text = 0;
  ASSERT_TRUE(DecodeVerdict(reinterpret_cast<const uint8_t*>(bad.data()), &code, &text).ok());
  EXPECT_EQ(code, absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(bad.substr(kVerdictBytes, text), "region 'f' lost");
  // Messages are cut to what a NACK may carry.
  EXPECT_EQ(EncodeVerdict(absl::InternalError(std::string(5000, 'x'))).size(),
            kVerdictBytes + kMaxNackMessage);
}

TEST(TcpFrameTest, VerdictRefusesWhatAPeerMayNotSend) {
  uint8_t bytes[kVerdictBytes] = {};
  absl::StatusCode code;
  uint32_t text = 0;
  bytes[0] = 17;  // no such status code
  EXPECT_FALSE(DecodeVerdict(bytes, &code, &text).ok());
  bytes[0] = 9;
  bytes[5] = 0x10;  // a 4 KiB message
  EXPECT_FALSE(DecodeVerdict(bytes, &code, &text).ok());
}

}  // namespace
}  // namespace xferd::transport::tcp
