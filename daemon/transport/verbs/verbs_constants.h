// Sizes of the verbs data path, tied together with static_asserts. Each says
// why it has its value.
#pragma once

#include <cstdint>

#include "daemon/transport/transport_types.h"
#include "daemon/transport/verbs/notice_record.h"
#include "daemon/transport/verbs/remote_region_check.h"

namespace xferd::transport::verbs {

// Work requests one block may need. A block is at most kMaxSliceBytes long
// and memory-registration chunks are at least that long (kMinMrChunk), so it
// crosses at most one chunk boundary on each side, and a work request must
// sit inside one chunk on both sides (one lkey, one rkey; chunk_pieces.h).
inline constexpr uint32_t kMaxWrsPerBlock = 3;
// Work requests one op may need: a write's notice record, then its blocks.
// A send queue holds at least this many (VerbsTransport::Create refuses a
// device with less), so any op fits an empty queue and none waits forever.
inline constexpr uint32_t kMaxWrsPerOp = 1 + kMaxWrsPerBlock * kMaxBlocksPerOp;
// Work requests a contiguous op needs at most: its one block, cut at a chunk
// boundary on each side, and the notice if it is a write's final op.
inline constexpr uint32_t kMaxWrsPerContiguousOp = 1 + kMaxWrsPerBlock;
// Send-queue entries per op of lane depth: enough for contiguous ops. A lane
// takes lane_depth ops (its credits) but posts an op only when its actual
// requests fit the queue's free entries (VerbsLane::Fits, with the chain
// being built counted); the others wait in the lane, in order, until
// completions free entries. So the queue never overflows: requests go only
// into entries counted free, and an entry is counted free again only once a
// completion at or after it came back (each chain's last request is
// signaled, so every request is followed by one). A default lane (64 ops,
// 256 entries) has all its contiguous ops on the wire, or four ops of 64
// scattered blocks (256 blocks). Sized for the worst case instead (193 per
// op), the queue and its share of the CQ would be 48 times as large per peer.
inline constexpr uint32_t kSendWrsPerOp = kMaxWrsPerContiguousOp;
// Request a completion at least every this many work requests (and always on
// the last of a chain): fewer CQEs, while slots still free up steadily.
inline constexpr uint32_t kSignalInterval = 64;
// WRITE_WITH_IMM receives kept posted per queue pair.
inline constexpr uint32_t kRecvDepth = 16;
// Notice-ring slots per lane. A writer reuses a slot only after kNoticeSlots
// later finals; the receiver has only kRecvDepth receives posted and reposts
// one per notice it has read, so with more slots than receives a slot is
// never overwritten before its notice was read.
inline constexpr uint32_t kNoticeSlots = 32;
// Work completions taken from the CQ per ibv_poll_cq.
inline constexpr int kPollBatch = 32;
// Lanes one worker (one CQ) can serve: the peers of a poller.
inline constexpr uint32_t kMaxLanesPerWorker = 1024;

static_assert(kNoticeSlots > kRecvDepth, "a notice slot could be reused before it is read");
static_assert(kMinMrChunk >= kMaxSliceBytes, "a block could cross two chunk boundaries");
static_assert(kSendWrsPerOp >= kMaxWrsPerContiguousOp,
              "a lane could not keep lane_depth contiguous ops on the wire");
static_assert(kSignalInterval <= kMaxWrsPerOp,
              "the smallest send queue must see a signaled request before it fills, so "
              "long chains free their entries while they run, not only at their end");
static_assert(kNoticeRecordBytes % 16 == 0, "notice slots keep records 16-byte aligned");

// wr_id layout: lane index in the worker's table above bit 32; bit 31 marks
// receives; the low 31 bits carry a send's sequence number (mod 2^31, far
// more than a queue holds).
inline constexpr uint64_t kRecvFlag = uint64_t{1} << 31;
inline constexpr uint64_t kSeqMask = kRecvFlag - 1;
inline uint64_t MakeWrId(uint32_t lane, uint64_t low) { return (uint64_t{lane} << 32) | low; }
inline uint32_t WrIdLane(uint64_t wr_id) { return static_cast<uint32_t>(wr_id >> 32); }

}  // namespace xferd::transport::verbs
