// Type-2 memory windows: remote access to registered memory that the NIC
// grants only on the queue pair each window was bound through. An MR's own
// rkey works on every queue pair of its protection domain, so anyone who
// guesses or sniffs it could use it; a window's key, handed to one peer for
// one lane, works on that lane's queue pair alone. One MemoryWindows is one
// grant: some memory (a region's MR chunks, or a link's notice ring) to
// every lane of one per-device link, bound by each lane's poller thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/base/mutex.h"
#include "daemon/transport/verbs/ibv.h"
#include "daemon/transport/verbs/verbs_context.h"

namespace xferd::transport::verbs {

// What one window covers: a span of one MR (which must allow MW binding).
struct WindowTarget {
  ibv_mr* mr = nullptr;
  uint64_t addr = 0;
  uint64_t length = 0;
};

class MemoryWindows {
 public:
  // Allocates one window per target on `context`'s protection domain and
  // picks its key. Only after the queue pairs the windows will be bound to
  // exist: a killed process's verbs objects are destroyed newest first, and
  // destroying a queue pair with windows still bound stalls (rxe: ~50 s).
  // Targets are lane-major: window (lane, i) will cover
  // targets[lane * per_lane + i], per_lane = targets.size() / lanes, with
  // `access` (IBV_ACCESS_REMOTE_WRITE and/or _READ) once bound. `what`
  // names the memory in errors. RESOURCE_EXHAUSTED, naming the device's
  // max_mw, when more windows would be open than the device allows. Control
  // thread.
  static absl::StatusOr<std::shared_ptr<MemoryWindows>> Create(
      std::shared_ptr<VerbsContext> context, uint32_t lanes, std::vector<WindowTarget> targets,
      int access, absl::string_view what);
  ~MemoryWindows();

  MemoryWindows(const MemoryWindows&) = delete;
  MemoryWindows& operator=(const MemoryWindows&) = delete;

  uint32_t lanes() const { return lanes_; }
  uint32_t per_lane() const { return per_lane_; }
  // Lane-major, like the targets. A type-2 window's key is chosen by whoever
  // binds it, so the keys are known (and may be announced) before the binds
  // ran; they work once their lane's binds completed.
  const std::vector<uint32_t>& keys() const { return keys_; }

  // ---- the poller thread that owns `lane`'s queue pair ----
  // Posts the binds of windows [first, first + count) of `lane` on `qp`,
  // chained through `wrs` (the caller set their wr_id and send_flags).
  // Returns ibv_post_send's result (`*bad` as it sets it), or ECANCELED,
  // posting nothing, once the windows were released.
  int PostBinds(ibv_qp* qp, uint32_t lane, uint32_t first, uint32_t count, ibv_send_wr* wrs,
                ibv_send_wr** bad);
  // One lane's binds all completed (OK), or failed or were dropped.
  void LaneDone(const absl::Status& status);

  // ---- any thread ----
  // Until every lane's binds completed, one failed, the windows were
  // released, or `deadline` (DEADLINE_EXCEEDED).
  absl::Status Wait(absl::Time deadline);
  // False once a bind failed or the windows were released: another grant
  // needs new windows.
  bool usable() const;
  // Deallocates the windows: their keys stop working at once. A bind still
  // on its way then fails, which breaks its link. Idempotent; never waits
  // for a poller (pollers call it when their link breaks).
  void Release();

 private:
  MemoryWindows(std::shared_ptr<VerbsContext> context, uint32_t lanes,
                std::vector<WindowTarget> targets, int access);

  const std::shared_ptr<VerbsContext> context_;
  const uint32_t lanes_;
  const uint32_t per_lane_;
  const std::vector<WindowTarget> targets_;
  const int access_;
  std::vector<uint32_t> keys_;  // set by Create, then fixed

  mutable Mutex mu_;
  // Released together with their count in context_->windows.
  std::vector<IbvMw> mws_ ABSL_GUARDED_BY(mu_);
  uint32_t pending_lanes_ ABSL_GUARDED_BY(mu_);
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  bool released_ ABSL_GUARDED_BY(mu_) = false;
};

// One lane's share of a grant, as its poller takes it.
struct BindJob {
  std::shared_ptr<MemoryWindows> windows;
  uint32_t lane = 0;
  uint32_t next = 0;  // the next of its windows to post (poller thread)
};

}  // namespace xferd::transport::verbs
