// Sizes of the verbs data path, tied together with static_asserts. Each says
// why it has its value.
#pragma once

#include <cstdint>

#include "daemon/transport/verbs/notice_record.h"

namespace xferd::transport::verbs {

// Work requests one write op may need: the notice record, then its data in
// up to three pieces (a slice crosses at most one MR-chunk boundary on each
// side, and a piece must sit inside one chunk on both sides).
inline constexpr uint32_t kMaxWrsPerOp = 4;
// Ops chained into one ibv_post_send: one doorbell for a poller's batch.
inline constexpr uint32_t kMaxOpsPerPost = 16;
inline constexpr uint32_t kMaxWrsPerPost = kMaxOpsPerPost * kMaxWrsPerOp;
// Request a completion at least every this many work requests (and always on
// the last of a chain): fewer CQEs, while slots still free up steadily.
inline constexpr uint32_t kSignalInterval = 16;
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
static_assert(kSignalInterval <= kMaxWrsPerPost, "every chain must carry a signaled request");
static_assert(kNoticeRecordBytes == 32, "the notice ring layout assumes 32-byte records");

// wr_id layout: lane index in the worker's table above bit 32; bit 31 marks
// receives; the low 31 bits carry a send's sequence number (mod 2^31, far
// more than a queue holds).
inline constexpr uint64_t kRecvFlag = uint64_t{1} << 31;
inline constexpr uint64_t kSeqMask = kRecvFlag - 1;
inline uint64_t MakeWrId(uint32_t lane, uint64_t low) { return (uint64_t{lane} << 32) | low; }
inline uint32_t WrIdLane(uint64_t wr_id) { return static_cast<uint32_t>(wr_id >> 32); }

}  // namespace xferd::transport::verbs
