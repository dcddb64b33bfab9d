#include "daemon/transport/tcp/tcp_link.h"

#include "absl/strings/str_cat.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/log.h"
#include "daemon/transport/tcp/tcp_frame.h"
#include "daemon/transport/tcp/tcp_worker.h"

namespace xferd::transport::tcp {

TcpLink::TcpLink(PeerIdentity peer, std::vector<TcpWorker*> workers,
                 const memory::RegionRegistry& regions, uint32_t lanes, uint32_t depth,
                 DataSocketOptions socket_options, const LaneTls* tls, bool sums_frames)
    : Link(std::move(peer)),
      workers_(std::move(workers)),
      socket_options_(socket_options),
      tls_(tls),
      sums_frames_(sums_frames) {
  lanes_.reserve(lanes);
  for (uint32_t i = 0; i < lanes; ++i) {
    lanes_.push_back(std::make_unique<TcpLane>(*this, regions, depth));
  }
}

TcpLink::~TcpLink() = default;

void TcpLink::AgreeFraming(const TcpEndpoint& remote) {
  for (auto& lane : lanes_) lane->set_sums_frames({sums_frames_, remote.sums_frames});
}

bool TcpLink::ready() const {
  return !broken() && lanes_handed_over_.load(std::memory_order_acquire) == lanes_.size();
}

void TcpLink::AttachLane(uint32_t lane, UniqueFd fd, UniqueSsl ssl) {
  bool kernel_tls = false;
  if (ssl != nullptr) {
    std::string why_not;
    const TlsPath path = tls_->Settle(ssl.get(), fd.get(), &why_not);
    if (!why_not.empty()) {
      spdlog::warn("data lane {} with {}: receive stays in user space: {}", lane, peer().node_id,
                   why_not);
    }
    // Once per link and side: how much of TLS the kernel took over.
    if (lane == 0) spdlog::info("data lanes with {}: {}", peer().node_id, LaneTls::PathName(path));
    if (path == TlsPath::kKernel) {
      // OpenSSL is out of the data path: the lane uses its plain calls.
      ssl.reset();
      kernel_tls = true;
    }
  }
  workers_[lane]->RequestAttach(shared_from_this(), lanes_[lane].get(), std::move(fd),
                                std::move(ssl), kernel_tls);
  lanes_handed_over_.fetch_add(1, std::memory_order_acq_rel);
}

void TcpLink::AttachAccepted(uint32_t lane, UniqueFd fd, UniqueSsl ssl) {
  if (absl::Status s = ConfigureDataSocket(fd.get(), socket_options_); !s.ok()) {
    Close(s);
    return;
  }
  AttachLane(lane, std::move(fd), std::move(ssl));
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
  AgreeFraming(remote.tcp);
  if (remote.tcp.host.empty()) {
    // Dialing "" would reach this host's own loopback, not the peer.
    return absl::InvalidArgumentError(
        "peer advertised no TCP data host: set transport.tcp_advertise_host on it");
  }
  HostPort where{remote.tcp.host, remote.tcp.port};
  for (uint32_t i = 0; i < lanes_.size(); ++i) {
    absl::Status status = ConnectLane(i, where, remote.tcp.session_token, deadline);
    if (!status.ok()) {
      status = absl::Status(
          status.code(), absl::StrCat("data lane ", i, " to ", peer().node_id, " at ", where.host,
                                      ":", where.port, ": ", status.message()));
      Close(status);
      return status;
    }
  }
  return absl::OkStatus();
}

absl::Status TcpLink::ConnectLane(uint32_t index, const HostPort& where, const std::string& token,
                                  absl::Time deadline) {
  ASSIGN_OR_RETURN(UniqueFd fd, Dial(where, deadline));
  UniqueSsl ssl;
  // With TLS the HELLO (and its token) travels encrypted, to a responder
  // whose certificate names the node we handshook with over gRPC.
  if (tls_ != nullptr) {
    ASSIGN_OR_RETURN(ssl, tls_->Connect(fd.get(), peer().node_id, deadline));
  }
  uint8_t hello[kHeaderBytes + kTokenBytes];
  FrameHeader header;
  header.type = FrameType::kHello;
  header.word = index;
  header.length = kTokenBytes;
  EncodeHeader(header, hello);
  std::memcpy(hello + kHeaderBytes, token.data(), kTokenBytes);
  uint8_t reply[kHeaderBytes];
  if (ssl != nullptr) {
    RETURN_IF_ERROR(LaneTls::WriteExactly(ssl.get(), hello, sizeof(hello), deadline));
    RETURN_IF_ERROR(LaneTls::ReadExactly(ssl.get(), reply, sizeof(reply), deadline));
  } else {
    RETURN_IF_ERROR(SendExactly(fd.get(), hello, sizeof(hello), deadline));
    RETURN_IF_ERROR(RecvExactly(fd.get(), reply, sizeof(reply), deadline));
  }
  FrameHeader answer;
  RETURN_IF_ERROR(DecodeHeader(reply, &answer));
  if (answer.type != FrameType::kHelloAck) {
    return absl::UnavailableError("peer refused the data connection");
  }
  RETURN_IF_ERROR(ConfigureDataSocket(fd.get(), socket_options_));
  AttachLane(index, std::move(fd), std::move(ssl));
  return absl::OkStatus();
}

void TcpLink::Close(absl::Status reason) {
  if (!MarkBroken(std::move(reason))) return;
  spdlog::info("link to {} closed: {}", peer().node_id, status().message());
  auto self = shared_from_this();
  for (uint32_t i = 0; i < lanes_.size(); ++i) workers_[i]->RequestDetach(self, lanes_[i].get());
}

}  // namespace xferd::transport::tcp
