#include "client/cpp/local_rings.h"

#include <poll.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/cpp/local_socket.h"
#include "xferd/v1/local.pb.h"

namespace xferd::client {

// The session's socket, mapping and doorbells.
struct LocalRings::Mapped {
  int socket = -1;
  int memory = -1, submit = -1, complete = -1;
  std::byte* base = nullptr;
  rings::Geometry geometry{};
  ~Mapped() {
    if (base != nullptr) ::munmap(base, geometry.total_bytes);
    for (int fd : {socket, memory, submit, complete}) {
      if (fd >= 0) ::close(fd);
    }
  }
  rings::Header& header() const { return *reinterpret_cast<rings::Header*>(base); }
  rings::Sqe* sq() const { return reinterpret_cast<rings::Sqe*>(base + geometry.sq_offset); }
  const rings::Cqe* cq() const {
    return reinterpret_cast<const rings::Cqe*>(base + geometry.cq_offset);
  }
  std::byte* buffer() const { return base + geometry.buffer_offset; }
};

namespace {

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::unique_ptr<LocalRings>> LocalRings::Open(const std::string& local_socket,
                                                             const RingOptions& options) {
  auto mapped = std::make_unique<Mapped>();
  absl::StatusOr<int> socket = ConnectLocalSocket(local_socket);
  if (!socket.ok()) return socket.status();
  mapped->socket = *socket;
  v1::LocalRequest request;
  v1::OpenRingsRequest* open = request.mutable_open_rings();
  open->set_sq_entries(options.sq_entries);
  open->set_cq_entries(options.cq_entries);
  open->set_buffer_bytes(options.buffer_bytes);
  open->set_client(options.client_name);
  std::vector<int> fds;
  absl::StatusOr<v1::LocalReply> reply = LocalExchange(mapped->socket, request, &fds);
  if (fds.size() == 3) {
    mapped->memory = fds[0];
    mapped->submit = fds[1];
    mapped->complete = fds[2];
  } else {
    for (int fd : fds) ::close(fd);
  }
  if (!reply.ok()) return reply.status();
  if (mapped->memory < 0) return absl::InternalError("the daemon sent no ring descriptors");
  void* base = ::mmap(nullptr, reply->rings().total_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED,
                      mapped->memory, 0);
  if (base == MAP_FAILED) return Errno("mapping the rings");
  mapped->base = static_cast<std::byte*>(base);
  mapped->geometry.total_bytes = reply->rings().total_bytes();
  std::memcpy(&mapped->geometry, base, sizeof(rings::Geometry));
  const rings::Geometry& g = mapped->geometry;
  if (g.magic != rings::kMagic || g.version != rings::kVersion ||
      g.total_bytes != reply->rings().total_bytes()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the daemon's rings are version ", g.version, "; this client speaks ",
                     rings::kVersion));
  }
  return std::unique_ptr<LocalRings>(new LocalRings(std::move(mapped), options));
}

LocalRings::LocalRings(std::unique_ptr<Mapped> mapped, RingOptions options)
    : mapped_(std::move(mapped)), mapped_geometry_(mapped_->geometry), options_(std::move(options)) {}

LocalRings::~LocalRings() = default;

absl::Status LocalRings::HandlesFor(const RingRequest& r, uint32_t handles[4]) {
  const std::string* names[4] = {&r.peer, &r.src, &r.dst, &r.label};
  v1::LocalRequest request;
  {
    MutexLock lock(&names_mu_);
    for (int i = 0; i < 4; ++i) {
      handles[i] = 0;
      if (names[i]->empty()) continue;
      auto it = handles_.find(*names[i]);
      if (it != handles_.end()) {
        handles[i] = it->second;
      } else {
        request.mutable_intern()->add_names(*names[i]);
      }
    }
  }
  if (!request.has_intern()) return absl::OkStatus();
  std::vector<int> fds;
  absl::StatusOr<v1::LocalReply> reply;
  {
    MutexLock lock(&socket_mu_);
    reply = LocalExchange(mapped_->socket, request, &fds);
  }
  for (int fd : fds) ::close(fd);
  if (!reply.ok()) return reply.status();
  MutexLock lock(&names_mu_);
  const auto& asked = request.intern().names();
  for (int i = 0; i < asked.size() && i < reply->interned().handles_size(); ++i) {
    handles_[asked[i]] = reply->interned().handles(i);
  }
  for (int i = 0; i < 4; ++i) {
    if (!names[i]->empty()) handles[i] = handles_[*names[i]];
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> LocalRings::Submit(const RingRequest& r) {
  uint32_t handles[4];
  if (absl::Status s = HandlesFor(r, handles); !s.ok()) return s;
  const rings::Geometry& g = mapped_->geometry;
  const uint64_t inline_bytes = uint64_t{rings::kMaxExt} * sizeof(rings::Sqe);
  const bool inline_arrays =
      r.arrays.size() <= inline_bytes && r.arrays.size() / sizeof(rings::Sqe) + 1 < g.sq_entries;
  const uint32_t ext =
      inline_arrays ? static_cast<uint32_t>((r.arrays.size() + sizeof(rings::Sqe) - 1) /
                                            sizeof(rings::Sqe))
                    : 0;
  rings::Header& h = mapped_->header();
  // Flow control: a request may take two completions; the CQ holds
  // cq_entries, so at most half of them are in flight.
  {
    MutexLock lock(&mu_);
    while (in_flight_ >= capacity()) {
      if (options_.own_completions) {
        return absl::ResourceExhaustedError(absl::StrCat(
            in_flight_, " requests in flight, all the rings hold: reap some first"));
      }
      if (rings::LoadAcquire(h.closed.value) != 0) {
        return absl::UnavailableError("the daemon closed this session's rings");
      }
      if (!reaping_) {
        ReapAndDispatch(absl::Now() + absl::Milliseconds(100));
      } else {
        mu_.AwaitWithTimeout([this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !reaping_; },
                             absl::Milliseconds(10));
      }
    }
    ++in_flight_;
  }
  MutexLock lock(&submit_mu_);
  // Room in the SQ for the entry and its inline slots.
  while (sq_tail_ + 1 + ext - rings::LoadAcquire(h.sq_head.value) > g.sq_entries) {
    if (rings::LoadAcquire(h.closed.value) != 0) {
      return absl::UnavailableError("the daemon closed this session's rings");
    }
    std::this_thread::yield();
  }
  const uint64_t user_data = next_user_data_++;
  rings::Sqe e{};
  e.opcode = r.opcode;
  e.form = r.form;
  e.ext = static_cast<uint8_t>(ext);
  e.flags = (r.queued_notice ? rings::kFlagQueuedNotice : 0) |
            (r.detached ? rings::kFlagDetached : 0) |
            (!r.verify.has_value() ? 0
             : *r.verify           ? rings::kFlagVerify
                                   : rings::kFlagNoVerify);
  e.expected = r.expected;
  e.slice_kib = static_cast<uint16_t>(r.slice_kib);
  e.priority = r.priority;
  e.peer = handles[0];
  e.src = handles[1];
  e.dst = handles[2];
  e.label = handles[3];
  e.user_data = user_data;
  e.a = r.a;
  e.b = r.b;
  e.c = r.form == rings::kFormRange ? r.length : 0;
  e.timeout_ms = r.timeout_ms;
  if (r.form != rings::kFormRange && !inline_arrays) {
    // One range at a time in the buffer area: wait until the daemon has
    // taken every entry before this one, whose arrays it has then copied.
    if (r.arrays.size() > g.buffer_bytes) {
      MutexLock waiters(&mu_);
      --in_flight_;
      return absl::InvalidArgumentError(absl::StrCat(
          "the request's arrays are ", r.arrays.size(), " bytes, more than the ring's buffer "
          "area of ", g.buffer_bytes, ": open the rings with a larger buffer, or use gRPC"));
    }
    while (rings::LoadAcquire(h.sq_head.value) != sq_tail_) std::this_thread::yield();
    std::memcpy(mapped_->buffer(), r.arrays.data(), r.arrays.size());
    e.c = 0;
  }
  const uint64_t mask = g.sq_entries - 1;
  mapped_->sq()[sq_tail_ & mask] = e;
  for (uint32_t i = 0; i < ext; ++i) {
    const size_t offset = size_t{i} * sizeof(rings::Sqe);
    const size_t n = std::min(sizeof(rings::Sqe), r.arrays.size() - offset);
    std::memcpy(&mapped_->sq()[(sq_tail_ + 1 + i) & mask], r.arrays.data() + offset, n);
  }
  sq_tail_ += 1 + ext;
  rings::StoreRelease(h.sq_tail.value, sq_tail_);
  rings::FullFence();  // the tail before the daemon's flag (its side: the flag, then the tail)
  if (rings::LoadAcquire(h.daemon_idle.value) != 0) {
    const uint64_t one = 1;
    (void)!::write(mapped_->submit, &one, sizeof(one));
  }
  return user_data;
}

RingCompletion LocalRings::Decode(uint64_t position) const {
  const rings::Geometry& g = mapped_->geometry;
  const rings::Cqe& c = mapped_->cq()[position & (g.cq_entries - 1)];
  RingCompletion out;
  out.user_data = c.user_data;
  out.transfer_id = c.transfer_id;
  out.state = c.state;
  out.queued = (c.flags & rings::kCqeMore) != 0;
  out.bytes_done = c.bytes_done;
  out.length = c.length;
  out.blocks = c.blocks;
  out.slices = c.slices;
  out.duration = absl::Nanoseconds(static_cast<int64_t>(c.duration_ns));
  out.verified = (c.flags & rings::kCqeVerified) != 0;
  const char* slot = reinterpret_cast<const char*>(mapped_->base + g.messages_offset) +
                     (position & (g.cq_entries - 1)) * rings::kMessageBytes;
  const absl::string_view held(slot, std::min<size_t>(c.message_bytes, rings::kMessageBytes));
  if ((c.flags & rings::kCqeChecksums) != 0) {
    out.checksums = std::string(held);
  } else if (c.code != 0) {
    out.status = absl::Status(static_cast<absl::StatusCode>(c.code), held);
  }
  return out;
}

std::vector<RingCompletion> LocalRings::ReapSome(size_t max, absl::Time deadline) {
  std::vector<RingCompletion> out;
  rings::Header& h = mapped_->header();
  const rings::Cqe* cq = mapped_->cq();
  const uint64_t mask = mapped_->geometry.cq_entries - 1;
  auto ready = [&] { return rings::LoadAcquire(cq[cq_head_ & mask].seq) == cq_head_ + 1; };
  const absl::Time spin_until = absl::Now() + options_.spin;
  while (!ready()) {
    if (rings::LoadAcquire(h.closed.value) != 0) return out;
    const absl::Time now = absl::Now();
    if (now >= deadline) return out;
    if (now < spin_until) {
      // The daemon's pollers may be waiting for this core (on a host with
      // fewer free cores than spinning threads, not yielding costs a tick).
      std::this_thread::yield();
      continue;
    }
    // Sleep on the doorbell: the flag first, then one more look.
    rings::StoreRelease(h.client_waits.value, 1);
    rings::FullFence();
    if (!ready()) {
      pollfd fd{mapped_->complete, POLLIN, 0};
      const int64_t ms = std::max<int64_t>(1, absl::ToInt64Milliseconds(deadline - now));
      ::poll(&fd, 1, static_cast<int>(std::min<int64_t>(ms, 100)));
      uint64_t count;
      (void)!::read(mapped_->complete, &count, sizeof(count));
    }
    rings::StoreRelease(h.client_waits.value, 0);
  }
  while (out.size() < max && ready()) out.push_back(Decode(cq_head_++));
  rings::StoreRelease(h.cq_head.value, cq_head_);
  // The daemon stops taking entries while the CQ is full: ring it if it
  // sleeps, now that there is room.
  rings::FullFence();
  if (rings::LoadAcquire(h.daemon_idle.value) != 0) {
    const uint64_t one = 1;
    (void)!::write(mapped_->submit, &one, sizeof(one));
  }
  return out;
}

std::vector<RingCompletion> LocalRings::Reap(size_t max, absl::Time deadline) {
  std::vector<RingCompletion> out = ReapSome(max, deadline);
  MutexLock lock(&mu_);
  for (const RingCompletion& c : out) {
    if (!c.queued) --in_flight_;
  }
  return out;
}

absl::StatusOr<RingCompletion> LocalRings::Wait(uint64_t user_data, bool until_queued,
                                                absl::Time deadline) {
  MutexLock lock(&mu_);
  while (true) {
    Waiter& w = waiters_[user_data];
    if (w.final || (until_queued && w.queued)) {
      RingCompletion c = w.final && !(until_queued && w.queued) ? w.final_completion
                                                                 : w.queued_completion;
      if (w.final) waiters_.erase(user_data);
      return c;
    }
    if (absl::Now() >= deadline) {
      w.abandoned = true;  // its completions, when they come, are dropped
      return absl::DeadlineExceededError("no completion from the daemon before the deadline");
    }
    if (rings::LoadAcquire(mapped_->header().closed.value) != 0) {
      return absl::UnavailableError("the daemon closed this session's rings");
    }
    if (!reaping_) {
      ReapAndDispatch(deadline);
      continue;
    }
    auto changed = [this, &w, until_queued]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return w.final || (until_queued && w.queued) || !reaping_;
    };
    mu_.AwaitWithDeadline(changed, deadline);
  }
}

void LocalRings::Forget(uint64_t user_data) {
  MutexLock lock(&mu_);
  auto it = waiters_.find(user_data);
  if (it == waiters_.end()) {
    waiters_[user_data].abandoned = true;
  } else if (it->second.final) {
    waiters_.erase(it);
  } else {
    it->second.abandoned = true;
  }
}

void LocalRings::ReapAndDispatch(absl::Time deadline) {
  reaping_ = true;
  mu_.Unlock();
  std::vector<RingCompletion> got = ReapSome(64, deadline);
  mu_.Lock();
  reaping_ = false;
  for (RingCompletion& c : got) {
    if (!c.queued) --in_flight_;
    auto it = waiters_.find(c.user_data);
    if (it != waiters_.end() && it->second.abandoned) {
      if (!c.queued) waiters_.erase(it);
      continue;
    }
    Waiter& to = waiters_[c.user_data];
    if (c.queued) {
      to.queued = true;
      to.queued_completion = std::move(c);
    } else {
      to.final = true;
      to.final_completion = std::move(c);
    }
  }
}

uint32_t LocalRings::in_flight() const {
  MutexLock lock(&mu_);
  return in_flight_;
}

}  // namespace xferd::client
