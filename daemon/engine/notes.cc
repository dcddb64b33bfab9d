#include "daemon/engine/notes.h"

#include <poll.h>
#include <pthread.h>
#include <sched.h>

#include <cerrno>
#include <chrono>

#include "daemon/base/status_macros.h"

namespace xferd::engine {
namespace {

// The Batch open on this thread, if any (pollers open one per pass).
thread_local Notes::Batch* current_batch = nullptr;

int64_t SteadyNanos() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

absl::StatusOr<std::unique_ptr<Notes>> Notes::Create(size_t capacity, EndedFn ended) {
  ASSIGN_OR_RETURN(std::unique_ptr<WakeInbox<Note>> inbox, WakeInbox<Note>::Create(capacity));
  return std::unique_ptr<Notes>(new Notes(std::move(inbox), std::move(ended)));
}

Notes::Notes(std::unique_ptr<WakeInbox<Note>> inbox, EndedFn ended)
    : inbox_(std::move(inbox)), ended_(std::move(ended)) {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "xferd-notes");
    // Its work is bookkeeping, never on a transfer's path: SCHED_BATCH keeps
    // its wake-up from preempting the poller that woke it (the scheduler
    // runs it when a CPU is free, or the poller yields), and costs nothing
    // in throughput. Best effort: a refusal leaves the normal policy.
    const sched_param param{};
    (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &param);
    Run();
  });
}

Notes::~Notes() { Stop(); }

Notes::Batch::Batch(Notes& notes) : notes_(notes), outer_(current_batch) {
  current_batch = this;
}

Notes::Batch::~Batch() {
  current_batch = outer_;
  notes_.EndPass(owed_, quiet_);
}

bool Notes::Push(Note note, bool quiet) {
  Batch* batch = current_batch;
  if (batch == nullptr || &batch->notes_ != this) return inbox_->Push(std::move(note));
  if (!inbox_->PushDeferred(std::move(note))) return false;
  (quiet ? batch->quiet_ : batch->owed_) = true;
  return true;
}

void Notes::EndPass(bool owed, bool quiet) {
  if (!owed) {
    int64_t since = quiet_since_ns_.load(std::memory_order_acquire);
    if (!quiet && since == 0) return;  // the common pass: nothing waits
    const int64_t now = SteadyNanos();
    if (quiet && since == 0 &&
        quiet_since_ns_.compare_exchange_strong(since, now, std::memory_order_acq_rel)) {
      since = now;
    }
    const bool many =
        quiet && quiet_passes_.fetch_add(1, std::memory_order_relaxed) + 1 >= kQuietNotes;
    if (!many && now - since < kQuietDelayNs) return;
  }
  quiet_since_ns_.store(0, std::memory_order_release);
  quiet_passes_.store(0, std::memory_order_relaxed);
  inbox_->Wake();  // for the quiet notes too
}

void Notes::Flush() {
  if (quiet_since_ns_.exchange(0, std::memory_order_acq_rel) == 0) return;
  quiet_passes_.store(0, std::memory_order_relaxed);
  inbox_->Wake();
}

void Notes::Ended(Transfer& transfer) {
  if (stopped_.load(std::memory_order_acquire) ||
      !Push(Note{&transfer, {}}, /*quiet=*/!transfer.announce_awaited())) {
    ended_(transfer);
  }
}

void Notes::Landed(const transport::Landing& landing) {
  if (stopped_.load(std::memory_order_acquire) ||
      !Push(Note{nullptr, landing}, /*quiet=*/!landing.region->landed().watched())) {
    transport::PublishLanding(landing);
  }
}

void Notes::Handle(Note& note) {
  if (note.ended != nullptr) {
    ended_(*note.ended);
  } else {
    transport::PublishLanding(note.landing);
  }
}

void Notes::Run() {
  while (true) {
    const bool stopping = stop_.load(std::memory_order_acquire);
    // After a stop, one more pass takes what was queued before it.
    const size_t handled = inbox_->Drain([this](Note& note) { Handle(note); });
    if (stopping) return;
    if (handled > 0 || !inbox_->PrepareToSleep()) continue;
    pollfd fd{inbox_->fd(), POLLIN, 0};
    while (::poll(&fd, 1, -1) < 0 && errno == EINTR) {
    }
  }
}

void Notes::Stop() {
  if (!thread_.joinable()) return;
  stop_.store(true, std::memory_order_release);
  inbox_->Wake();
  thread_.join();
  stopped_.store(true, std::memory_order_release);
  inbox_->Drain([this](Note& note) { Handle(note); });  // pushed after the last pass
}

}  // namespace xferd::engine
