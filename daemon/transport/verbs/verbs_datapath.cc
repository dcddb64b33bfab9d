// The verbs data path: posting ops as chained RDMA WRITEs and READs (one
// work request per block) as the send queue has room for them, retiring
// completions, and receiving the landing notices of peers' WRITE_WITH_IMM.
// Runs on one
// poller thread per worker; no allocation, no locks, no logging above trace.
#include <arpa/inet.h>

#include <algorithm>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "daemon/common/check.h"
#include "daemon/common/log.h"
#include "daemon/transport/verbs/chunk_pieces.h"
#include "daemon/transport/verbs/notice_record.h"
#include "daemon/transport/verbs/verbs_lane.h"
#include "daemon/transport/verbs/verbs_registration.h"
#include "daemon/transport/verbs/verbs_worker.h"

namespace xferd::transport::verbs {
namespace {

// The first failed completion of a queue pair, as the status every write
// still in flight on its link reports.
absl::Status CompletionError(const ibv_wc& wc, const std::string& peer, bool read) {
  const std::string what = absl::StrCat(ibv_wc_status_str(wc.status), " (vendor error 0x",
                                        absl::Hex(wc.vendor_err), ")");
  switch (wc.status) {
    // The NIC cannot say why: the peer deregistered the region or revoked
    // our keys (its ACL dropped us), the range is outside it, or the peer
    // process died (its windows go before its queue pairs). The engine asks
    // the peer (kAccessRefused) and says it died if it no longer answers.
    // Like every completion error it resets the link (and the cached keys);
    // a retry resolves afresh and gets the precise reason from the peer.
    case IBV_WC_REM_ACCESS_ERR: {
      absl::Status refused = absl::UnavailableError(absl::StrCat(
          "peer ", peer, " refused the RDMA ", read ? "read" : "write", " (", what,
          "): its region was deregistered or our keys revoked, ",
          read ? "it does not allow remote reads, " : "",
          "or the range is outside it; the link is reset"));
      refused.SetPayload(kAccessRefused, absl::Cord(what));
      return refused;
    }
    case IBV_WC_MW_BIND_ERR:
      return absl::InternalError(
          absl::StrCat("binding a memory window for peer ", peer, " failed: ", what));
    case IBV_WC_RETRY_EXC_ERR:
      return absl::UnavailableError(absl::StrCat("peer ", peer, " does not answer (", what,
                                                 "): it died or the network is down"));
    case IBV_WC_RNR_RETRY_EXC_ERR:
      return absl::UnavailableError(
          absl::StrCat("peer ", peer, " stopped taking notices (", what, ")"));
    case IBV_WC_WR_FLUSH_ERR:
      return absl::UnavailableError(absl::StrCat("link to ", peer, " was closed (", what, ")"));
    case IBV_WC_LOC_LEN_ERR:
    case IBV_WC_LOC_PROT_ERR:
    case IBV_WC_LOC_QP_OP_ERR:
      return absl::InternalError(absl::StrCat("local RDMA error towards ", peer, ": ", what));
    default:
      return absl::UnavailableError(absl::StrCat("RDMA error towards ", peer, ": ", what));
  }
}

}  // namespace

uint32_t VerbsLane::Post(absl::Span<const DataOp> ops) {
  uint32_t taken = 0;
  // Every op with a credit is taken: behind those already waiting (order is
  // kept), then posted as far as the send queue has room for it.
  while (taken < ops.size() && credits() > 0) {
    waiting_[(waiting_head_ + waiting_count_) % ops_depth_] = ops[taken];
    ++waiting_count_;
    ++ops_in_flight_;
    ++taken;
  }
  PostWaiting();
  if (waiting_count_ > 0) worker_.ListWaiting(this);
  return taken;
}

bool VerbsLane::ServiceWaiting(CompletionSink& sink) {
  if (!draining_ && !link_.broken()) {
    PostBinds();
    PostWaiting();
    return waiting_count_ > 0 || !pending_binds_.empty();
  }
  // Reported after every posted op (RC flushes them in order), with the
  // reason the link broke.
  if (posted_ != retired_) return true;
  const absl::Status status =
      link_.broken()
          ? link_.status()
          : absl::UnavailableError(absl::StrCat("link to ", link_.peer().node_id, " closed"));
  FailPendingBinds(status);
  for (; waiting_count_ > 0; --waiting_count_) {
    const DataOp& op = waiting_[waiting_head_];
    waiting_head_ = (waiting_head_ + 1) % ops_depth_;
    --ops_in_flight_;
    Report(OpCompletion{op.cookie, op.length, &status}, sink);
  }
  return false;
}

void VerbsLane::PostWaiting() {
  if (waiting_count_ == 0 || !active_.load(std::memory_order_relaxed) || draining_ ||
      link_.broken()) {
    return;
  }
  chain_ = 0;
  uint32_t appended = 0;
  // The chain never outgrows the send queue (Fits counts it), nor the
  // worker's chain arrays, as large as the deepest queue.
  while (appended < waiting_count_) {
    const DataOp& op = waiting_[(waiting_head_ + appended) % ops_depth_];
    if (!Fits(op)) break;
    AppendOp(op);
    ++appended;
  }
  if (chain_ == 0) return;
  for (uint32_t i = 0; i + 1 < chain_; ++i) wrs_[i].next = &wrs_[i + 1];
  wrs_[chain_ - 1].next = nullptr;
  // The last request of a chain is always signaled: otherwise an idle lane
  // would never hear about the requests before it.
  wrs_[chain_ - 1].send_flags |= IBV_SEND_SIGNALED;
  unsignaled_ = 0;
  ibv_send_wr* bad = nullptr;
  const int rc = ibv_post_send(qp_.get(), wrs_, &bad);
  uint32_t ops_posted = appended;
  if (rc != 0) {
    // Requests from `bad` on were not posted: forget them. An op is posted
    // only if its last request went out; the others of a partly posted op
    // retire silently, and it waits to be failed with the link.
    const uint64_t first_seq = posted_ - chain_ + 1;
    const uint32_t went_out = static_cast<uint32_t>(bad - wrs_);
    ops_posted = 0;
    for (uint32_t k = 0; k < went_out; ++k) {
      if (slots_[(first_seq + k) % sq_depth_].ends_op) ++ops_posted;
    }
    posted_ = first_seq + went_out - 1;
  }
  waiting_head_ = (waiting_head_ + ops_posted) % ops_depth_;
  waiting_count_ -= ops_posted;
  if (rc != 0) link_.Close(VerbsError(absl::StrCat("ibv_post_send to ", link_.peer().node_id), rc));
}

bool VerbsLane::Fits(const DataOp& op) const {
  const uint32_t free = sq_depth_ - static_cast<uint32_t>(posted_ - retired_);
  return free >= kMaxWrsPerOp || WorkRequests(op) <= free;
}

uint32_t VerbsLane::WorkRequests(const DataOp& op) const {
  const auto& local = static_cast<const VerbsRegistration&>(*op.local_registration);
  uint32_t n = op.notice != nullptr ? 1 : 0;
  for (uint32_t b = 0; b < op.block_count; ++b) {
    const Block& block = op.blocks[b];
    n += CountPieces(block.local_offset, local.chunk_bytes(), block.remote_offset,
                     op.remote->mr_chunk_bytes, block.length);
  }
  return n;
}

void VerbsLane::AppendOp(const DataOp& op) {
  // More blocks could need more requests than an empty send queue holds;
  // none would report nothing.
  XFERD_CHECK(op.block_count >= 1 && op.block_count <= kMaxBlocksPerOp);
  uint32_t imm = 0;
  if (op.notice != nullptr) {
    // The record goes first on this QP; RC places it before the
    // WRITE_WITH_IMM that names its slot.
    imm = next_notice_++ % kNoticeSlots;
    uint8_t* record = notices_.outgoing + imm * kNoticeRecordBytes;
    EncodeNoticeRecord(NoticeRecord{op.remote->region_id, *op.notice}, record);
    AppendWr(IBV_WR_RDMA_WRITE, reinterpret_cast<uint64_t>(record), kNoticeRecordBytes,
             notices_.outgoing_lkey, notices_.remote_addr + imm * kNoticeRecordBytes,
             notices_.remote_rkey, nullptr);
  }
  for (uint32_t b = 0; b < op.block_count; ++b) AppendBlock(op, op.blocks[b]);
  // The op's last request reports it; a write's notice rides on it.
  slots_[posted_ % sq_depth_].ends_op = true;
  if (op.notice != nullptr) {
    ibv_send_wr& last = wrs_[chain_ - 1];
    last.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
    last.imm_data = htonl(imm);
  }
}

void VerbsLane::AppendBlock(const DataOp& op, const Block& block) {
  const RemoteRegion& remote = *op.remote;
  const auto& local = static_cast<const VerbsRegistration&>(*op.local_registration);
  const ibv_wr_opcode opcode = op.kind == OpKind::kRead ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
  // The striped lane posts here only ops whose region has keys for this
  // lane (Reaches; their shape checked by CheckRemoteRegionKeys).
  const uint32_t* rkeys = remote.lane_rkeys(remote_device_, lane_);
  ForEachPiece(block.local_offset, local.chunk_bytes(), block.remote_offset, remote.mr_chunk_bytes,
               block.length, [&](uint64_t local_offset, uint64_t remote_offset, uint32_t length) {
                 AppendWr(opcode, reinterpret_cast<uint64_t>(local.base() + local_offset), length,
                          local.lkey_at(local_device_, local_offset), remote.addr + remote_offset,
                          rkeys[remote_offset / remote.mr_chunk_bytes], &op);
               });
}

ibv_send_wr& VerbsLane::AppendWr(ibv_wr_opcode opcode, uint64_t local, uint32_t length,
                                 uint32_t lkey, uint64_t remote, uint32_t rkey, const DataOp* op) {
  const uint64_t seq = ++posted_;
  SendSlot& slot = slots_[seq % sq_depth_];
  slot.cookie = op != nullptr ? op->cookie : 0;
  slot.length = op != nullptr ? op->length : 0;
  slot.ends_op = false;
  slot.ends_bind = false;
  slot.read = opcode == IBV_WR_RDMA_READ;
  ibv_sge& sge = sges_[chain_];
  sge.addr = local;
  sge.length = length;
  sge.lkey = lkey;
  ibv_send_wr& wr = wrs_[chain_++];
  wr = ibv_send_wr{};
  wr.wr_id = MakeWrId(index_, seq & kSeqMask);
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.opcode = opcode;
  // Small writes travel inside the work request: no DMA read of them. (A
  // read's data comes back from the peer: nothing to inline.)
  if (!slot.read && length <= max_inline_) wr.send_flags |= IBV_SEND_INLINE;
  if (++unsignaled_ >= kSignalInterval) {
    wr.send_flags |= IBV_SEND_SIGNALED;
    unsignaled_ = 0;
  }
  wr.wr.rdma.remote_addr = remote;
  wr.wr.rdma.rkey = rkey;
  return wr;
}

void VerbsLane::OnSendCompletion(const ibv_wc& wc, CompletionSink& sink) {
  // Rebuild the full sequence number from its low bits: it is the one that
  // many requests after the oldest outstanding.
  const uint64_t seq = retired_ + 1 + (((wc.wr_id & kSeqMask) - (retired_ + 1)) & kSeqMask);
  if (wc.status == IBV_WC_SUCCESS) {
    Retire(seq, nullptr, sink);
    return;
  }
  // RC completes in order: the requests before this one succeeded.
  Retire(seq - 1, nullptr, sink);
  // The first error is what the link reports; later flushes are noise.
  if (!link_.broken()) {
    link_.Close(CompletionError(wc, link_.peer().node_id, slots_[seq % sq_depth_].read));
  }
  const absl::Status status = link_.status();
  Retire(seq, &status, sink);
}

void VerbsLane::Retire(uint64_t through, const absl::Status* error, CompletionSink& sink) {
  uint64_t written = 0;
  uint64_t read = 0;
  while (retired_ < through) {
    const SendSlot& slot = slots_[++retired_ % sq_depth_];
    if (slot.ends_bind) {
      // RC completes in order: the oldest posted job is this one.
      XFERD_CHECK(!posted_binds_.empty());
      posted_binds_.front().windows->LaneDone(error == nullptr ? absl::OkStatus() : *error);
      posted_binds_.pop_front();
    }
    if (!slot.ends_op) continue;
    --ops_in_flight_;
    if (error == nullptr) (slot.read ? read : written) += slot.length;
    Report(OpCompletion{slot.cookie, slot.length, error}, sink);
  }
  // Reads bring the peer's bytes here: they count as received.
  VerbsContext& device = worker_.context();
  if (written > 0) {
    counters_.bytes_sent.fetch_add(written, std::memory_order_relaxed);
    device.bytes_sent.fetch_add(written, std::memory_order_relaxed);
  }
  if (read > 0) {
    counters_.bytes_received.fetch_add(read, std::memory_order_relaxed);
    device.bytes_received.fetch_add(read, std::memory_order_relaxed);
  }
}

void VerbsLane::OnRecvCompletion(const ibv_wc& wc, const memory::RegionRegistry& regions,
                                 CompletionSink& sink) {
  --recvs_posted_;
  if (wc.status != IBV_WC_SUCCESS) {
    if (wc.status != IBV_WC_WR_FLUSH_ERR && !link_.broken()) {
      link_.Close(CompletionError(wc, link_.peer().node_id, /*read=*/false));
    }
    return;
  }
  if (wc.opcode == IBV_WC_RECV_RDMA_WITH_IMM) Land(ntohl(wc.imm_data), regions, sink);
  // Receives go back in small batches: one doorbell for several.
  if (++recvs_to_repost_ >= kRecvDepth / 4 && !draining_) {
    if (PostReceives(recvs_to_repost_).ok()) recvs_to_repost_ = 0;
  }
}

void VerbsLane::Land(uint32_t slot, const memory::RegionRegistry& regions, CompletionSink& sink) {
  const std::string& peer = link_.peer().node_id;
  NoticeRecord record;
  std::shared_ptr<memory::Region> region;
  if (slot < kNoticeSlots &&
      DecodeNoticeRecord(notices_.incoming + slot * kNoticeRecordBytes, &record)) {
    region = AcceptNotice(record, regions, peer);
  }
  if (region == nullptr) {
    counters_.writes_rejected.fetch_add(1, std::memory_order_relaxed);
    SPDLOG_DEBUG("ignored a malformed landing notice from {} (slot {})", peer, slot);
    return;
  }
  const LandingNotice& n = record.notice;
  // Not counted per device: the notice names the whole transfer's bytes,
  // which the writer may have striped over every device.
  counters_.bytes_received.fetch_add(n.bytes, std::memory_order_relaxed);
  sink.OnLanded(Landing{std::move(region), link_.peer_name(), n, absl::Now()});
}

uint32_t VerbsWorker::ServiceWaitingLanes(CompletionSink& sink) {
  const size_t listed = waiting_lanes_.size();
  for (size_t i = 0; i < waiting_lanes_.size();) {
    VerbsLane* lane = waiting_lanes_[i];
    if (lane->ServiceWaiting(sink)) {
      ++i;
      continue;
    }
    lane->set_listed(false);
    waiting_lanes_[i] = waiting_lanes_.back();
    waiting_lanes_.pop_back();
  }
  return static_cast<uint32_t>(listed - waiting_lanes_.size());
}

uint32_t VerbsWorker::Poll(CompletionSink& sink) {
  uint32_t handled = static_cast<uint32_t>(inbox_->Drain([this](Detaching& d) {
    d.lane->BeginDrain();
    draining_.push_back(std::move(d));  // reserved for every lane of the table
  }));
  // A lane that is closing fails the job at once: only lanes in the table
  // (alive until reaped, which waits for them to be unlisted) get listed.
  handled += static_cast<uint32_t>(binds_->Drain([this](Binding& b) {
    if (b.lane->AddBind(std::move(b.job))) ListWaiting(b.lane);
  }));
  if (armed_) ConsumeChannelEvents();
  ibv_wc wcs[kPollBatch];
  const int n = ibv_poll_cq(cq_.get(), kPollBatch, wcs);
  for (int i = 0; i < n; ++i) {
    VerbsLane* lane = table_[WrIdLane(wcs[i].wr_id)].load(std::memory_order_acquire);
    if (lane == nullptr) continue;  // a flush of a lane torn down undrained (ForgetLane)
    if (wcs[i].wr_id & kRecvFlag) {
      lane->OnRecvCompletion(wcs[i], regions_, sink);
    } else {
      lane->OnSendCompletion(wcs[i], sink);
    }
  }
  if (n > 0) handled += static_cast<uint32_t>(n);
  // After the completions, which made room; before reaping, which needs the
  // lanes' waiting ops reported.
  if (!waiting_lanes_.empty()) handled += ServiceWaitingLanes(sink);
  if (!draining_.empty()) ReapDrained();
  return handled;
}

}  // namespace xferd::transport::verbs
