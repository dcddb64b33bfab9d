#include "daemon/transport/tcp/tcp_link.h"

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/transport/tcp/tcp_frame.h"
#include "daemon/transport/tcp/tcp_worker.h"

namespace xferd::transport::tcp {

TcpLink::TcpLink(PeerIdentity peer, std::vector<TcpWorker*> workers,
                 const memory::RegionRegistry& regions, uint32_t lanes, uint32_t depth,
                 DataSocketOptions socket_options)
    : Link(std::move(peer)), workers_(std::move(workers)), socket_options_(socket_options) {
  lanes_.reserve(lanes);
  for (uint32_t i = 0; i < lanes; ++i) {
    lanes_.push_back(std::make_unique<TcpLane>(*this, regions, depth));
  }
}

TcpLink::~TcpLink() = default;

bool TcpLink::ready() const {
  return !broken() && lanes_handed_over_.load(std::memory_order_acquire) == lanes_.size();
}

void TcpLink::AttachLane(uint32_t lane, UniqueFd fd) {
  workers_[lane]->RequestAttach(shared_from_this(), lanes_[lane].get(), std::move(fd));
  lanes_handed_over_.fetch_add(1, std::memory_order_acq_rel);
}

void TcpLink::AttachAccepted(uint32_t lane, UniqueFd fd) {
  if (absl::Status s = ConfigureDataSocket(fd.get(), socket_options_); !s.ok()) {
    Close(s);
    return;
  }
  AttachLane(lane, std::move(fd));
}

absl::Status TcpLink::Connect(const PeerIdentity& remote_peer, const LinkEndpoints& remote,
                              absl::Time deadline) {
  set_peer(remote_peer);
  if (remote.kind != TransportKind::kTcp || remote.tcp.port == 0 ||
      remote.tcp.session_token.size() != kTokenBytes) {
    return absl::InvalidArgumentError("peer sent no usable TCP data endpoint");
  }
  if (remote.lanes == 0 || remote.lanes > lanes_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("peer answered with ", remote.lanes,
                                                   " lanes; this daemon offered ", lanes_.size()));
  }
  // The responder settles the lane count (the smaller poller count of the
  // two). Nothing uses the link before Connect returns, so trimming is safe.
  lanes_.resize(remote.lanes);
  HostPort where{remote.tcp.host.empty() ? fallback_host_ : remote.tcp.host, remote.tcp.port};
  for (uint32_t i = 0; i < lanes_.size(); ++i) {
    absl::StatusOr<UniqueFd> fd = Dial(where, deadline);
    absl::Status status = fd.status();
    if (status.ok()) {
      uint8_t hello[kHeaderBytes + kTokenBytes];
      FrameHeader header;
      header.type = FrameType::kHello;
      header.word = i;
      header.length = kTokenBytes;
      EncodeHeader(header, hello);
      std::memcpy(hello + kHeaderBytes, remote.tcp.session_token.data(), kTokenBytes);
      status = SendExactly(fd->get(), hello, sizeof(hello), deadline);
      uint8_t reply[kHeaderBytes];
      if (status.ok()) status = RecvExactly(fd->get(), reply, sizeof(reply), deadline);
      FrameHeader answer;
      if (status.ok()) status = DecodeHeader(reply, &answer);
      if (status.ok() && answer.type != FrameType::kHelloAck) {
        status = absl::UnavailableError("peer refused the data connection");
      }
      if (status.ok()) status = ConfigureDataSocket(fd->get(), socket_options_);
    }
    if (!status.ok()) {
      status = absl::Status(
          status.code(), absl::StrCat("data lane ", i, " to ", peer().node_id, " at ", where.host,
                                      ":", where.port, ": ", status.message()));
      Close(status);
      return status;
    }
    AttachLane(i, *std::move(fd));
  }
  return absl::OkStatus();
}

void TcpLink::Close(absl::Status reason) {
  if (!MarkBroken(std::move(reason))) return;
  spdlog::info("link to {} closed: {}", peer().node_id, status().message());
  auto self = shared_from_this();
  for (uint32_t i = 0; i < lanes_.size(); ++i) workers_[i]->RequestDetach(self, lanes_[i].get());
}

}  // namespace xferd::transport::tcp
