// xferctl's many-block arguments turned into the request's Blocks: block
// files (text "src_offset dst_offset length" lines, or the packed binary
// form), strided specs ("src_start,dst_start,block_length,src_stride,
// dst_stride,count") and layout index files ("src_index dst_index" lines).
// The formats are documented in the README (xferctl and many blocks).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "xferd/v1/xferd.pb.h"

namespace xferd::client {

// The first 8 bytes of a binary block file; then (src_offset, dst_offset,
// length) as little-endian uint64 per block, 24 bytes each.
inline constexpr absl::string_view kBlockFileMagic = "XFERBLK1";

// What the command line gave; at most one form may be set.
struct BlockArgs {
  std::string blocks_file;           // --blocks FILE ('-': stdin)
  std::vector<std::string> strided;  // --strided SPEC, repeatable: runs in order
  std::string layouts;               // --layout SRC_LAYOUT:DST_LAYOUT
  std::string indices_file;          // --indices FILE ('-': stdin), with --layout

  bool any() const {
    return !blocks_file.empty() || !strided.empty() || !layouts.empty() || !indices_file.empty();
  }
};

// The Blocks of `args`, reading its files. Pure parsing, no daemon: any
// thread. Errors: INVALID_ARGUMENT naming the option, file and line (1-based)
// and what is expected there; NOT_FOUND for a file that cannot be opened.
absl::StatusOr<v1::Blocks> BlocksFromArgs(const BlockArgs& args);

// The parsers behind it, on a file's contents; `name` is how errors call the
// file ("'blocks.txt'", "stdin").
absl::StatusOr<v1::BlockList> ParseBlockFile(absl::string_view contents, absl::string_view name);
absl::StatusOr<v1::StridedRun> ParseStridedSpec(absl::string_view spec);
absl::StatusOr<v1::LayoutBlocks> ParseIndexFile(absl::string_view contents, absl::string_view name);
// A text file of one offset per line (xferctl layouts prepare --offsets),
// packed as uint64 little-endian.
absl::StatusOr<std::string> ParseOffsetFile(absl::string_view contents, absl::string_view name);

// The whole of `path` ('-': stdin). Errors: NOT_FOUND naming the file.
absl::StatusOr<std::string> ReadArgumentFile(const std::string& path);
// How errors name `path`: "'path'" or "stdin".
std::string ArgumentFileName(const std::string& path);

}  // namespace xferd::client
