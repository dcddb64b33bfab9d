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
// sit inside one chunk on both sides (one lkey, one rkey).
inline constexpr uint32_t kMaxWrsPerBlock = 3;
// Work requests one op may need: a write's notice record, then its blocks.
inline constexpr uint32_t kMaxWrsPerOp = 1 + kMaxWrsPerBlock * kMaxBlocksPerOp;
// Send-queue entries per op of lane depth. An op is taken only while its
// worst case (kMaxWrsPerOp) fits, but most ops need far fewer (a contiguous
// slice 1 to 3, a 64-block op of scattered pages 64): 16 per op keeps a
// default lane (64 ops, 1024 entries) about five worst-case ops deep.
inline constexpr uint32_t kSendWrsPerOp = 16;
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
static_assert(kSignalInterval <= kMaxWrsPerOp,
              "a send queue holding one op must see a signaled request before it fills");
static_assert(kNoticeRecordBytes % 16 == 0, "notice slots keep records 16-byte aligned");

// wr_id layout: lane index in the worker's table above bit 32; bit 31 marks
// receives; the low 31 bits carry a send's sequence number (mod 2^31, far
// more than a queue holds).
inline constexpr uint64_t kRecvFlag = uint64_t{1} << 31;
inline constexpr uint64_t kSeqMask = kRecvFlag - 1;
inline uint64_t MakeWrId(uint32_t lane, uint64_t low) { return (uint64_t{lane} << 32) | low; }
inline uint32_t WrIdLane(uint64_t wr_id) { return static_cast<uint32_t>(wr_id >> 32); }

}  // namespace xferd::transport::verbs
