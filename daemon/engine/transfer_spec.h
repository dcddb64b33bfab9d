// What a transfer is asked to do and what a reply says of it, apart from
// the transfer itself (transfer.h): its spec as the service or a ring gives
// it, its states, the port a local client's ring hears its end on, and the
// consistent copy of its state replies and history keep.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "daemon/engine/block_spec.h"
#include "daemon/engine/priority.h"
#include "daemon/transport/transport_types.h"

namespace xferd::engine {

class Transfer;
class Tenant;

enum class TransferState : uint8_t { kQueued, kRunning, kDone, kFailed, kCancelled };

inline bool IsTerminal(TransferState s) { return s >= TransferState::kDone; }
const char* TransferStateName(TransferState state);

// Hears of a transfer's end on the thread that decided it (often a poller),
// right after the end became visible, or, for a read done, on the notes
// thread once its landed event is out: a local client's completion ring.
// Must only take note: no blocking, no lock held long elsewhere, no
// allocation.
class CompletionPort {
 public:
  virtual ~CompletionPort() = default;
  virtual void OnTransferEnded(const Transfer& transfer) = 0;
};

// A write or read as the client asked for it (already in domain types). A
// write copies the local src_region to the peer's dst_region; a read copies
// the peer's src_region to the local dst_region.
struct TransferSpec {
  transport::OpKind direction = transport::OpKind::kWrite;
  std::string src_region;
  uint64_t src_offset = 0;
  std::string peer;  // node id or address
  std::string dst_region;
  uint64_t dst_offset = 0;
  uint64_t length = 0;  // many blocks: their total, set at planning
  // Many blocks instead of the range above. Planning expands the arrays and
  // the transfer keeps only their form and count (request_blocks).
  BlockSpec blocks;
  uint64_t request_blocks = 1;
  uint64_t slice_size = 0;                            // 0: the daemon's default
  // Checks every block end to end (docs/integrity.md): what landed against
  // the checksum of what the source sent; DATA_LOSS names the first block
  // that differs. Unset: the daemon's engine.verify. A verified transfer's
  // request blocks are planned apart (never merged), so that it has one
  // checksum per block (per slice of a block longer than the slice size).
  std::optional<bool> verify;
  // A read only, verified: the checksums its blocks must have (one per
  // planned block, as a verified write returned them), to check a restore
  // against what was stored long ago.
  std::shared_ptr<const std::vector<uint64_t>> expected_checksums;
  absl::Duration timeout = absl::InfiniteDuration();  // from submission
  std::string label;  // at most kMaxLabelBytes
  Priority priority = Priority::kNormal;
  // Whose request it is (tenants.h): what it may use and whose share it
  // takes. Null: the default tenant (Admission fills it in).
  const Tenant* tenant = nullptr;
  // Where the end is told at once (a local client's ring; null: nowhere),
  // with the client's tag. Not kept in history.
  std::shared_ptr<CompletionPort> completion;
  uint64_t user_data = 0;
  // Runs on when its completion port's client goes; otherwise that ends it.
  bool detached = false;
  // The poller that posts its final op (a ring's own, so a request needs no
  // other thread); -1: the engine picks.
  int32_t poller = -1;
};

// A label names a transfer in listings and history, which keep it: a longer
// one is refused, so a page of transfers stays far below a client's message
// limit.
inline constexpr size_t kMaxLabelBytes = 256;

inline bool IsRead(const TransferSpec& spec) { return spec.direction == transport::OpKind::kRead; }
// The region on this daemon and the one on the peer.
inline const std::string& LocalRegion(const TransferSpec& s) {
  return IsRead(s) ? s.dst_region : s.src_region;
}
inline const std::string& RemoteRegionName(const TransferSpec& s) {
  return IsRead(s) ? s.src_region : s.dst_region;
}

// A consistent copy of a transfer's state for replies.
struct TransferInfo {
  uint64_t id = 0;
  uint64_t batch_id = 0;
  TransferSpec spec;
  std::string peer_node;
  transport::TransportKind transport = transport::TransportKind::kTcp;
  TransferState state = TransferState::kQueued;
  uint64_t bytes_done = 0;
  uint32_t slice_size = 0;
  uint32_t slices = 0;
  absl::Status error;
  absl::Time submitted_at;
  // Its first op posted to a lane (InfinitePast: none yet).
  absl::Time started_at = absl::InfinitePast();
  absl::Time finished_at = absl::InfinitePast();
  // A verified transfer, once ended done: one checksum per planned block,
  // of the source's bytes.
  std::shared_ptr<const std::vector<uint64_t>> checksums;
};

}  // namespace xferd::engine
