// Fuzzes the TCP transport's frame codec (tcp_frame.h): DecodeHeader on any
// 32 bytes, and DecodeNotice on the 40 after them. A header that decodes must
// encode back to exactly the same bytes, and satisfy the per-type limits the
// receiver relies on (payload and NACK lengths, flags, a MISMATCH's block).
#include <cstdint>
#include <cstring>
#include <memory>

#include "daemon/transport/tcp/tcp_frame.h"
#include "tests/fuzz/fuzz_check.h"

namespace xferd::transport::tcp {
namespace {

void CheckHeader(const uint8_t* in) {
  FrameHeader header;
  if (!DecodeHeader(in, &header).ok()) return;
  uint8_t again[kHeaderBytes];
  EncodeHeader(header, again);
  FUZZ_CHECK(std::memcmp(in, again, kHeaderBytes) == 0);
  FUZZ_CHECK(header.type == FrameType::kMismatch || header.landed_checksum == 0);
  switch (header.type) {
    case FrameType::kWrite:
    case FrameType::kReadReq:
      FUZZ_CHECK(header.length >= 1 && header.length <= kMaxSliceBytes);
      FUZZ_CHECK(header.blocks >= 1 && header.blocks <= kMaxBlocksPerOp);
      FUZZ_CHECK((header.flags & ~(kFlagNotice | kFlagVerdict | kFlagChecksums)) == 0);
      FUZZ_CHECK(header.type == FrameType::kWrite || (header.flags & ~kFlagChecksums) == 0);
      break;
    case FrameType::kReadResp:  // a verdict, then `blocks` checksums, may follow the payload
      FUZZ_CHECK(header.length >= 1 && header.length <= kMaxSliceBytes);
      FUZZ_CHECK((header.flags & ~(kFlagVerdict | kFlagChecksums | kFlagSumsLater)) == 0);
      FUZZ_CHECK(!((header.flags & kFlagChecksums) && (header.flags & kFlagSumsLater)));
      FUZZ_CHECK((header.flags & (kFlagChecksums | kFlagSumsLater))
                     ? header.blocks >= 1 && header.blocks <= kMaxBlocksPerOp
                     : header.blocks == 0);
      break;
    case FrameType::kSums:  // `blocks` checksums follow
      FUZZ_CHECK(header.length == 0 && header.flags == 0);
      FUZZ_CHECK(header.blocks >= 1 && header.blocks <= kMaxBlocksPerOp);
      break;
    case FrameType::kMismatch:  // names a block of the table it answers
      FUZZ_CHECK(header.length == 0 && header.flags == 0);
      FUZZ_CHECK(header.blocks >= 1 && header.blocks <= kMaxBlocksPerOp);
      FUZZ_CHECK(header.word < kMaxBlocksPerOp);
      break;
    case FrameType::kNack:
      FUZZ_CHECK(header.length <= kMaxNackMessage);
      FUZZ_CHECK(header.flags == 0);
      break;
    case FrameType::kHello:
      FUZZ_CHECK(header.length == kTokenBytes);
      break;
    case FrameType::kHelloAck:
    case FrameType::kAck:
      FUZZ_CHECK(header.length == 0 && header.flags == 0);
      break;
    default:
      FUZZ_CHECK(false && "decoded an unknown frame type");
  }
}

void CheckNotice(const uint8_t* in) {
  const LandingNotice notice = DecodeNotice(in);
  uint8_t again[kNoticeBytes];
  EncodeNotice(notice, again);
  FUZZ_CHECK(std::memcmp(in, again, kNoticeBytes) == 0);
}

}  // namespace
}  // namespace xferd::transport::tcp

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace xferd::transport::tcp;
  // Exactly-sized copies, so reading past a field is an ASan error.
  if (size < kHeaderBytes) return 0;
  const std::unique_ptr<uint8_t[]> header(new uint8_t[kHeaderBytes]);
  std::memcpy(header.get(), data, kHeaderBytes);
  CheckHeader(header.get());
  if (size >= kHeaderBytes + kNoticeBytes) {
    const std::unique_ptr<uint8_t[]> notice(new uint8_t[kNoticeBytes]);
    std::memcpy(notice.get(), data + kHeaderBytes, kNoticeBytes);
    CheckNotice(notice.get());
  }
  return 0;
}
