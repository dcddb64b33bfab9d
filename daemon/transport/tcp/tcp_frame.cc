#include "daemon/transport/tcp/tcp_frame.h"

#include "absl/strings/str_cat.h"
#include "daemon/common/endian.h"

namespace xferd::transport::tcp {
namespace {

void Put32(uint8_t* p, uint32_t v) { StoreLE(p, v); }
void Put64(uint8_t* p, uint64_t v) { StoreLE(p, v); }
uint32_t Get32(const uint8_t* p) { return LoadLE<uint32_t>(p); }
uint64_t Get64(const uint8_t* p) { return LoadLE<uint64_t>(p); }

}  // namespace

void EncodeHeader(const FrameHeader& header, uint8_t out[kHeaderBytes]) {
  Put32(out, kFrameMagic);
  out[4] = static_cast<uint8_t>(header.type);
  out[5] = header.flags;
  out[6] = 0;
  out[7] = 0;
  Put32(out + 8, header.word);
  Put32(out + 12, header.length);
  Put64(out + 16, header.offset);
  Put64(out + 24, header.seq);
}

absl::Status DecodeHeader(const uint8_t in[kHeaderBytes], FrameHeader* header) {
  if (Get32(in) != kFrameMagic) {
    return absl::InvalidArgumentError(absl::StrCat("bad frame magic 0x", absl::Hex(Get32(in)),
                                                   " (not an xferd data connection?)"));
  }
  if (in[6] != 0 || in[7] != 0) return absl::InvalidArgumentError("reserved header bits set");
  const uint8_t type = in[4];
  header->flags = in[5];
  header->word = Get32(in + 8);
  header->length = Get32(in + 12);
  header->offset = Get64(in + 16);
  header->seq = Get64(in + 24);
  switch (static_cast<FrameType>(type)) {
    case FrameType::kHello:
      if (header->length != kTokenBytes) return absl::InvalidArgumentError("HELLO token size");
      break;
    case FrameType::kWrite:
      if (header->length == 0 || header->length > kMaxSliceBytes) {
        return absl::InvalidArgumentError(
            absl::StrCat("WRITE length ", header->length, " outside 1..", kMaxSliceBytes));
      }
      break;
    case FrameType::kNack:
      if (header->length > kMaxNackMessage) return absl::InvalidArgumentError("NACK too long");
      break;
    case FrameType::kHelloAck:
    case FrameType::kAck:
      if (header->length != 0) return absl::InvalidArgumentError("unexpected frame payload");
      break;
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown frame type ", type));
  }
  const uint8_t allowed_flags = type == static_cast<uint8_t>(FrameType::kWrite) ? kFlagNotice : 0;
  if ((header->flags & ~allowed_flags) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown frame flags 0x", absl::Hex(header->flags)));
  }
  header->type = static_cast<FrameType>(type);
  return absl::OkStatus();
}

void EncodeNotice(const LandingNotice& notice, uint8_t out[kNoticeBytes]) {
  Put64(out, notice.transfer_id);
  Put64(out + 8, notice.offset);
  Put64(out + 16, notice.length);
}

LandingNotice DecodeNotice(const uint8_t in[kNoticeBytes]) {
  return LandingNotice{Get64(in), Get64(in + 8), Get64(in + 16)};
}

}  // namespace xferd::transport::tcp
