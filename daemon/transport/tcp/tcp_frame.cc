#include "daemon/transport/tcp/tcp_frame.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/base/endian.h"

namespace xferd::transport::tcp {
namespace {

void Put16(uint8_t* p, uint16_t v) { StoreLE(p, v); }
void Put32(uint8_t* p, uint32_t v) { StoreLE(p, v); }
void Put64(uint8_t* p, uint64_t v) { StoreLE(p, v); }
uint16_t Get16(const uint8_t* p) { return LoadLE<uint16_t>(p); }
uint32_t Get32(const uint8_t* p) { return LoadLE<uint32_t>(p); }
uint64_t Get64(const uint8_t* p) { return LoadLE<uint64_t>(p); }

bool CarriesTable(FrameType type) {
  return type == FrameType::kWrite || type == FrameType::kReadReq;
}

absl::Status CheckLength(const FrameHeader& h, uint8_t type) {
  switch (static_cast<FrameType>(type)) {
    case FrameType::kHello:
      if (h.length != kTokenBytes) return absl::InvalidArgumentError("HELLO token size");
      return absl::OkStatus();
    case FrameType::kWrite:
    case FrameType::kReadReq:
    case FrameType::kReadResp:
      if (h.length == 0 || h.length > kMaxSliceBytes) {
        return absl::InvalidArgumentError(
            absl::StrCat("payload length ", h.length, " outside 1..", kMaxSliceBytes));
      }
      return absl::OkStatus();
    case FrameType::kNack:
      if (h.length > kMaxNackMessage) return absl::InvalidArgumentError("NACK too long");
      return absl::OkStatus();
    case FrameType::kHelloAck:
    case FrameType::kAck:
    case FrameType::kMismatch:
    case FrameType::kSums:
      if (h.length != 0) return absl::InvalidArgumentError("unexpected frame payload");
      return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat("unknown frame type ", type));
}

}  // namespace

void EncodeHeader(const FrameHeader& header, uint8_t out[kHeaderBytes]) {
  Put32(out, kFrameMagic);
  out[4] = static_cast<uint8_t>(header.type);
  out[5] = header.flags;
  Put16(out + 6, header.blocks);
  Put32(out + 8, header.word);
  Put32(out + 12, header.length);
  Put64(out + 16, header.landed_checksum);
  Put64(out + 24, header.seq);
}

absl::Status DecodeHeader(const uint8_t in[kHeaderBytes], FrameHeader* header) {
  if (Get32(in) == kFrameMagicV1) {
    return absl::InvalidArgumentError(
        "the peer speaks data protocol 1 and this daemon protocol 2 (many-block frames, reads): "
        "run the same xferd version on both");
  }
  if (Get32(in) != kFrameMagic) {
    return absl::InvalidArgumentError(absl::StrCat("bad frame magic 0x", absl::Hex(Get32(in)),
                                                   " (not an xferd data connection?)"));
  }
  const uint8_t type = in[4];
  header->landed_checksum = Get64(in + 16);
  if (header->landed_checksum != 0 && static_cast<FrameType>(type) != FrameType::kMismatch) {
    return absl::InvalidArgumentError("reserved header bits set");
  }
  header->flags = in[5];
  header->blocks = Get16(in + 6);
  header->word = Get32(in + 8);
  header->length = Get32(in + 12);
  header->seq = Get64(in + 24);
  if (absl::Status s = CheckLength(*header, type); !s.ok()) return s;
  const auto t = static_cast<FrameType>(type);
  // A verified READ_RESP says how many checksums follow its payload, or
  // its SUMS frame.
  const bool counts_blocks =
      CarriesTable(t) || t == FrameType::kMismatch || t == FrameType::kSums ||
      (t == FrameType::kReadResp && (header->flags & (kFlagChecksums | kFlagSumsLater)));
  if (counts_blocks ? header->blocks == 0 || header->blocks > kMaxBlocksPerOp
                    : header->blocks != 0) {
    return absl::InvalidArgumentError(absl::StrCat("block count ", header->blocks, " for type ",
                                                   type, " (tables hold 1..", kMaxBlocksPerOp,
                                                   ")"));
  }
  const uint8_t allowed_flags = t == FrameType::kWrite ? kFlagNotice | kFlagVerdict | kFlagChecksums
                                : t == FrameType::kReadReq ? kFlagChecksums
                                : t == FrameType::kReadResp
                                    ? kFlagVerdict | kFlagChecksums | kFlagSumsLater
                                    : 0;
  if ((header->flags & ~allowed_flags) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown frame flags 0x", absl::Hex(header->flags)));
  }
  if ((header->flags & kFlagChecksums) && (header->flags & kFlagSumsLater)) {
    return absl::InvalidArgumentError(
        "a READ_RESP's checksums cannot both follow it and come later");
  }
  if (t == FrameType::kMismatch && header->word >= kMaxBlocksPerOp) {
    return absl::InvalidArgumentError(absl::StrCat("MISMATCH names block ", header->word,
                                                   " of a table of at most ", kMaxBlocksPerOp));
  }
  header->type = t;
  return absl::OkStatus();
}

void EncodeNotice(const LandingNotice& notice, uint8_t out[kNoticeBytes]) {
  Put64(out, notice.transfer_id);
  Put64(out + 8, notice.offset);
  Put64(out + 16, notice.length);
  Put64(out + 24, notice.blocks);
  Put64(out + 32, notice.bytes);
}

LandingNotice DecodeNotice(const uint8_t in[kNoticeBytes]) {
  return LandingNotice{Get64(in), Get64(in + 8), Get64(in + 16), Get64(in + 24), Get64(in + 32)};
}

std::string EncodeVerdict(const absl::Status& status) {
  const absl::string_view text = status.message().substr(0, kMaxNackMessage);
  std::string out(kVerdictBytes + text.size(), '\0');
  auto* bytes = reinterpret_cast<uint8_t*>(out.data());
  Put32(bytes, static_cast<uint32_t>(status.code()));
  Put32(bytes + 4, static_cast<uint32_t>(text.size()));
  // An OK status's message has a null data(), which memcpy must not get.
  if (!text.empty()) std::memcpy(bytes + kVerdictBytes, text.data(), text.size());
  return out;
}

absl::Status DecodeVerdict(const uint8_t in[kVerdictBytes], absl::StatusCode* code,
                           uint32_t* message_bytes) {
  const uint32_t raw = Get32(in);
  *message_bytes = Get32(in + 4);
  if (raw > static_cast<uint32_t>(absl::StatusCode::kUnauthenticated)) {
    return absl::InvalidArgumentError(absl::StrCat("verdict status code ", raw));
  }
  if (*message_bytes > kMaxNackMessage) {
    return absl::InvalidArgumentError("verdict message too long");
  }
  *code = static_cast<absl::StatusCode>(raw);
  return absl::OkStatus();
}

void EncodeBlockEntry(uint64_t offset, uint32_t length, uint8_t out[kBlockEntryBytes]) {
  Put64(out, offset);
  Put32(out + 8, length);
}

void DecodeBlockEntry(const uint8_t in[kBlockEntryBytes], uint64_t* offset, uint32_t* length) {
  *offset = Get64(in);
  *length = Get32(in + 8);
}

}  // namespace xferd::transport::tcp
