#include "daemon/engine/block_plan.h"

#include <algorithm>

#include "absl/numeric/bits.h"
#include "absl/strings/str_cat.h"

namespace xferd::engine {
namespace {

using transport::Block;

// base + index * stride, or UINT64_MAX (outside any region) on overflow.
uint64_t Strided(uint64_t base, uint64_t index, uint64_t stride) {
  uint64_t product = 0;
  uint64_t sum = 0;
  if (__builtin_mul_overflow(index, stride, &product) ||
      __builtin_add_overflow(base, product, &sum)) {
    return UINT64_MAX;
  }
  return sum;
}

absl::Status LayoutIndexError(uint64_t block, const char* role, uint32_t index,
                              const std::string& layout, uint64_t blocks) {
  return absl::InvalidArgumentError(absl::StrCat("block #", block, ": ", role, " index ", index,
                                                 " is outside layout '", layout, "' of ", blocks,
                                                 " blocks"));
}

// Calls fn(i, src, dst, length) for every block of the request, in order;
// stops at the first error and returns it.
template <typename Fn>
absl::Status ForEachBlock(const BlockSpec& s, Fn&& fn) {
  switch (s.form) {
    case BlockSpec::Form::kList:
      for (uint64_t i = 0; i < s.src_offsets.size(); ++i) {
        const uint64_t length = s.lengths.empty() ? s.block_length : s.lengths[i];
        if (absl::Status st = fn(i, s.src_offsets[i], s.dst_offsets[i], length); !st.ok()) {
          return st;
        }
      }
      return absl::OkStatus();
    case BlockSpec::Form::kStrided: {
      uint64_t i = 0;
      for (const StridedRun& run : s.runs) {
        for (uint64_t k = 0; k < run.count; ++k, ++i) {
          absl::Status st = fn(i, Strided(run.src_start, k, run.src_stride),
                               Strided(run.dst_start, k, run.dst_stride), run.block_length);
          if (!st.ok()) return st;
        }
      }
      return absl::OkStatus();
    }
    case BlockSpec::Form::kLayout: {
      const Layout& src = *s.src_layout_ref;
      const Layout& dst = *s.dst_layout_ref;
      for (uint64_t i = 0; i < s.src_indices.size(); ++i) {
        const uint32_t a = s.src_indices[i];
        const uint32_t b = s.dst_indices[i];
        if (a >= src.blocks()) return LayoutIndexError(i, "source", a, s.src_layout, src.blocks());
        if (b >= dst.blocks()) {
          return LayoutIndexError(i, "destination", b, s.dst_layout, dst.blocks());
        }
        if (absl::Status st = fn(i, src.offset(a), dst.offset(b), src.block_length); !st.ok()) {
          return st;
        }
      }
      return absl::OkStatus();
    }
    case BlockSpec::Form::kRange:
      break;
  }
  return absl::InternalError("PlanBlocks called on a contiguous range");
}

absl::Status CheckSide(uint64_t block, const char* role, uint64_t offset, uint64_t length,
                       const RegionSide& side) {
  if (offset <= side.size && length <= side.size - offset) return absl::OkStatus();
  return absl::OutOfRangeError(
      absl::StrCat("block #", block, ": ", role, " range [", offset, ", ", offset, "+", length,
                   ") exceeds region '", side.name, "'",
                   side.peer.empty() ? "" : absl::StrCat(" on peer '", side.peer, "'"), " of ",
                   side.size, " bytes"));
}

// The error for two destination blocks sharing byte `byte`: a second pass
// (rare) finds the first two request blocks that contain it.
absl::Status OverlapError(const BlockSpec& spec, uint64_t byte) {
  uint64_t found[2][3];
  int n = 0;
  (void)ForEachBlock(spec, [&](uint64_t i, uint64_t, uint64_t dst, uint64_t length) {
    if (dst <= byte && byte - dst < length) {
      found[n][0] = i;
      found[n][1] = dst;
      found[n][2] = length;
      if (++n == 2) return absl::CancelledError("");
    }
    return absl::OkStatus();
  });
  if (n < 2) return absl::InvalidArgumentError("destination blocks overlap");
  return absl::InvalidArgumentError(absl::StrCat(
      "blocks #", found[0][0], " and #", found[1][0], ": destination ranges [", found[0][1], ", ",
      found[0][1], "+", found[0][2], ") and [", found[1][1], ", ", found[1][1], "+", found[1][2],
      ") overlap: every destination byte may be written by one block only"));
}

// Destination blocks must not overlap (the result would depend on the order
// the NIC or the poller places them). Blocks arrive sorted in the common
// cases (strided runs, increasing layout indices): one pass. Otherwise sort
// a temporary copy of the destination ranges (16 bytes per block, freed on
// return): sorting contiguous keys is several times faster than sorting an
// index into the blocks, whose every comparison misses the cache.
absl::Status CheckNoOverlap(const BlockSpec& spec, const std::vector<Block>& blocks,
                            bool dst_is_local) {
  struct Range {
    uint64_t begin;
    uint64_t end;
  };
  auto range = [&](const Block& b) {
    const uint64_t begin = dst_is_local ? b.local_offset : b.remote_offset;
    return Range{begin, begin + b.length};
  };
  bool sorted = true;
  for (size_t i = 1; i < blocks.size(); ++i) {
    const Range prev = range(blocks[i - 1]);
    const Range cur = range(blocks[i]);
    if (cur.begin < prev.end) {
      if (cur.begin >= prev.begin) return OverlapError(spec, cur.begin);
      sorted = false;
      break;
    }
  }
  if (sorted) return absl::OkStatus();
  std::vector<Range> ranges(blocks.size());
  std::transform(blocks.begin(), blocks.end(), ranges.begin(), range);
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t k = 1; k < ranges.size(); ++k) {
    if (ranges[k].begin < ranges[k - 1].end) return OverlapError(spec, ranges[k].begin);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<Block>> PlanBlocks(const BlockSpec& spec, const RegionSide& src,
                                              const RegionSide& dst, bool src_is_local,
                                              uint32_t slice, bool merge) {
  if (absl::Status s = spec.CheckShape(); !s.ok()) return s;
  std::vector<Block> blocks;
  blocks.reserve(spec.count());
  // The run being merged: blocks contiguous with the previous on both sides,
  // starting at request block `first`.
  uint64_t local = 0, remote = 0, length = 0, first = 0;
  auto append_run = [&] {
    return AppendSplit(local, remote, length, slice, &blocks, absl::StrCat("block #", first));
  };
  absl::Status status = ForEachBlock(spec, [&](uint64_t i, uint64_t s, uint64_t d, uint64_t n) {
    if (n == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("block #", i, ": length is 0: every block must be at least 1 byte"));
    }
    if (absl::Status st = CheckSide(i, "source", s, n, src); !st.ok()) return st;
    if (absl::Status st = CheckSide(i, "destination", d, n, dst); !st.ok()) return st;
    const uint64_t l = src_is_local ? s : d;
    const uint64_t r = src_is_local ? d : s;
    if (merge && length > 0 && local + length == l && remote + length == r) {
      length += n;
      return absl::OkStatus();
    }
    if (absl::Status st = append_run(); !st.ok()) return st;
    local = l;
    remote = r;
    length = n;
    first = i;
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  if (absl::Status st = append_run(); !st.ok()) return st;
  if (absl::Status s = CheckNoOverlap(spec, blocks, !src_is_local); !s.ok()) return s;
  blocks.shrink_to_fit();
  return blocks;
}

absl::Status AppendSplit(uint64_t local, uint64_t remote, uint64_t length, uint32_t slice,
                         std::vector<Block>* out, absl::string_view what) {
  const uint64_t pieces = length / slice + (length % slice != 0);
  if (pieces > kMaxPlannedBlocks - out->size()) {
    // The smallest slice that fits, rounded up to a power of two.
    const uint64_t room = std::max<uint64_t>(kMaxPlannedBlocks - out->size(), 1);
    const uint64_t need = absl::bit_ceil((length + room - 1) / room);
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": ", length, " bytes at slice_size ", slice, " would be cut into more than ",
        kMaxPlannedBlocks, " pieces per transfer: ",
        need <= transport::kMaxSliceBytes
            ? absl::StrCat("set slice_size to at least ", need, " or ")
            : "",
        "split it into several transfers"));
  }
  while (length > 0) {
    const uint32_t n = static_cast<uint32_t>(std::min<uint64_t>(length, slice));
    out->push_back(Block{local, remote, n});
    local += n;
    remote += n;
    length -= n;
  }
  return absl::OkStatus();
}

std::vector<uint32_t> GroupOps(absl::Span<const Block> blocks, uint32_t slice) {
  std::vector<uint32_t> starts;
  starts.reserve(blocks.size() / transport::kMaxBlocksPerOp + 2);
  starts.push_back(0);
  uint64_t bytes = 0;
  uint32_t count = 0;
  for (uint32_t i = 0; i < blocks.size(); ++i) {
    if (count > 0 && (count == transport::kMaxBlocksPerOp || bytes + blocks[i].length > slice)) {
      starts.push_back(i);
      bytes = 0;
      count = 0;
    }
    bytes += blocks[i].length;
    ++count;
  }
  starts.push_back(static_cast<uint32_t>(blocks.size()));
  return starts;
}

}  // namespace xferd::engine
