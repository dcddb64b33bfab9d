// A poller thread: drives one TransportWorker (its lanes to every peer) and
// the transfers handed to it. It claims ops, posts them in batches while
// its lanes have credits, and turns completions into transfer progress.
// Idle pollers spin for a short while, then sleep on the worker's fd and their
// own wake eventfd, so an idle daemon uses no CPU.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/time/time.h"
#include "daemon/base/mutex.h"
#include "daemon/common/unique_fd.h"
#include "daemon/engine/transfer.h"
#include "daemon/transport/transport.h"

namespace xferd::engine {

class PollerPool;

struct PollerOptions {
  // Busy-poll this long after the last work before sleeping.
  absl::Duration spin = absl::Microseconds(50);
  // Upper bound on transfers a poller holds (the engine's in-flight limit):
  // its queues are sized once so the data path never allocates.
  uint32_t max_transfers = 4096;
};

struct PollerStats {
  uint64_t sleeps = 0;
  absl::Duration asleep;  // total time spent sleeping
  bool sleeping = false;
  uint32_t active_transfers = 0;
};

class Poller final : public transport::CompletionSink {
 public:
  Poller(uint32_t index, transport::TransportWorker& worker, const PollerOptions& options,
         PollerPool& pool, UniqueFd wake_fd);
  ~Poller() override;

  void Start();
  // Joins the thread. Transfers still held are dropped (the engine has ended
  // them before).
  void Stop();

  // Any thread: serve this transfer until its ops for this poller are
  // posted (and, on a write's home poller, until its final op is).
  void Submit(std::shared_ptr<Transfer> transfer);
  // Any thread: there is work for this poller (a transfer whose bulk slices
  // were all acknowledged elsewhere): wake the thread if it sleeps, and keep
  // it from falling asleep before its next pass.
  void Wake();
  PollerStats stats() const;

  // Poller thread: a posted op ended.
  void OnOpDone(const transport::OpCompletion& completion) override;

 private:
  void Run();
  uint32_t DrainInbox();
  uint32_t ServiceTransfers();
  // Posts what it can for `transfer`; false once this poller is done with it.
  bool ServiceOne(Transfer& transfer, uint32_t* posted);
  void Sleep();

  const uint32_t index_;
  transport::TransportWorker& worker_;
  const PollerOptions options_;
  PollerPool& pool_;
  UniqueFd wake_fd_;

  Mutex inbox_mu_;
  std::vector<std::shared_ptr<Transfer>> inbox_ ABSL_GUARDED_BY(inbox_mu_);
  std::atomic<bool> inbox_nonempty_{false};
  std::atomic<bool> sleeping_{false};
  // Set by Wake(), cleared at the start of each pass: a wake that lands
  // between a pass and Sleep() makes Sleep() return at once.
  std::atomic<bool> wake_pending_{false};
  std::atomic<bool> stop_{false};

  // Poller thread only.
  std::vector<std::shared_ptr<Transfer>> active_;
  std::vector<std::shared_ptr<Transfer>> incoming_;
  size_t next_start_ = 0;  // round-robin start in active_

  std::atomic<uint64_t> sleeps_{0};
  std::atomic<int64_t> asleep_ns_{0};
  std::atomic<uint32_t> active_count_{0};
  std::thread thread_;
};

// The engine's pollers; poller i drives transport worker i.
class PollerPool {
 public:
  // UNAVAILABLE/RESOURCE_EXHAUSTED if eventfds cannot be made.
  static absl::StatusOr<std::unique_ptr<PollerPool>> Create(transport::Transport& transport,
                                                            uint32_t count,
                                                            const PollerOptions& options);
  ~PollerPool();

  void Start();
  void Stop();
  uint32_t size() const { return static_cast<uint32_t>(pollers_.size()); }
  Poller& at(uint32_t index) { return *pollers_[index]; }

 private:
  PollerPool() = default;
  std::vector<std::unique_ptr<Poller>> pollers_;
};

}  // namespace xferd::engine
