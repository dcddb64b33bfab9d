#include "daemon/transport/tcp/tcp_acceptor.h"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/transport/tcp/tcp_frame.h"
#include "daemon/transport/tcp/tcp_link.h"

namespace xferd::transport::tcp {
namespace {

constexpr int kBacklog = 256;
// Connections waiting for their HELLO at once; more are refused, so a flood
// of idle connections cannot exhaust the daemon's descriptors.
constexpr size_t kMaxPending = 1024;
// Marks the listening socket and the wake eventfd in epoll data.
constexpr int kListenTag = -1;
constexpr int kWakeTag = -2;

}  // namespace

absl::StatusOr<std::unique_ptr<TcpAcceptor>> TcpAcceptor::Create(const HostPort& listen,
                                                                 absl::Duration hello_timeout,
                                                                 const LaneTls* tls) {
  absl::StatusOr<UniqueFd> fd = Listen(listen, kBacklog);
  if (!fd.ok()) {
    return absl::Status(
        fd.status().code(),
        absl::StrCat("TCP data listener (transport.tcp_data_listen): ", fd.status().message()));
  }
  absl::StatusOr<uint16_t> port = LocalPort(fd->get());
  if (!port.ok()) return port.status();
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
  if (!wake.valid() || !epoll.valid()) {
    return absl::ResourceExhaustedError(absl::StrCat("eventfd/epoll: ", std::strerror(errno)));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = kListenTag;
  ::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, fd->get(), &ev);
  ev.data.fd = kWakeTag;
  ::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, wake.get(), &ev);
  auto acceptor = std::unique_ptr<TcpAcceptor>(new TcpAcceptor(
      *std::move(fd), std::move(wake), std::move(epoll), *port, hello_timeout, tls));
  acceptor->thread_ = std::thread([a = acceptor.get()] { a->Run(); });
  return acceptor;
}

TcpAcceptor::TcpAcceptor(UniqueFd listen, UniqueFd wake, UniqueFd epoll, uint16_t port,
                         absl::Duration hello_timeout, const LaneTls* tls)
    : listen_(std::move(listen)),
      wake_(std::move(wake)),
      epoll_(std::move(epoll)),
      port_(port),
      hello_timeout_(hello_timeout),
      tls_(tls) {}

TcpAcceptor::~TcpAcceptor() { Stop(); }

void TcpAcceptor::Stop() {
  if (stop_.exchange(true)) return;
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
}

void TcpAcceptor::Expect(const std::string& token, std::weak_ptr<TcpLink> link, uint32_t lane_count,
                         absl::Time deadline) {
  MutexLock lock(&mu_);
  expected_[token] = Expected{std::move(link), std::vector<bool>(lane_count, false), deadline};
}

void TcpAcceptor::Run() {
  epoll_event events[64];
  while (!stop_.load()) {
    const int n = ::epoll_wait(epoll_.get(), events, 64, 1000);
    for (int i = 0; i < n; ++i) {
      const int tag = events[i].data.fd;
      if (tag == kWakeTag) continue;
      if (tag == kListenTag) {
        AcceptAll();
        continue;
      }
      auto it = pending_.find(tag);
      if (it != pending_.end() && Advance(*it->second)) pending_.erase(it);
    }
    ExpireOld(absl::Now());
  }
  pending_.clear();
}

void TcpAcceptor::AcceptAll() {
  for (;;) {
    UniqueFd fd(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd.valid()) return;  // EAGAIN, or a transient error such as EMFILE
    if (pending_.size() >= kMaxPending) {
      refused_.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd.get();
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd.get(), &ev) != 0) continue;
    auto pending = std::make_unique<Pending>();
    const int key = fd.get();
    if (tls_ != nullptr) {
      absl::StatusOr<UniqueSsl> ssl = tls_->NewServerSession(fd.get());
      if (!ssl.ok()) {
        refused_.fetch_add(1, std::memory_order_relaxed);
        spdlog::warn("refused data connection: {}", ssl.status().message());
        continue;
      }
      pending->ssl = *std::move(ssl);
    }
    pending->events = ev.events;
    pending->fd = std::move(fd);
    pending->deadline = absl::Now() + hello_timeout_;
    pending_[key] = std::move(pending);
  }
}

void TcpAcceptor::Refuse(Pending& pending, absl::string_view why) {
  refused_.fetch_add(1, std::memory_order_relaxed);
  spdlog::warn("refused data connection from {}: {}", PeerAddress(pending.fd.get()), why);
}

void TcpAcceptor::Watch(Pending& p, uint32_t events) {
  events |= EPOLLRDHUP;
  if (p.events == events) return;
  epoll_event ev{};
  ev.events = events;
  ev.data.fd = p.fd.get();
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, p.fd.get(), &ev);
  p.events = events;
}

bool TcpAcceptor::Advance(Pending& p) {
  if (p.ssl != nullptr && !p.handshaken) {
    std::string error;
    switch (LaneTls::Accept(p.ssl.get(), &error)) {
      case TlsStep::kWantRead:
        Watch(p, EPOLLIN);
        return false;
      case TlsStep::kWantWrite:
        Watch(p, EPOLLOUT);
        return false;
      case TlsStep::kFailed:
        Refuse(p, absl::StrCat("TLS handshake failed: ", error));
        return true;
      case TlsStep::kDone:
        p.handshaken = true;
        Watch(p, EPOLLIN);
        break;  // the HELLO may be in already
    }
  }
  return ReadHello(p);
}

std::shared_ptr<TcpLink> TcpAcceptor::FindLink(const std::string& token, uint32_t lane,
                                               bool claim) {
  MutexLock lock(&mu_);
  auto it = expected_.find(token);
  if (it == expected_.end() || lane >= it->second.claimed.size() || it->second.claimed[lane]) {
    return nullptr;
  }
  std::shared_ptr<TcpLink> link = it->second.link.lock();
  if (!claim) return link;
  it->second.claimed[lane] = true;
  if (std::all_of(it->second.claimed.begin(), it->second.claimed.end(), [](bool c) { return c; })) {
    expected_.erase(it);
  }
  return link;
}

bool TcpAcceptor::ReadHello(Pending& p) {
  const size_t want = kHeaderBytes + kTokenBytes;
  ssize_t n;
  if (p.ssl == nullptr) {
    n = ::recv(p.fd.get(), p.hello + p.have, want - p.have, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return false;
  } else {
    size_t got = 0;
    const int rc = SSL_read_ex(p.ssl.get(), p.hello + p.have, want - p.have, &got);
    const int error = rc == 1 ? SSL_ERROR_NONE : SSL_get_error(p.ssl.get(), rc);
    if (error == SSL_ERROR_WANT_READ || error == SSL_ERROR_WANT_WRITE) {
      Watch(p, error == SSL_ERROR_WANT_READ ? EPOLLIN : EPOLLOUT);
      return false;
    }
    n = error == SSL_ERROR_NONE ? static_cast<ssize_t>(got) : 0;
    if (n == 0) OpenSslError("");  // what ended it does not matter: refused
  }
  if (n <= 0) {
    Refuse(p, "closed before HELLO");
    return true;
  }
  p.have += static_cast<size_t>(n);
  if (p.have < want) return false;
  FrameHeader hello;
  if (absl::Status s = DecodeHeader(p.hello, &hello); !s.ok() || hello.type != FrameType::kHello) {
    Refuse(p, s.ok() ? "first frame is not a HELLO" : s.message());
    return true;
  }
  const std::string token(reinterpret_cast<const char*>(p.hello + kHeaderBytes), kTokenBytes);
  std::shared_ptr<TcpLink> link = FindLink(token, hello.word, /*claim=*/false);
  if (link != nullptr && p.ssl != nullptr) {
    // A token alone does not make a lane: it must come from the node the
    // link was handshaken with, so a token seen elsewhere is useless to
    // every other certificate holder.
    if (absl::Status s = LaneTls::CheckPeerNamed(p.ssl.get(), link->peer().node_id); !s.ok()) {
      Refuse(p, s.message());
      return true;
    }
  }
  if (link != nullptr) link = FindLink(token, hello.word, /*claim=*/true);
  if (link == nullptr || link->broken()) {
    Refuse(p, "unknown session token or lane (no handshake, or lane already connected)");
    return true;
  }
  uint8_t ack[kHeaderBytes];
  FrameHeader header;
  header.type = FrameType::kHelloAck;
  header.word = hello.word;
  EncodeHeader(header, ack);
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, p.fd.get(), nullptr);
  // 32 bytes (one small record) into a fresh socket's empty send buffer:
  // this does not block.
  size_t sent = 0;
  const bool ok =
      p.ssl != nullptr
          ? SSL_write_ex(p.ssl.get(), ack, sizeof(ack), &sent) == 1 && sent == sizeof(ack)
          : ::send(p.fd.get(), ack, sizeof(ack), MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof(ack));
  if (!ok) {
    if (p.ssl != nullptr) OpenSslError("");
    link->Close(absl::UnavailableError("data lane failed during HELLO"));
    return true;
  }
  link->AttachAccepted(hello.word, std::move(p.fd), std::move(p.ssl));
  return true;
}

void TcpAcceptor::ExpireOld(absl::Time now) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (it->second->deadline < now) {
      Refuse(*it->second, "no HELLO in time");
      pending_.erase(it++);
    } else {
      ++it;
    }
  }
  MutexLock lock(&mu_);
  for (auto it = expected_.begin(); it != expected_.end();) {
    if (it->second.deadline < now || it->second.link.expired()) {
      if (auto link = it->second.link.lock()) {
        link->Close(
            absl::DeadlineExceededError("the initiator did not connect all data lanes in time"));
      }
      expected_.erase(it++);
    } else {
      ++it;
    }
  }
}

}  // namespace xferd::transport::tcp
