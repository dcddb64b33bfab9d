#include "daemon/service/local_socket.h"

#include <pthread.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "daemon/common/log.h"
#include "daemon/service/proto_convert.h"
#include "daemon/service/unix_listen.h"

namespace xferd::service {
namespace {

// A request is small (names, sizes): one packet of at most this.
constexpr size_t kMaxPacket = 64 << 10;

absl::Status Unavailable(absl::string_view what, const std::string& path) {
  return absl::UnavailableError(
      absl::StrCat("local socket ", path, ": ", what, ": ", std::strerror(errno)));
}

// Sends `reply` as one packet with `fds` attached (SCM_RIGHTS).
bool SendReply(int fd, const v1::LocalReply& reply, const std::vector<int>& fds) {
  const std::string bytes = reply.SerializeAsString();
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 4)];
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
  }
  return ::sendmsg(fd, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
}

}  // namespace

std::string LocalSocketPath(const std::string& unix_socket) { return unix_socket + ".local"; }

absl::StatusOr<std::unique_ptr<LocalSocket>> LocalSocket::Start(const LocalSocketOptions& options,
                                                                engine::Engine& engine) {
  absl::StatusOr<UniqueFd> bound =
      ListenUnix(options.path, SOCK_SEQPACKET, options.mode, "local socket");
  if (!bound.ok()) return bound.status();
  UniqueFd listener = *std::move(bound);
  UniqueFd epoll(::epoll_create1(EPOLL_CLOEXEC));
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!epoll.valid() || !wake.valid()) return Unavailable("epoll/eventfd", options.path);
  for (int fd : {listener.get(), wake.get()}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      return Unavailable("epoll_ctl", options.path);
    }
  }
  auto socket = std::unique_ptr<LocalSocket>(new LocalSocket(
      options, engine, std::move(listener), std::move(epoll), std::move(wake)));
  socket->thread_ = std::thread([s = socket.get()] {
    pthread_setname_np(pthread_self(), "xferd-local");
    s->Run();
  });
  spdlog::info("local socket {} serving shm regions{} (mode {:o})", options.path,
               options.rings ? " and request rings" : "", options.mode);
  return socket;
}

LocalSocket::LocalSocket(LocalSocketOptions options, engine::Engine& engine, UniqueFd listener,
                         UniqueFd epoll, UniqueFd wake)
    : options_(std::move(options)),
      engine_(engine),
      listener_(std::move(listener)),
      epoll_(std::move(epoll)),
      wake_(std::move(wake)) {}

LocalSocket::~LocalSocket() { Stop(); }

void LocalSocket::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof(one));
  thread_.join();
  for (auto& [fd, c] : connections_) {
    if (c->session != nullptr) c->session->Close();
  }
  connections_.clear();
  sessions_.store(0);
  ::unlink(options_.path.c_str());
}

void LocalSocket::Run() {
  epoll_event events[32];
  while (!stop_.load()) {
    const int n = ::epoll_wait(epoll_.get(), events, 32, -1);
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_.get()) continue;
      if (fd == listener_.get()) {
        Accept();
        continue;
      }
      auto it = connections_.find(fd);
      if (it == connections_.end()) continue;
      const bool hangup = (events[i].events & (EPOLLHUP | EPOLLERR)) != 0;
      if (!Serve(*it->second) || (hangup && !(events[i].events & EPOLLIN))) Drop(fd);
    }
  }
}

void LocalSocket::Accept() {
  while (true) {
    UniqueFd fd(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd.valid()) return;  // EAGAIN: all taken (or EMFILE: logged by the next attempt)
    auto c = std::make_unique<Connection>();
    const std::optional<ucred> cred = PeerCredentials(fd.get());
    if (cred) c->client = rings::LocalClient{cred->pid, cred->uid, cred->gid, ""};
    // A client whose credentials cannot be read is nobody's: the default.
    c->client.tenant = cred ? &engine_.tenants().ForCredentials(cred->uid, cred->gid)
                            : &engine_.tenants().Default();
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = fd.get();
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd.get(), &ev) != 0) continue;
    spdlog::debug("local client connected pid={} uid={} gid={} tenant={}", c->client.pid,
                  c->client.uid, c->client.gid, c->client.tenant->name());
    c->fd = std::move(fd);
    const int key = c->fd.get();
    connections_[key] = std::move(c);
  }
}

bool LocalSocket::Serve(Connection& c) {
  std::string packet(kMaxPacket, '\0');
  const ssize_t n = ::recv(c.fd.get(), packet.data(), packet.size(), MSG_TRUNC);
  if (n == 0) return false;  // the client closed
  if (n < 0) return errno == EAGAIN || errno == EINTR;
  std::vector<int> fds;
  std::shared_ptr<const void> keep;  // owns `fds` until they are sent
  v1::LocalRequest request;
  v1::LocalReply reply;
  if (static_cast<size_t>(n) > packet.size() || !request.ParseFromArray(packet.data(), n)) {
    ToProto(absl::InvalidArgumentError(absl::StrCat(
                "a local request of ", n, " bytes that is not one LocalRequest message of at "
                "most ", kMaxPacket, " bytes (proto/xferd/v1/local.proto)")),
            reply.mutable_error());
  } else {
    reply = Handle(c, request, &fds, &keep);
  }
  return SendReply(c.fd.get(), reply, fds);
}

v1::LocalReply LocalSocket::Handle(Connection& c, const v1::LocalRequest& request,
                                   std::vector<int>* fds, std::shared_ptr<const void>* keep) {
  v1::LocalReply reply;
  absl::Status status;
  switch (request.request_case()) {
    case v1::LocalRequest::kOpenRings:
      status = OpenRings(c, request.open_rings(), &reply, fds);
      break;
    case v1::LocalRequest::kOpenRegion:
      status = OpenRegion(c, request.open_region(), &reply, fds, keep);
      break;
    case v1::LocalRequest::kIntern: {
      if (c.session == nullptr) {
        status = absl::FailedPreconditionError("intern names after open_rings: they are the "
                                               "rings' names");
        break;
      }
      v1::InternReply* interned = reply.mutable_interned();
      for (const std::string& name : request.intern().names()) {
        absl::StatusOr<uint32_t> handle = c.session->names().Intern(name);
        if (!handle.ok()) {
          status = handle.status();
          break;
        }
        interned->add_handles(*handle);
      }
      break;
    }
    default:
      status = absl::InvalidArgumentError(
          "an empty or unknown local request: this daemon knows open_rings, intern and "
          "open_region");
  }
  if (!status.ok()) {
    reply.Clear();
    fds->clear();
    ToProto(status, reply.mutable_error());
  }
  return reply;
}

absl::Status LocalSocket::OpenRings(Connection& c, const v1::OpenRingsRequest& r,
                                    v1::LocalReply* reply, std::vector<int>* fds) {
  if (!options_.rings) {
    return absl::FailedPreconditionError(
        "this daemon serves no request rings (server.local_rings = false): use gRPC");
  }
  if (c.session != nullptr) {
    return absl::FailedPreconditionError("this session's rings are open already");
  }
  if (sessions_.load() >= options_.max_sessions) {
    return absl::ResourceExhaustedError(
        absl::StrCat(options_.max_sessions, " local sessions have rings open, the most this "
                     "daemon serves: close some, or use gRPC"));
  }
  absl::StatusOr<rings::RingSizes> sizes =
      rings::ChooseSizes(r.sq_entries(), r.cq_entries(), r.buffer_bytes());
  if (!sizes.ok()) return sizes.status();
  c.client.name = r.client().substr(0, 64);
  absl::StatusOr<std::shared_ptr<rings::RingSession>> session =
      rings::RingSession::Create(next_session_++, *sizes, c.client, engine_);
  if (!session.ok()) return session.status();
  c.session = *std::move(session);
  const rings::RingMemory& memory = c.session->memory();
  v1::OpenRingsReply* out = reply->mutable_rings();
  out->set_sq_entries(sizes->sq_entries);
  out->set_cq_entries(sizes->cq_entries);
  out->set_buffer_bytes(sizes->buffer_bytes);
  out->set_total_bytes(memory.geometry().total_bytes);
  *fds = {memory.memory_fd(), memory.submit_fd(), memory.complete_fd()};
  c.session->Start();
  sessions_.fetch_add(1);
  spdlog::info(
      "local session {} opened pid={} uid={} gid={} tenant={} client={:?} sq={} cq={} buffer={}",
      c.session->id(), c.client.pid, c.client.uid, c.client.gid, c.client.tenant->name(),
      c.client.name, sizes->sq_entries, sizes->cq_entries, sizes->buffer_bytes);
  return absl::OkStatus();
}

absl::Status LocalSocket::OpenRegion(const Connection& c, const v1::OpenRegionRequest& r,
                                     v1::LocalReply* reply, std::vector<int>* fds,
                                     std::shared_ptr<const void>* keep) {
  if (r.region().empty()) {
    return absl::InvalidArgumentError("open_region names no region: set open_region.region");
  }
  std::shared_ptr<memory::Region> region = engine_.FindRegion(r.region());
  if (region == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("no region '", r.region(), "' on this daemon (xferctl regions lists them)"));
  }
  if (absl::Status s = c.client.tenant->CheckUse(*region); !s.ok()) return s;
  const int fd = region->backing().shm_fd();
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("region '", r.region(), "' is ",
                     region->backing().kind() == memory::Backing::kFile ? "file" : "anonymous",
                     "-backed: only shm regions' memory can be opened by a local client"));
  }
  v1::OpenRegionReply* out = reply->mutable_region();
  out->set_region(region->name());
  out->set_size(region->size());
  out->set_node_id(engine_.self().node_id);
  out->set_pid(static_cast<uint32_t>(::getpid()));
  *fds = {fd};
  // Its memfd stays open until the reply is sent, whoever deregisters it
  // meanwhile; sendmsg gives the client a descriptor of its own.
  *keep = std::move(region);
  spdlog::debug("local client pid={} uid={} opened shm region '{}'", c.client.pid, c.client.uid,
                r.region());
  return absl::OkStatus();
}

void LocalSocket::Drop(int fd) {
  auto it = connections_.find(fd);
  if (it == connections_.end()) return;
  ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  if (it->second->session != nullptr) {
    it->second->session->Close();
    sessions_.fetch_sub(1);
  }
  connections_.erase(it);
}

}  // namespace xferd::service
