// One TCP data connection to a peer, owned by one poller thread. It carries
// both directions, like an RC queue pair: our WRITE frames and the peer's
// acknowledgements of them, and the peer's WRITE frames and our
// acknowledgements. Outbound payload is sent straight from region memory
// (writev); inbound payload is validated, then received straight into the
// destination region (readv): no staging copies.
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
#include "daemon/transport/transport.h"

namespace xferd::transport::tcp {

class TcpLane final : public Lane {
 public:
  // `link` owns the lane; `regions` resolves inbound region ids.
  TcpLane(Link& link, const memory::RegionRegistry& regions, uint32_t depth);
  ~TcpLane() override;

  uint32_t credits() const override;
  bool broken() const override { return link_.broken() || !error_.ok(); }

  Link& link() { return link_; }
  // The first error this lane hit itself (OK if none); the worker then closes
  // the link with it.
  const absl::Status& error() const { return error_; }

  // ---- poller thread only ----
  void Attach(UniqueFd fd);
  bool attached() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  // Queues up to credits() frames and starts sending them.
  uint32_t Post(absl::Span<const DataOp> ops);
  // Reads and handles frames until the socket is drained (or a fairness
  // budget is spent), then sends the acknowledgements. `scratch` holds the
  // bytes of refused writes. A non-OK status breaks the lane.
  absl::Status OnReadable(CompletionSink& sink, absl::Span<std::byte> scratch, uint32_t* events);
  // Sends as much queued data as the socket takes.
  absl::Status Flush();
  bool wants_writable() const { return wants_writable_; }
  // Whether the worker currently asks epoll for EPOLLOUT on this lane.
  bool writable_armed = false;
  // Fails every write in flight with `error`, closes the socket.
  void Detach(const absl::Status& error, CompletionSink& sink);

 private:
  struct TxSlot {
    uint64_t cookie = 0;
    const std::byte* payload = nullptr;
    uint32_t payload_len = 0;
    uint32_t header_len = 0;
    uint8_t header[kHeaderBytes + kNoticeBytes];
  };
  enum class RxState { kHeader, kNotice, kPayload, kDiscard, kNackText };

  TxSlot& slot(uint64_t seq) { return tx_ring_[seq % tx_ring_.size()]; }
  size_t BuildIov(iovec* iov, size_t max_iov);
  void Consume(size_t bytes);

  absl::Status OnHeader(CompletionSink& sink);
  void StartWritePayload();
  void FinishWritePayload();
  absl::Status HandleAck(uint64_t seq, CompletionSink& sink);
  absl::Status HandleNack(CompletionSink& sink);
  void QueueAck();
  void QueueNack(uint64_t seq, const absl::Status& why);
  absl::Status ProtocolError(absl::string_view what) const;
  absl::Status Fail(absl::Status error);

  Link& link_;
  const memory::RegionRegistry& regions_;
  UniqueFd fd_;
  absl::Status error_;

  // ---- transmit: frames seq in (acked_, posted_]; (acked_, sent_] fully sent ----
  std::vector<TxSlot> tx_ring_;
  uint64_t posted_ = 0;
  uint64_t sent_ = 0;
  uint64_t acked_ = 0;
  size_t send_offset_ = 0;  // bytes of frame sent_+1 already written
  // ACK/NACK frames for the peer, sent between our frames.
  std::string control_;
  size_t control_sent_ = 0;
  bool wants_writable_ = false;

  // ---- receive ----
  RxState rx_state_ = RxState::kHeader;
  uint8_t rx_header_[kHeaderBytes + kNoticeBytes];
  size_t rx_have_ = 0;
  FrameHeader rx_frame_;
  std::shared_ptr<memory::Region> rx_region_;
  std::byte* rx_dst_ = nullptr;
  uint32_t rx_left_ = 0;
  bool rx_has_notice_ = false;
  LandingNotice rx_notice_;
  std::string rx_nack_text_;
  uint64_t rx_last_seq_ = 0;  // last inbound WRITE seen (must increase by one)
  uint64_t ack_pending_ = 0;  // highest landed inbound WRITE not yet acknowledged
  uint64_t ack_sent_ = 0;
};

}  // namespace xferd::transport::tcp
