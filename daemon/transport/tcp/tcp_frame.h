// Wire format of the TCP transport's data connections (protocol 2). Every
// frame starts with a fixed 32-byte little-endian header. WRITE frames carry
// an optional 40-byte landing notice, a block table and the blocks' payload,
// which the receiver reads straight into the destination region; READ_REQ
// frames carry a block table, answered by a READ_RESP whose payload is those
// blocks in order. Decoding validates everything a peer controls.
//
//   0 u32 magic "XFR2"   4 u8 type   5 u8 flags
//   6 u16 blocks: WRITE / READ_REQ entries in the block table (1..64); a
//              verified READ_RESP's checksums (inline or later), and a SUMS
//              frame's; MISMATCH: blocks that differ; else 0
//   8 u32 word: WRITE / READ_REQ region id | HELLO lane index | NACK status code
//  12 u32 length: WRITE / READ_REQ / READ_RESP payload bytes | HELLO token |
//                 NACK message bytes
//  16 u64 MISMATCH: the landed checksum of its first differing block, else 0
//  24 u64 seq: WRITE / READ_REQ sequence number on this lane (one space for
//              both); ACK: highest WRITE acknowledged (cumulative); NACK,
//              READ_RESP and SUMS: the refused or answered frame
//
// A block table entry is 12 bytes: u64 offset in the region, u32 length.
//
// A WRITE or READ_RESP whose payload comes from memory that can fault under
// the sender (a file region: another process may truncate the file) carries
// the verdict flag, and an 8-byte verdict follows its payload: u32 status
// code (0: the payload is good), u32 message bytes, then the message. A
// sender whose memory faulted part-way sends zeros for the rest of the
// payload (the header announced its length) and a failed verdict; the
// receiver then neither lands it nor reports it as good.
//
// A verified transfer's frames carry the checksums flag (checksum.h has the
// CRC). A WRITE's payload (and verdict) is then followed by a checksum
// table (u64 per block, of the bytes sent, so the sender can take them as
// the bytes go); the receiver checks every block once it is in place and
// answers a frame whose landed bytes differ with a MISMATCH instead of
// acknowledging it (and lands no notice it carried). A READ_REQ with the
// flag asks for the checksums: its READ_RESP carries the flag and the table
// in the same place (as many as its `blocks` says), which the reader
// checks against what it received. A READ_RESP may instead carry the
// sums-later flag: its table then comes in a SUMS frame of its own (`seq`
// the READ_RESP's, `blocks` checksums after the header), sent after the
// payload and verdict but possibly after later READ_RESPs with the same
// flag, and before any other answer. The source can so take a large
// answer's checksums behind the kernel's copy without ending its batch of
// answers there; the reader checks the blocks that landed when their table
// comes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "daemon/transport/transport_types.h"

namespace xferd::transport::tcp {

inline constexpr uint32_t kFrameMagic = 0x32524658;  // "XFR2" read as little-endian
// Protocol 1 (one range per WRITE, no reads): refused with a clear message.
inline constexpr uint32_t kFrameMagicV1 = 0x31524658;
inline constexpr size_t kHeaderBytes = 32;
inline constexpr size_t kNoticeBytes = 40;
inline constexpr size_t kBlockEntryBytes = 12;
inline constexpr size_t kMaxTableBytes = kMaxBlocksPerOp * kBlockEntryBytes;
inline constexpr size_t kTokenBytes = 16;
// NACK messages are for humans; anything longer is a protocol error.
inline constexpr uint32_t kMaxNackMessage = 1024;

enum class FrameType : uint8_t {
  kHello = 1,     // initiator -> responder: attach this connection to lane `word`
  kHelloAck = 2,  // responder -> initiator: attached
  kWrite = 3,     // blocks of region `word`: table, then payload
  kAck = 4,       // every WRITE up to `seq` has landed
  kNack = 5,      // WRITE or READ_REQ `seq` was refused: status `word`, message follows
  kReadReq = 6,   // send me these blocks of region `word`
  kReadResp = 7,  // the payload READ_REQ `seq` asked for
  // WRITE `seq` landed, but `blocks` of its blocks differ from their
  // checksums, the first at index `word` of its table.
  kMismatch = 8,
  // The checksum table of READ_RESP `seq` (sent with kFlagSumsLater):
  // `blocks` checksums follow.
  kSums = 9,
};

inline constexpr uint8_t kFlagNotice = 0x1;   // WRITE: a landing notice follows
inline constexpr uint8_t kFlagVerdict = 0x2;  // WRITE, READ_RESP: a verdict follows the payload
inline constexpr size_t kVerdictBytes = 8;
// WRITE, READ_REQ, READ_RESP: the frame is verified (checksum tables).
inline constexpr uint8_t kFlagChecksums = 0x4;
inline constexpr size_t kChecksumBytes = 8;
// READ_RESP: verified, its checksum table comes in a later SUMS frame.
inline constexpr uint8_t kFlagSumsLater = 0x8;
inline constexpr size_t kMaxChecksumTableBytes = kMaxBlocksPerOp * kChecksumBytes;

struct FrameHeader {
  FrameType type = FrameType::kWrite;
  uint8_t flags = 0;
  uint16_t blocks = 0;
  uint32_t word = 0;
  uint32_t length = 0;
  uint64_t seq = 0;
  uint64_t landed_checksum = 0;  // MISMATCH only
};

void EncodeHeader(const FrameHeader& header, uint8_t out[kHeaderBytes]);

// Validates magic, type, flags, block count, fields a type leaves 0 and
// per-type length limits. INVALID_ARGUMENT describes the first violation. Never reads
// past 32 bytes.
absl::Status DecodeHeader(const uint8_t in[kHeaderBytes], FrameHeader* header);

void EncodeNotice(const LandingNotice& notice, uint8_t out[kNoticeBytes]);
LandingNotice DecodeNotice(const uint8_t in[kNoticeBytes]);

// A verdict: `status` (OK: the payload is good) and its message, cut to
// kMaxNackMessage bytes.
std::string EncodeVerdict(const absl::Status& status);
// The code and message length of a verdict's fixed part; INVALID_ARGUMENT
// for an unknown code or an over-long message.
absl::Status DecodeVerdict(const uint8_t in[kVerdictBytes], absl::StatusCode* code,
                           uint32_t* message_bytes);

void EncodeBlockEntry(uint64_t offset, uint32_t length, uint8_t out[kBlockEntryBytes]);
void DecodeBlockEntry(const uint8_t in[kBlockEntryBytes], uint64_t* offset, uint32_t* length);

}  // namespace xferd::transport::tcp
