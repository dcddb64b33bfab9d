#include "daemon/engine/notes.h"

#include <poll.h>
#include <pthread.h>

#include <cerrno>

#include "daemon/base/status_macros.h"

namespace xferd::engine {

absl::StatusOr<std::unique_ptr<Notes>> Notes::Create(size_t capacity, EndedFn ended) {
  ASSIGN_OR_RETURN(std::unique_ptr<WakeInbox<Note>> inbox, WakeInbox<Note>::Create(capacity));
  return std::unique_ptr<Notes>(new Notes(std::move(inbox), std::move(ended)));
}

Notes::Notes(std::unique_ptr<WakeInbox<Note>> inbox, EndedFn ended)
    : inbox_(std::move(inbox)), ended_(std::move(ended)) {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "xferd-notes");
    Run();
  });
}

Notes::~Notes() { Stop(); }

void Notes::Ended(Transfer& transfer) {
  if (stopped_.load(std::memory_order_acquire) || !inbox_->Push(Note{&transfer, {}})) {
    ended_(transfer);
  }
}

void Notes::Landed(const transport::Landing& landing) {
  if (stopped_.load(std::memory_order_acquire) || !inbox_->Push(Note{nullptr, landing})) {
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
