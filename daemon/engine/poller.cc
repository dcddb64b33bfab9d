#include "daemon/engine/poller.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sys/epoll.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/base/status_macros.h"
#include "daemon/common/check.h"
#include "daemon/common/log.h"
#include "daemon/common/thread_slice.h"
#include "daemon/engine/spin_window.h"

namespace xferd::engine {
namespace {

// Ops posted per transfer per pass: one doorbell/writev for a batch, while
// other transfers on the same poller still get their turn.
constexpr uint32_t kMaxPostBatch = 16;

using Clock = std::chrono::steady_clock;

// The steady clock in nanoseconds, as the tenants' buckets count time.
int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

}  // namespace

Poller::Poller(uint32_t index, transport::TransportWorker& worker, const PollerOptions& options,
               PollerPool& pool, std::unique_ptr<TransferInbox> inbox, Notes& notes,
               std::unique_ptr<SourceInbox> sources, UniqueFd sources_epoll)
    : index_(index),
      worker_(worker),
      options_(options),
      pool_(pool),
      inbox_(std::move(inbox)),
      notes_(notes),
      source_inbox_(std::move(sources)),
      sources_epoll_(std::move(sources_epoll)) {
  // Sized once, like the inbox: a transfer is in at most one of them at a
  // time per poller, and the engine admits at most max_transfers. The lane
  // map grows only past this many lanes holding ops at once.
  for (auto& transfers : active_) transfers.reserve(options_.max_transfers);
  for (size_t c = 0; c < kPriorities; ++c) {
    tenant_shares_.emplace_back(options_.tenants, options_.max_transfers);
  }
  dropped_.reserve(options_.max_transfers);
  lane_bytes_.reserve(1024);
}

Poller::~Poller() { Stop(); }

void Poller::Start() {
  thread_ = std::thread([this] {
    const std::string name = absl::StrCat("xferd-poll-", index_);
    pthread_setname_np(pthread_self(), name.c_str());
    if (options_.slice > absl::ZeroDuration()) AskForSlice();
    Run();
  });
  const std::vector<uint32_t> wanted = worker_.preferred_cpus();
  if (wanted.empty()) return;
  // Pinned from here rather than by the thread itself, so that cpus() is
  // settled when Start returns; the thread's first moments may run anywhere.
  cpu_set_t set;
  CPU_ZERO(&set);
  for (uint32_t cpu : wanted) {
    if (cpu < CPU_SETSIZE) CPU_SET(cpu, &set);
  }
  const int err = pthread_setaffinity_np(thread_.native_handle(), sizeof(set), &set);
  if (err == 0 && pthread_getaffinity_np(thread_.native_handle(), sizeof(set), &set) == 0) {
    for (uint32_t cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) cpus_.push_back(cpu);
    }
  }
  if (cpus_.empty()) {
    spdlog::warn("poller {}: cannot pin to CPUs {}: {}", index_, absl::StrJoin(wanted, ","),
                 std::strerror(err));
  } else {
    spdlog::info("poller {} pinned to CPUs {} (its device's NUMA node)", index_,
                 absl::StrJoin(cpus_, ","));
  }
}

void Poller::AskForSlice() {
  const absl::StatusOr<bool> honoured = SetThreadSlice(options_.slice);
  if (index_ != 0) return;  // one line for the pool: every poller asks alike
  if (!honoured.ok()) {
    spdlog::warn("pollers keep the kernel's time slice: {}", honoured.status().message());
  } else if (*honoured) {
    spdlog::info("pollers run with a {} time slice (engine.poller_slice)",
                 absl::FormatDuration(options_.slice));
  } else {
    spdlog::info(
        "this kernel keeps no time slice per thread (Linux 6.12 and later do): "
        "engine.poller_slice has no effect");
  }
}

void Poller::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  inbox_->Wake();
  thread_.join();
  for (auto& transfers : active_) transfers.clear();
  sources_.clear();
  // The thread is gone: drop what it left.
  inbox_->Drain([](std::shared_ptr<Transfer>&) {});
  source_inbox_->Drain([](SourceCommand&) {});
}

void Poller::Submit(std::shared_ptr<Transfer> transfer) {
  XFERD_CHECK(inbox_->Push(std::move(transfer)));  // the engine's admission bounds it
}

void Poller::Wake() { inbox_->Wake(); }

void Poller::Attach(std::shared_ptr<PollSource> source) {
  source_count_.fetch_add(1, std::memory_order_relaxed);
  XFERD_CHECK(source_inbox_->Push(SourceCommand{true, std::move(source)}));  // unbounded
}

void Poller::Detach(std::shared_ptr<PollSource> source) {
  source_count_.fetch_sub(1, std::memory_order_relaxed);
  XFERD_CHECK(source_inbox_->Push(SourceCommand{false, std::move(source)}));
}

uint32_t Poller::ServiceSources() {
  uint32_t work = static_cast<uint32_t>(source_inbox_->Drain([this](SourceCommand& c) {
    const int fd = c.source->wake_fd();
    if (c.attach) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      // A source whose fd cannot be watched is still polled while awake;
      // it could not wake a sleeping poller, so the failure is logged.
      if (::epoll_ctl(sources_epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
        spdlog::error("poller {}: cannot watch a poll source's fd: {}", index_,
                      std::strerror(errno));
      }
      sources_.push_back(std::move(c.source));
    } else {
      ::epoll_ctl(sources_epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
      sources_.erase(std::remove(sources_.begin(), sources_.end(), c.source), sources_.end());
    }
  }));
  for (const std::shared_ptr<PollSource>& source : sources_) work += source->Poll();
  return work;
}

PollerStats Poller::stats() const {
  PollerStats stats;
  stats.sleeps = sleeps_.load(std::memory_order_relaxed);
  stats.asleep = absl::Nanoseconds(asleep_ns_.load(std::memory_order_relaxed));
  stats.sleeping = inbox_->sleeping();
  stats.active_transfers = active_count_.load(std::memory_order_relaxed);
  stats.spin = absl::Nanoseconds(spin_ns_.load(std::memory_order_relaxed));
  return stats;
}

void Poller::Run() {
  SpinWindow spin(absl::ToChronoNanoseconds(options_.spin),
                  absl::ToChronoNanoseconds(options_.spin_max));
  spin_ns_.store(spin.now().count(), std::memory_order_relaxed);
  auto last_work = Clock::now();
  while (!stop_.load(std::memory_order_relaxed)) {
    uint32_t work = 0;
    {
      Notes::Batch notes(notes_);  // the ends and landings of this pass: one wake-up
      // Wakes up to here are seen by this pass; later ones stop the next Sleep().
      work += ServiceSources();
      work += static_cast<uint32_t>(inbox_->Drain(
          [this](std::shared_ptr<Transfer>& transfer) { Take(std::move(transfer)); }));
      work += ServiceTransfers();
      work += worker_.Poll(*this);
    }
    const auto now = Clock::now();
    if (work > 0) {
      last_work = now;
    } else if (now - last_work >= spin.now()) {
      if (const std::optional<std::chrono::nanoseconds> slept = Sleep()) {
        spin.Slept(*slept);
        spin_ns_.store(spin.now().count(), std::memory_order_relaxed);
      }
      last_work = Clock::now();
    } else {
      // Spinning with nothing to do: let any other runnable thread of this
      // core go first (a gRPC thread with a reply, the peer daemon's poller
      // on the same host). With no one waiting this returns at once.
      sched_yield();
    }
  }
}

void Poller::Take(std::shared_ptr<Transfer> transfer) {
  transfer->HeldBy(index_);
  const size_t c = PriorityIndex(transfer->plan().spec.priority);
  if (active_[c].empty() && c != PriorityIndex(Priority::kCritical)) {
    // Back from idle: no credit for the time it had nothing to send.
    uint64_t least = UINT64_MAX;
    for (size_t k = PriorityIndex(Priority::kNormal); k < kPriorities; ++k) {
      if (k != c && !active_[k].empty()) least = std::min(least, vtime_[k]);
    }
    if (least != UINT64_MAX) vtime_[c] = std::max(vtime_[c], least);
  }
  active_[c].push_back(std::move(transfer));
}

uint32_t Poller::ServiceTransfers() {
  now_ns_ = 0;  // read on first use: only capped tenants' transfers need it
  throttled_until_ns_ = 0;
  uint64_t bytes = 0;
  uint32_t posted = ServiceClass(Priority::kCritical, &bytes);
  // The other classes, the least served per unit of weight first: when
  // their lanes have room for all, order does not matter; when not, the
  // bytes are shared by weight.
  std::array<Priority, kPriorities - 1> order = {Priority::kNormal, Priority::kBulk,
                                                 Priority::kBackground};
  std::sort(order.begin(), order.end(), [this](Priority a, Priority b) {
    const size_t i = PriorityIndex(a), j = PriorityIndex(b);
    return vtime_[i] != vtime_[j] ? vtime_[i] < vtime_[j] : i < j;
  });
  for (Priority p : order) {
    const size_t c = PriorityIndex(p);
    if (active_[c].empty()) continue;
    bytes = 0;
    posted += ServiceClass(p, &bytes);
    vtime_[c] += bytes / options_.weights[c];
  }
  uint32_t active = 0;
  for (const auto& transfers : active_) active += static_cast<uint32_t>(transfers.size());
  active_count_.store(active, std::memory_order_relaxed);
  return posted;
}

uint32_t Poller::ServiceClass(Priority priority, uint64_t* bytes) {
  std::vector<std::shared_ptr<Transfer>>& active = active_[PriorityIndex(priority)];
  size_t& next_start = next_start_[PriorityIndex(priority)];
  if (active.empty()) return 0;
  TenantShares& shares = tenant_shares_[PriorityIndex(priority)];
  uint32_t posted = 0;
  // The next pass starts after the last transfer that posted in this one:
  // when the lanes take less than everyone has (credits, lane_bytes), each
  // transfer gets its turn to go first, and none is passed over for good.
  size_t resume = next_start % active.size();
  dropped_.clear();
  for (const uint32_t i : shares.Order(active, resume)) {
    const uint32_t before = posted;
    uint64_t posted_bytes = 0;
    if (ServiceOne(*active[i], &posted, &posted_bytes)) {
      if (posted != before) resume = i + 1;
    } else {
      dropped_.push_back(i);
    }
    shares.Charge(*active[i], posted_bytes);
    *bytes += posted_bytes;
  }
  // Let go of those it is done with, the highest index first, so each swap
  // with the last entry moves one that stays.
  std::sort(dropped_.begin(), dropped_.end(), std::greater<uint32_t>());
  for (const uint32_t i : dropped_) {
    active[i]->ReleasedBy(index_);
    active[i] = std::move(active.back());
    active.pop_back();
  }
  next_start = active.empty() ? 0 : resume % active.size();
  return posted;
}

bool Poller::ServiceOne(Transfer& t, uint32_t* posted, uint64_t* bytes) {
  if (IsTerminal(t.state())) return false;
  transport::Link& link = *t.plan().link;
  if (index_ >= link.lane_count()) return false;
  transport::Lane& lane = link.lane(index_);
  if (lane.broken()) {
    t.Finish(TransferState::kFailed, link.status());
    return false;
  }
  // A tenant over its bandwidth waits (whatever the class) until its
  // bucket lets it post again; the poller sleeps no longer than that.
  const Tenant* tenant = t.plan().spec.tenant;
  const bool capped = tenant != nullptr && tenant->bandwidth().limited();
  if (capped && now_ns_ == 0) now_ns_ = NowNs();
  const uint64_t allowance = capped ? tenant->bandwidth().Allowance(now_ns_) : UINT64_MAX;
  if (allowance == 0) {
    const int64_t until = now_ns_ + std::max<int64_t>(1, tenant->bandwidth().WaitNs(now_ns_));
    if (throttled_until_ns_ == 0 || until < throttled_until_ns_) throttled_until_ns_ = until;
    return true;
  }
  // Critical ops go first but never take a lane's last credit, which the
  // other classes keep so that they progress under any critical load. The
  // others join a lane only while it holds less than lane_bytes (a critical
  // op waits behind that much at most), or than two of this transfer's
  // slices if they are larger: with one, the lane would idle while each
  // slice's acknowledgement comes back. Critical ops' bytes count too: the
  // others give way while a critical burst drains, rather than add to what
  // the socket or send queue holds (which slowed them all), but they always
  // keep one op on the lane, so none starves.
  const bool critical = t.plan().spec.priority == Priority::kCritical;
  const uint32_t lane_credits = lane.credits();
  const uint32_t credits =
      std::min(critical ? (lane_credits > 0 ? lane_credits - 1 : 0) : lane_credits, kMaxPostBatch);
  if (credits == 0) return true;
  const auto held_at = lane_bytes_.find(&lane);
  const LaneHeld held = held_at == lane_bytes_.end() ? LaneHeld{} : held_at->second;
  const uint64_t limit = std::max<uint64_t>(options_.lane_bytes, 2 * uint64_t{t.plan().slice_size});
  transport::DataOp ops[kMaxPostBatch];
  uint32_t n = 0;
  uint64_t batch_bytes = 0;  // of ops[0, n)
  auto room = [&] {
    return batch_bytes < allowance && (critical || held.all + batch_bytes < limit ||
                                       (held.below_critical == 0 && batch_bytes == 0));
  };
  bool bulk_claimed_out = false;
  while (n < credits && room()) {
    if (t.BulkClaimedOut()) {
      bulk_claimed_out = true;
      break;
    }
    const uint32_t index = t.ClaimBulk();
    if (index >= t.bulk_ops()) {
      bulk_claimed_out = true;
      break;
    }
    t.MakeOp(index, /*final=*/false, &ops[n]);
    batch_bytes += ops[n++].length;
  }
  const bool home = t.plan().home_poller == index_;
  bool final_claimed = false;
  // A write whose blocks landed wrong sends no final op (its landing
  // notice): the poller that saw the last bulk op ends it (FailIfCorrupt).
  if (t.has_final() && bulk_claimed_out && home && n < credits && room() && t.BulkComplete() &&
      !t.corrupt() && t.TryClaimFinal()) {
    t.MakeOp(t.ops() - 1, /*final=*/true, &ops[n]);
    batch_bytes += ops[n++].length;
    final_claimed = true;
  }
  if (n > 0) {
    t.AddInFlight(n);
    t.MarkRunning();
    // Held before the post: a lane may complete ops inside it (a same-host
    // copy does), and their completions release what they held.
    LaneHeld& holds = lane_bytes_[&lane];
    holds.all += batch_bytes;
    if (!critical) holds.below_critical += batch_bytes;
    const uint32_t taken = lane.Post(absl::MakeConstSpan(ops, n));
    *bytes += batch_bytes;
    if (taken < n) {
      // Only a lane that broke during the post refuses ops; the ones it did
      // not take are lost, so the transfer fails.
      uint64_t untaken_bytes = 0;
      for (uint32_t k = taken; k < n; ++k) {
        untaken_bytes += ops[k].length;
        t.RemoveInFlight();
      }
      *bytes -= untaken_bytes;
      Release(lane, untaken_bytes, critical);
      t.Finish(TransferState::kFailed,
               link.status().ok() ? absl::UnavailableError("lane refused writes") : link.status());
      return false;
    }
    *posted += n;
    if (capped) tenant->bandwidth().Charge(batch_bytes, now_ns_);
  }
  if (!bulk_claimed_out) return true;
  // Bulk is all claimed: other pollers are done; the home poller of a write
  // stays until it has posted the final op.
  return home && t.has_final() && !final_claimed;
}

void Poller::OnOpDone(const transport::OpCompletion& c) {
  Transfer* t = CookieTransfer(c.cookie);
  // Its lane holds this op's bytes no more (completions come to the poller
  // that posted, with the op's length even when it failed).
  Release(t->plan().link->lane(index_), c.length, t->plan().spec.priority == Priority::kCritical);
  if (c.mismatch != nullptr) t->checksums()->RecordMismatch(*c.mismatch);
  if (c.error != nullptr) {
    t->Finish(TransferState::kFailed, *c.error);
  } else if (CookieIsFinal(c.cookie)) {
    t->OnFinalDone(c.length);
  } else if (t->OnBulkDone(c.length) == t->bulk_ops()) {
    if (!t->has_final()) {
      t->OnReadDone();
    } else if (t->FailIfCorrupt()) {
      // Its final op, and the landing it would announce, never go.
    } else if (t->plan().home_poller != index_) {
      pool_.at(t->plan().home_poller).Wake();  // its final op may go now
    }
  }
  t->RemoveInFlight();  // last touch: the transfer may be freed after this
}

void Poller::Release(const transport::Lane& lane, uint64_t bytes, bool critical) {
  const auto held = lane_bytes_.find(&lane);
  if (held == lane_bytes_.end()) return;
  LaneHeld& h = held->second;
  h.all -= std::min(h.all, bytes);
  if (!critical) h.below_critical -= std::min(h.below_critical, bytes);
  if (h.all == 0) lane_bytes_.erase(held);
}

std::optional<std::chrono::nanoseconds> Poller::Sleep() {
  notes_.Flush();  // what it noted quietly is not left behind while it sleeps
  if (stop_.load() || !worker_.PrepareToSleep()) return std::nullopt;
  for (const std::shared_ptr<PollSource>& source : sources_) {
    if (!source->PrepareToSleep()) return std::nullopt;
  }
  // The inboxes last: their true commits to the poll (and the next pass ends it).
  if (!source_inbox_->PrepareToSleep() || !inbox_->PrepareToSleep()) return std::nullopt;
  sleeps_.fetch_add(1, std::memory_order_relaxed);
  const auto start = Clock::now();
  pollfd fds[4] = {{worker_.wait_fd(), POLLIN, 0},
                   {inbox_->fd(), POLLIN, 0},
                   {source_inbox_->fd(), POLLIN, 0},
                   {sources_epoll_.get(), POLLIN, 0}};
  // Until a transfer held back by its tenant's bandwidth may post, at most.
  timespec timeout{};
  const timespec* until = nullptr;
  if (throttled_until_ns_ != 0) {
    const int64_t wait = std::max<int64_t>(0, throttled_until_ns_ - NowNs());
    timeout.tv_sec = wait / 1000000000;
    timeout.tv_nsec = wait % 1000000000;
    until = &timeout;
  }
  while (::ppoll(fds, 4, until, nullptr) < 0 && errno == EINTR) {
  }
  const auto slept = std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start);
  asleep_ns_.fetch_add(slept.count(), std::memory_order_relaxed);
  return slept;
}

absl::StatusOr<std::unique_ptr<PollerPool>> PollerPool::Create(transport::Transport& transport,
                                                               uint32_t count,
                                                               const PollerOptions& options,
                                                               Notes& notes) {
  auto pool = std::unique_ptr<PollerPool>(new PollerPool());
  for (uint32_t i = 0; i < count; ++i) {
    ASSIGN_OR_RETURN(std::unique_ptr<TransferInbox> inbox,
                     TransferInbox::Create(options.max_transfers));
    // Attaches and detaches come from control threads, one each per source.
    ASSIGN_OR_RETURN(std::unique_ptr<SourceInbox> sources,
                     SourceInbox::Create(SourceInbox::kUnbounded));
    UniqueFd sources_epoll(::epoll_create1(EPOLL_CLOEXEC));
    if (!sources_epoll.valid()) {
      return absl::ResourceExhaustedError(absl::StrCat("epoll_create1: ", std::strerror(errno)));
    }
    pool->pollers_.push_back(std::make_unique<Poller>(i, transport.worker(i), options, *pool,
                                                      std::move(inbox), notes, std::move(sources),
                                                      std::move(sources_epoll)));
  }
  return pool;
}

PollerPool::~PollerPool() { Stop(); }

uint32_t PollerPool::LeastSources() const {
  uint32_t best = 0;
  for (uint32_t i = 1; i < pollers_.size(); ++i) {
    if (pollers_[i]->sources() < pollers_[best]->sources()) best = i;
  }
  return best;
}

void PollerPool::Start() {
  for (auto& poller : pollers_) poller->Start();
}

void PollerPool::Stop() {
  for (auto& poller : pollers_) poller->Stop();
}

}  // namespace xferd::engine
