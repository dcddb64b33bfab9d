#include "daemon/engine/block_spec.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace xferd::engine {
namespace {

uint64_t SaturatingAdd(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

absl::Status CheckCount(uint64_t count) {
  if (count == 0) return absl::InvalidArgumentError("no blocks given: a request needs at least 1");
  if (count > kMaxRequestBlocks) {
    return absl::InvalidArgumentError(
        absl::StrCat(count, " blocks in one request; at most ", kMaxRequestBlocks, ": split it"));
  }
  return absl::OkStatus();
}

absl::Status CheckList(const BlockSpec& s) {
  if (s.dst_offsets.size() != s.src_offsets.size()) {
    return absl::InvalidArgumentError(absl::StrCat("blocks.list: ", s.src_offsets.size(),
                                                   " src_offsets but ", s.dst_offsets.size(),
                                                   " dst_offsets: give one of each per block"));
  }
  if (!s.lengths.empty() && s.lengths.size() != s.src_offsets.size()) {
    return absl::InvalidArgumentError(absl::StrCat("blocks.list: ", s.lengths.size(),
                                                   " lengths for ", s.src_offsets.size(),
                                                   " blocks: give one per block, or none and "
                                                   "block_length"));
  }
  if (s.lengths.empty() && s.block_length == 0) {
    return absl::InvalidArgumentError(
        "blocks.list: no lengths and block_length 0: give a length per block or block_length");
  }
  return absl::OkStatus();
}

absl::Status CheckLayouts(const BlockSpec& s) {
  if (s.src_indices.size() != s.dst_indices.size()) {
    return absl::InvalidArgumentError(absl::StrCat("blocks.layout: ", s.src_indices.size(),
                                                   " src_indices but ", s.dst_indices.size(),
                                                   " dst_indices: give one of each per block"));
  }
  if (s.src_layout_ref == nullptr || s.dst_layout_ref == nullptr) {
    return absl::InvalidArgumentError("blocks.layout: both src_layout and dst_layout are needed");
  }
  if (s.src_layout_ref->block_length != s.dst_layout_ref->block_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layouts '", s.src_layout, "' (", s.src_layout_ref->block_length, "-byte blocks) and '",
        s.dst_layout, "' (", s.dst_layout_ref->block_length,
        "-byte blocks) differ in block length: a transfer needs equal blocks on both sides"));
  }
  return absl::OkStatus();
}

bool ValidLayoutName(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
}

}  // namespace

uint64_t Layout::extent() const {
  uint64_t end = 0;
  if (offsets.empty()) {
    if (count == 0) return 0;
    unsigned __int128 last = static_cast<unsigned __int128>(count - 1) * stride + start;
    last += block_length;
    return last > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(last);
  }
  for (uint64_t o : offsets) end = std::max(end, SaturatingAdd(o, block_length));
  return end;
}

uint64_t BlockSpec::count() const {
  switch (form) {
    case Form::kRange:
      return 1;
    case Form::kList:
      return src_offsets.size();
    case Form::kStrided: {
      uint64_t n = 0;
      for (const StridedRun& run : runs) n = SaturatingAdd(n, run.count);
      return n;
    }
    case Form::kLayout:
      return src_indices.size();
  }
  return 0;
}

absl::Status BlockSpec::CheckShape() const {
  switch (form) {
    case Form::kRange:
      return absl::OkStatus();
    case Form::kList:
      if (absl::Status s = CheckList(*this); !s.ok()) return s;
      break;
    case Form::kStrided:
      for (size_t r = 0; r < runs.size(); ++r) {
        if (runs[r].count == 0 || runs[r].block_length == 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("blocks.strided run #", r, ": count and block_length must both be > 0"));
        }
      }
      break;
    case Form::kLayout:
      if (absl::Status s = CheckLayouts(*this); !s.ok()) return s;
      break;
  }
  return CheckCount(count());
}

absl::Status BlockSpec::Append(BlockSpec more) {
  if (more.form != form || form == Form::kRange) {
    return absl::InvalidArgumentError(
        "more_blocks must be of the same form (list, strided or layout) as the request's blocks");
  }
  auto append = [](auto& to, auto& from) { to.insert(to.end(), from.begin(), from.end()); };
  switch (form) {
    case Form::kList:
      if (more.block_length != 0 && more.block_length != block_length) {
        return absl::InvalidArgumentError("more_blocks: block_length differs from the request's");
      }
      if (more.lengths.empty() != lengths.empty()) {
        return absl::InvalidArgumentError(
            "more_blocks: give lengths in every chunk or in none (then block_length applies)");
      }
      append(src_offsets, more.src_offsets);
      append(dst_offsets, more.dst_offsets);
      append(lengths, more.lengths);
      break;
    case Form::kStrided:
      append(runs, more.runs);
      break;
    case Form::kLayout:
      if ((!more.src_layout.empty() && more.src_layout != src_layout) ||
          (!more.dst_layout.empty() && more.dst_layout != dst_layout)) {
        return absl::InvalidArgumentError("more_blocks: layouts differ from the request's");
      }
      append(src_indices, more.src_indices);
      append(dst_indices, more.dst_indices);
      break;
    case Form::kRange:
      break;
  }
  if (count() > kMaxRequestBlocks) return CheckCount(count());
  return absl::OkStatus();
}

absl::Status CheckLayoutShape(const Layout& l) {
  if (!ValidLayoutName(l.name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("layout name '", l.name, "' must be 1-64 characters from [A-Za-z0-9._-]"));
  }
  if (l.region.empty()) return absl::InvalidArgumentError("layout needs a region");
  if (l.block_length == 0) return absl::InvalidArgumentError("layout block_length must be > 0");
  if (!l.offsets.empty() && (l.count != 0 || l.start != 0 || l.stride != 0)) {
    return absl::InvalidArgumentError("layout: give offsets, or start/stride/count, not both");
  }
  if (l.offsets.empty() && l.count == 0) {
    return absl::InvalidArgumentError("layout has no blocks: give offsets or count > 0");
  }
  return CheckCount(l.blocks());
}

}  // namespace xferd::engine
