// One TCP data connection to a peer, owned by one poller thread. It carries
// both directions, like an RC queue pair: our WRITE and READ_REQ frames and
// the peer's answers (ACK, NACK, READ_RESP), and the peer's frames and our
// answers. Payload moves straight between the socket and region memory with
// vectored I/O (sendmsg / readv over the blocks): no staging copies, no
// allocation and no per-block syscall. With TLS (tcp_tls.h) the same frames
// travel as TLS records: through OpenSSL, read into region memory with no
// buffer of ours; or, where the kernel does TLS both ways, through the very
// same plain socket calls, the kernel decrypting as it receives. Memory that
// can fault (a file region another process truncated) fails only the frame
// that touched it (tcp_lane_fault.cc); the lane carries on.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "daemon/common/unique_fd.h"
#include "daemon/memory/region_registry.h"
#include "daemon/transport/tcp/tcp_frame.h"
#include "daemon/transport/tcp/tcp_lane_slots.h"
#include "daemon/transport/tcp/tcp_tls.h"
#include "daemon/transport/transport.h"

namespace xferd::transport::tcp {

class TcpWorker;

class TcpLane final : public Lane {
 public:
  // `link` owns the lane; `regions` resolves inbound region ids.
  TcpLane(Link& link, const memory::RegionRegistry& regions, uint32_t depth);
  ~TcpLane() override;

  uint32_t credits() const override;
  bool broken() const override { return link_.broken() || !error_.ok(); }

  Link& link() { return link_; }
  // Control thread, before Attach. Both read them by default.
  void set_sums_frames(TcpSumsFrames sums) { sums_frames_ = sums; }
  // The first error this lane hit itself (OK if none); the worker then closes
  // the link with it.
  const absl::Status& error() const { return error_; }

  // ---- poller thread only ----
  // `ssl`: a handshaken TLS session on `fd`, or null for a plain lane and
  // for one whose records the kernel does both ways (`kernel_tls`).
  // `worker`: the one whose epoll set watches `fd` (null: none, the fuzzer
  // drives the lane alone).
  void Attach(UniqueFd fd, UniqueSsl ssl, bool kernel_tls, TcpWorker* worker);
  bool attached() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  // Decrypted bytes wait in OpenSSL while the socket may be empty: the
  // worker must call OnReadable again without waiting for epoll.
  bool input_buffered() const;
  // Queues up to credits() ops as frames; its worker sends them at its next
  // Poll (without one, at once). The ops' blocks and memory stay valid until
  // their completion.
  uint32_t Post(absl::Span<const DataOp> ops) override;
  // Reads and handles frames until the socket is drained (or a fairness
  // budget is spent), then sends the answers. `scratch` holds the bytes of
  // refused or failed frames, and TLS payload for a file region on its way
  // to a guarded copy. A non-OK status breaks the lane.
  absl::Status OnReadable(CompletionSink& sink, absl::Span<std::byte> scratch, uint32_t* events);
  // Sends as much queued data as the socket takes.
  absl::Status Flush();
  bool wants_writable() const { return wants_writable_; }
  // Whether the worker currently asks epoll for EPOLLOUT on this lane, and
  // whether it lists the lane for its next flush (worker's thread only).
  bool writable_armed = false;
  bool flush_listed = false;
  // Fails every op in flight with `error`, closes the socket.
  void Detach(const absl::Status& error, CompletionSink& sink);

 private:
  using TxSlot = TcpTxSlot;
  using Answer = TcpAnswer;
  using SumsOut = TcpSumsOut;
  using Payload = TcpPayload;
  using IovOut = TcpIovOut;
  using Guarded = TcpGuarded;
  static constexpr uint32_t kNoZeros = kTcpNoZeros;

  // kText: a NACK's message, or a verdict's; kChecksums: a verified
  // frame's checksum table, after its payload and verdict.
  // kSums: a SUMS frame's table.
  enum class RxState { kHeader, kTable, kPayload, kDiscard, kVerdict, kText, kChecksums, kSums };

  TxSlot& slot(uint64_t seq) { return tx_ring_[seq % tx_ring_.size()]; }
  static size_t WireBytes(const TxSlot& s);
  static size_t WireBytes(const Answer& a);
  bool AddFrameIov(const TxSlot& s, size_t offset, IovOut& out) const;
  bool AddPayloadIov(const Payload& p, IovOut& out) const;
  // A verified payload this small has its checksums taken just ahead of
  // the kernel's copy, a larger one behind it (BuildIov).
  static constexpr size_t kSumAheadBytes = 64 * 1024;
  size_t BuildIov(iovec* iov, size_t max_iov, Guarded* guarded);
  void Consume(size_t bytes);
  Answer* NewAnswer();
  Answer* NewAnswerAfterAcks();

  // tcp_lane_io.cc: the socket calls, plain or TLS (see there).
  ssize_t RecvSome(void* buf, size_t len);
  ssize_t ReadVec(iovec* iov, int count);
  ssize_t SendPlain(iovec* iov, size_t count);
  ssize_t Send(iovec* iov, size_t count, Guarded guarded);
  ssize_t SendTls(const iovec* iov, size_t count, Guarded guarded);
  ssize_t WriteStage(size_t len);
  ssize_t WriteTls(const void* data, size_t len);
  ssize_t TlsResult(int rc, size_t n);
  std::string IoError(int err) const;
  // IoError for a failed receive; kernel TLS refuses non-data records (EIO).
  std::string RecvError(int err) const;

  // tcp_lane_rx.cc
  absl::Status ReceiveOnce(CompletionSink& sink, absl::Span<std::byte> scratch, uint32_t* frames,
                           ssize_t* n);
  absl::Status OnHeader(CompletionSink& sink);
  absl::Status OnTable();
  absl::Status CheckInbound(std::shared_ptr<memory::Region>* region);
  absl::Status StartReadResponse();
  absl::Status ReceivePayload(CompletionSink& sink, absl::Span<std::byte> scratch, ssize_t* n);
  void EndPayload(CompletionSink& sink);
  void EndVerdict(CompletionSink& sink);
  void FinishPayload(CompletionSink& sink);
  void FinishReadResponse(CompletionSink& sink);
  absl::Status ReadOutcome();
  absl::Status OnTextDone(CompletionSink& sink);
  void AnswerRead(const std::shared_ptr<memory::Region>& region);
  absl::Status HandleAck(uint64_t seq, CompletionSink& sink);
  absl::Status HandleNack(CompletionSink& sink);
  void QueueAck();
  void QueueNack(uint64_t seq, const absl::Status& why);
  absl::Status ProtocolError(absl::string_view what) const;
  absl::Status Fail(absl::Status error);

  // tcp_lane_verify.cc: verified frames.
  static void SumSent(Payload& p, const memory::Region* region, size_t payload_at, size_t from,
                      size_t to, uint64_t* out);
  static void SumAheadIfSmall(Payload& p, const memory::Region* region, uint64_t* out);
  void SumForTls(size_t len);
  bool LandedAsSent();
  void FinishVerifiedRead(const TxSlot& s, CompletionSink& sink);
  void AwaitSums(TxSlot& s, const absl::Status& outcome);
  absl::Status OnSumsHeader();
  void FinishSums(CompletionSink& sink);
  void SumsReady(const Answer& a);
  absl::Status HandleMismatch(CompletionSink& sink);
  static void FlipBitForTest(const iovec* landed, uint32_t count);

  // tcp_lane_fault.cc: memory that faults under a copy.
  const uint8_t* Trailer(uint32_t zeros_from) const;
  static void AddPayloadPiece(IovOut& out, const void* data, size_t len, uint64_t* pos,
                              uint32_t zeros_from);
  ssize_t OnSendFault(iovec* iov, size_t count, Guarded guarded);
  bool PoisonAtCursor();
  ssize_t ReadGuarded(const iovec* iov, uint32_t count, absl::Span<std::byte> bounce);
  absl::Status OnPlaceFault(CompletionSink& sink, int err, ssize_t* n);
  absl::Status OnVerdict(CompletionSink& sink);

  Link& link_;
  const memory::RegionRegistry& regions_;
  TcpWorker* worker_ = nullptr;  // set by Attach
  TcpSumsFrames sums_frames_;
  UniqueFd fd_;
  UniqueSsl ssl_;  // null: a plain lane, or kernel_tls_
  bool kernel_tls_ = false;  // the kernel encrypts and decrypts the records
  absl::Status error_;
  std::string io_error_;  // OpenSSL's reason for the last TLS failure

  // ---- transmit: frames seq in (acked_, posted_]; (acked_, sent_] fully sent ----
  std::vector<TxSlot> tx_ring_;
  uint64_t posted_ = 0;
  uint64_t sent_ = 0;
  uint64_t acked_ = 0;
  size_t send_offset_ = 0;  // bytes of frame sent_+1 already written
  // Answers for the peer, in (answers_sent_, answers_queued_]; the first
  // one partly sent by answer_offset_ bytes.
  std::vector<Answer> answers_;
  uint64_t answers_queued_ = 0;
  uint64_t answers_sent_ = 0;
  size_t answer_offset_ = 0;
  // SUMS frames of our READ_RESPs, in (sums_sent_, sums_queued_], the first
  // one partly sent by sums_offset_ bytes; they go between frames, before
  // the answers, and before any answer but a later READ_RESP that follows
  // their own (BuildIov). sums_in_batch_: how many the last BuildIov took.
  std::vector<SumsOut> sums_;
  uint64_t sums_queued_ = 0;
  uint64_t sums_sent_ = 0;
  size_t sums_offset_ = 0;
  size_t sums_in_batch_ = 0;
  bool wants_writable_ = false;
  // The verdict of the one poisoned frame or answer at the send cursor.
  std::string fault_trailer_;
  // TLS: one record's worth of small pieces gathered for one SSL_write;
  // [tls_stage_sent_, tls_stage_len_) still to write.
  static constexpr size_t kTlsRecordBytes = 16384;  // TLS's largest record
  std::vector<uint8_t> tls_stage_;
  size_t tls_stage_len_ = 0;
  size_t tls_stage_sent_ = 0;

  // ---- receive ----
  RxState rx_state_ = RxState::kHeader;
  // Header, notice and block table of the frame being received; then what
  // follows its payload, from the start: its verdict, its checksum table.
  uint8_t rx_header_[kHeaderBytes + kNoticeBytes + kMaxTableBytes];
  static_assert(kMaxTableBytes >= kMaxChecksumTableBytes);
  size_t rx_have_ = 0;
  size_t rx_want_ = kHeaderBytes;
  FrameHeader rx_frame_;
  std::shared_ptr<memory::Region> rx_region_;
  // The blocks of the payload being received (kept whole for its check):
  // rx_iov_[rx_iov_next_ .. rx_iov_count_) still to fill, the first of them
  // from byte rx_iov_done_ on.
  iovec rx_iov_[kMaxBlocksPerOp];
  uint32_t rx_iov_next_ = 0;
  size_t rx_iov_done_ = 0;
  uint32_t rx_iov_count_ = 0;
  uint32_t rx_left_ = 0;
  bool rx_is_read_resp_ = false;
  bool rx_has_notice_ = false;
  // The payload goes into memory that can fault (over TLS: through a
  // guarded copy); rx_fault_: a guarded copy fell short.
  bool rx_guarded_ = false;
  bool rx_fault_ = false;
  // Non-OK: the frame is drained, not placed, and ends with this: a WRITE's
  // NACK (sent once its payload is drained, so the sender has sent all of
  // it), or our READ's status.
  absl::Status rx_refusal_;
  absl::Status rx_verdict_;  // the sender's, for frames that carry one
  LandingNotice rx_notice_;
  uint32_t rx_text_len_ = 0;
  std::string rx_nack_text_;
  uint64_t rx_last_seq_ = 0;  // last inbound WRITE / READ_REQ (must increase by one)
  // Our verified READs whose answer landed and whose SUMS frame is still
  // to come: frames (acked_, acked_ + rx_awaiting_sums_].
  uint64_t rx_awaiting_sums_ = 0;
  uint64_t ack_pending_ = 0;  // highest landed inbound WRITE not yet acknowledged
  uint64_t ack_sent_ = 0;
};

}  // namespace xferd::transport::tcp
