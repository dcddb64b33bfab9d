#include "client/cpp/ring_requests.h"

#include <algorithm>
#include <cstring>

#include "absl/time/clock.h"

namespace xferd::client {
namespace {

constexpr uint64_t kMaxSliceKib = 0xffff;
constexpr size_t kMaxNameBytes = 255;  // of an interned name (local.proto)

// Names the daemon interns: a missing or overlong one goes over gRPC, whose
// error names the field. A peer given by address too: a completion does not
// say the node id a gRPC reply names the peer by.
bool Internable(const RingRequest& r) {
  for (const std::string* name : {&r.peer, &r.src, &r.dst}) {
    if (name->empty() || name->size() > kMaxNameBytes) return false;
  }
  return r.label.size() <= kMaxNameBytes && r.peer.find(':') == std::string::npos;
}

// Arrays the daemon reads as they are: whole uint64s, as many of each. A
// list that is not goes over gRPC, whose error names the field at fault.
bool WholeArrays(const v1::BlockList& l) {
  const size_t n = l.src_offsets().size();
  return n % 8 == 0 && l.dst_offsets().size() == n && (l.lengths().empty() || l.lengths().size() == n);
}

// A completion's slot holds a verified transfer's checksums when there are
// at most this many.
constexpr uint64_t kRingChecksums = rings::kMessageBytes / sizeof(uint64_t);

// How many checksums verified `r` returns (one per block, or per slice of a
// block longer than the slice size, as the daemon plans it), counted only
// up to past kRingChecksums; nullopt when that cannot be told cheaply (a
// layout's blocks) or `r` is malformed (gRPC's errors then say why).
template <typename Request>
std::optional<uint64_t> ChecksumCount(const Request& r, uint64_t default_slice) {
  const uint64_t slice = r.slice_size() != 0 ? r.slice_size() : default_slice;
  if (slice == 0) return std::nullopt;
  auto slices = [slice](uint64_t length) {
    return std::max<uint64_t>(1, (length + slice - 1) / slice);
  };
  if (!r.has_blocks()) return slices(r.length());
  const v1::Blocks& b = r.blocks();
  if (b.has_list()) {
    const v1::BlockList& l = b.list();
    const uint64_t n = l.src_offsets().size() / 8;
    if (n > kRingChecksums || l.block_length() != 0) return n * slices(l.block_length());
    if (l.lengths().size() != 8 * n) return std::nullopt;
    uint64_t count = 0;
    for (uint64_t i = 0; i < n; ++i) {
      uint64_t length;
      std::memcpy(&length, l.lengths().data() + 8 * i, sizeof(length));
      count += slices(length);
    }
    return count;
  }
  if (b.has_strided()) {
    uint64_t count = 0;
    for (const v1::StridedRun& run : b.strided().runs()) {
      count += run.count() * slices(run.block_length());
      if (count > kRingChecksums) break;
    }
    return count;
  }
  return std::nullopt;
}

// The fields WriteRequest and ReadRequest share, the direction aside; a
// read's expected checksums go at the end of the arrays.
template <typename Request>
std::optional<RingRequest> Convert(const Request& r, uint8_t opcode, uint64_t default_slice,
                                   const std::string& expected = {}) {
  RingRequest out;
  out.opcode = opcode;
  out.peer = r.peer();
  out.label = r.label();
  if (r.slice_size() % 1024 != 0 || r.slice_size() / 1024 > kMaxSliceKib) return std::nullopt;
  // The daemon lingers only for small transfers (its gRPC rule): gRPC keeps it.
  if (r.has_linger()) return std::nullopt;
  // Verified: through the ring only when its checksums fit a completion
  // (only gRPC returns more).
  if (expected.size() % sizeof(uint64_t) != 0) return std::nullopt;
  if ((r.has_verify() && r.verify()) || !expected.empty()) {
    const std::optional<uint64_t> count = ChecksumCount(r, default_slice);
    if (!count.has_value() || *count > kRingChecksums) return std::nullopt;
  }
  if (r.has_verify()) out.verify = r.verify();
  out.expected = static_cast<uint32_t>(expected.size() / sizeof(uint64_t));
  out.slice_kib = static_cast<uint32_t>(r.slice_size() / 1024);
  // A number the daemon does not know goes over gRPC, whose error says so.
  if (!v1::Priority_IsValid(r.priority())) return std::nullopt;
  out.priority = static_cast<uint8_t>(r.priority());
  if (r.has_timeout()) {
    const int64_t ms = r.timeout().seconds() * 1000 + (r.timeout().nanos() + 999999) / 1000000;
    if (ms <= 0 || ms > 0xffffffffLL) return std::nullopt;  // the daemon's errors say it best
    out.timeout_ms = static_cast<uint32_t>(ms);
  }
  out.src = r.src_region();
  out.dst = r.dst_region();
  if (!r.has_blocks()) {
    out.form = rings::kFormRange;
    out.a = r.src_offset();
    out.b = r.dst_offset();
    out.length = r.length();
    out.arrays = expected;  // a range's only arrays, inline
    return Internable(out) ? std::optional<RingRequest>(out) : std::nullopt;
  }
  const v1::Blocks& b = r.blocks();
  switch (b.form_case()) {
    case v1::Blocks::kList:
      if (!WholeArrays(b.list())) return std::nullopt;
      out.form = rings::kFormList;
      out.a = b.list().src_offsets().size() / 8;
      out.b = b.list().block_length();
      out.arrays = b.list().src_offsets() + b.list().dst_offsets() + b.list().lengths();
      break;
    case v1::Blocks::kStrided:
      out.form = rings::kFormStrided;
      out.a = static_cast<uint64_t>(b.strided().runs_size());
      for (const v1::StridedRun& run : b.strided().runs()) {
        for (uint64_t w : {run.src_start(), run.dst_start(), run.block_length(),
                           run.src_stride(), run.dst_stride(), run.count()}) {
          out.arrays.append(reinterpret_cast<const char*>(&w), sizeof(w));
        }
      }
      break;
    case v1::Blocks::kLayout:
      // The ring names the layouts; a request that names regions as well
      // (which must agree) keeps that check on gRPC.
      if (!r.src_region().empty() || !r.dst_region().empty()) return std::nullopt;
      if (b.layout().src_indices().size() % 4 != 0 ||
          b.layout().dst_indices().size() != b.layout().src_indices().size()) {
        return std::nullopt;
      }
      out.form = rings::kFormLayout;
      out.src = b.layout().src_layout();
      out.dst = b.layout().dst_layout();
      out.a = b.layout().src_indices().size() / 4;
      out.arrays = b.layout().src_indices() + b.layout().dst_indices();
      break;
    default:
      return std::nullopt;
  }
  // Arrays the daemon would refuse as malformed: its gRPC errors name them.
  if (r.src_offset() != 0 || r.dst_offset() != 0 || r.length() != 0 || out.a == 0) {
    return std::nullopt;
  }
  out.arrays += expected;
  return Internable(out) ? std::optional<RingRequest>(out) : std::nullopt;
}

v1::TransferState StateOf(uint8_t state) {
  switch (state) {
    case rings::kStateQueued:
      return v1::TRANSFER_STATE_QUEUED;
    case rings::kStateDone:
      return v1::TRANSFER_STATE_DONE;
    case rings::kStateCancelled:
      return v1::TRANSFER_STATE_CANCELLED;
    default:
      return v1::TRANSFER_STATE_FAILED;
  }
}

void SetTime(absl::Time t, google::protobuf::Timestamp* out) {
  const timespec ts = absl::ToTimespec(t);
  out->set_seconds(ts.tv_sec);
  out->set_nanos(static_cast<int32_t>(ts.tv_nsec));
}

}  // namespace

std::optional<RingRequest> RingWrite(const v1::WriteRequest& request, uint64_t default_slice) {
  return Convert(request, rings::kOpWrite, default_slice);
}

std::optional<RingRequest> RingRead(const v1::ReadRequest& request, uint64_t default_slice) {
  return Convert(request, rings::kOpRead, default_slice, request.expected_checksums());
}

absl::StatusOr<v1::Transfer> TransferOf(const RingRequest& r, const RingCompletion& c,
                                        v1::TransportKind transport, uint64_t default_slice) {
  if (c.transfer_id == 0) return c.status;
  v1::Transfer t;
  t.set_id(c.transfer_id);
  t.set_state(StateOf(c.state));
  t.set_direction(r.opcode == rings::kOpRead ? v1::Transfer::DIRECTION_READ
                                             : v1::Transfer::DIRECTION_WRITE);
  t.set_peer(r.peer);
  t.set_label(r.label);
  t.set_priority(r.priority == 0 ? v1::PRIORITY_NORMAL : static_cast<v1::Priority>(r.priority));
  t.set_transport(transport);
  t.set_blocks(c.blocks);
  t.set_length(c.length);
  t.set_bytes_done(c.bytes_done);
  t.set_slice_size(r.slice_kib != 0 ? uint64_t{r.slice_kib} << 10 : default_slice);
  t.set_slices(c.slices);
  if (r.form == rings::kFormRange) {
    t.set_src_region(r.src);
    t.set_dst_region(r.dst);
    t.set_src_offset(r.a);
    t.set_dst_offset(r.b);
  } else if (r.form != rings::kFormLayout) {
    t.set_src_region(r.src);
    t.set_dst_region(r.dst);
  }
  t.set_verify(c.verified);
  t.set_checksums(c.checksums);
  if (!c.status.ok()) {
    t.mutable_error()->set_code(static_cast<int32_t>(c.status.code()));
    t.mutable_error()->set_message(std::string(c.status.message()));
  }
  const absl::Time now = absl::Now();
  if (c.state != rings::kStateQueued) {
    SetTime(now, t.mutable_finished_at());
    SetTime(now - c.duration, t.mutable_submitted_at());
  } else {
    SetTime(now, t.mutable_submitted_at());
  }
  return t;
}

}  // namespace xferd::client
