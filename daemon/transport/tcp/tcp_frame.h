// Wire format of the TCP transport's data connections. Every frame starts
// with a fixed 32-byte little-endian header; WRITE frames may carry a 24-byte
// landing notice and then their payload, which the receiver reads straight
// into the destination region. Decoding validates everything a peer controls.
//
//   0 u32 magic "XFR1"   4 u8 type   5 u8 flags   6 u16 reserved (0)
//   8 u32 word: WRITE region id | HELLO lane index | NACK status code
//  12 u32 length: WRITE payload | HELLO token | NACK message bytes
//  16 u64 offset: WRITE destination offset in the region
//  24 u64 seq: WRITE sequence number on this lane; ACK: highest acknowledged
//              (cumulative); NACK: the refused WRITE
#pragma once

#include <cstddef>
#include <cstdint>

#include "absl/status/status.h"
#include "daemon/transport/transport_types.h"

namespace xferd::transport::tcp {

inline constexpr uint32_t kFrameMagic = 0x31524658;  // "XFR1" read as little-endian
inline constexpr size_t kHeaderBytes = 32;
inline constexpr size_t kNoticeBytes = 24;
inline constexpr size_t kTokenBytes = 16;
// NACK messages are for humans; anything longer is a protocol error.
inline constexpr uint32_t kMaxNackMessage = 1024;

enum class FrameType : uint8_t {
  kHello = 1,     // initiator -> responder: attach this connection to lane `word`
  kHelloAck = 2,  // responder -> initiator: attached
  kWrite = 3,     // payload for region `word` at `offset`
  kAck = 4,       // every WRITE up to `seq` has landed
  kNack = 5,      // WRITE `seq` was refused: status `word`, message follows
};

inline constexpr uint8_t kFlagNotice = 0x1;  // WRITE: a landing notice follows

struct FrameHeader {
  FrameType type = FrameType::kWrite;
  uint8_t flags = 0;
  uint32_t word = 0;
  uint32_t length = 0;
  uint64_t offset = 0;
  uint64_t seq = 0;
};

void EncodeHeader(const FrameHeader& header, uint8_t out[kHeaderBytes]);

// Validates magic, type, flags, reserved bits and per-type length limits.
// INVALID_ARGUMENT describes the first violation. Never reads past 32 bytes.
absl::Status DecodeHeader(const uint8_t in[kHeaderBytes], FrameHeader* header);

void EncodeNotice(const LandingNotice& notice, uint8_t out[kNoticeBytes]);
LandingNotice DecodeNotice(const uint8_t in[kNoticeBytes]);

}  // namespace xferd::transport::tcp
