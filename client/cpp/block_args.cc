#include "client/cpp/block_args.h"

#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/base/endian.h"
#include "daemon/base/status_macros.h"
#include "daemon/base/units.h"

namespace xferd::client {
namespace {

template <typename T>
void AppendLE(std::string* out, T value) {
  uint8_t bytes[sizeof(T)];
  StoreLE<T>(bytes, value);
  out->append(reinterpret_cast<const char*>(bytes), sizeof(T));
}

// A plain integer, exact to 2^64 - 1, or a size with a unit ("64KiB").
absl::StatusOr<uint64_t> ParseNumber(absl::string_view text) {
  uint64_t value = 0;
  if (absl::SimpleAtoi(text, &value)) return value;
  return ParseSize(text);
}

// Calls `line(fields, number)` for each line of `contents` that is not blank
// or a '#' comment, with its whitespace-separated fields and 1-based number.
template <typename LineFn>
absl::Status ForEachLine(absl::string_view contents, LineFn line) {
  int number = 0;
  for (absl::string_view text : absl::StrSplit(contents, '\n')) {
    ++number;
    text = text.substr(0, text.find('#'));
    std::vector<absl::string_view> fields =
        absl::StrSplit(text, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.empty()) continue;
    RETURN_IF_ERROR(line(fields, number));
  }
  return absl::OkStatus();
}

// Parses `want` fields of a line as numbers, or says what the line should be.
absl::Status LineNumbers(const std::vector<absl::string_view>& fields, absl::string_view name,
                         int line, absl::string_view expected, uint64_t* out, size_t want) {
  const std::string where = absl::StrCat(name, " line ", line, ": ");
  if (fields.size() != want) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, "expected '", expected, "', got ", fields.size(), " fields"));
  }
  for (size_t i = 0; i < want; ++i) {
    absl::StatusOr<uint64_t> v = ParseNumber(fields[i]);
    if (!v.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "field ", i + 1, " of '", expected, "': ", v.status().message()));
    }
    out[i] = *v;
  }
  return absl::OkStatus();
}

absl::StatusOr<v1::BlockList> ParseBinaryBlocks(absl::string_view body, absl::string_view name) {
  constexpr size_t kRecord = 3 * sizeof(uint64_t);
  if (body.size() % kRecord != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "binary block file ", name, ": ", body.size(), " bytes after the '", kBlockFileMagic,
        "' header are not a whole number of 24-byte blocks (src_offset, dst_offset, length as "
        "little-endian uint64): the file is truncated or not a block file"));
  }
  v1::BlockList list;
  std::string* src = list.mutable_src_offsets();
  std::string* dst = list.mutable_dst_offsets();
  std::string* len = list.mutable_lengths();
  for (size_t i = 0; i < body.size(); i += kRecord) {
    src->append(body.data() + i, 8);
    dst->append(body.data() + i + 8, 8);
    len->append(body.data() + i + 16, 8);
  }
  return list;
}

}  // namespace

absl::StatusOr<v1::BlockList> ParseBlockFile(absl::string_view contents, absl::string_view name) {
  v1::BlockList list;
  if (absl::StartsWith(contents, kBlockFileMagic)) {
    ASSIGN_OR_RETURN(list, ParseBinaryBlocks(contents.substr(kBlockFileMagic.size()), name));
  } else {
    RETURN_IF_ERROR(ForEachLine(contents, [&](const auto& fields, int line) -> absl::Status {
      uint64_t v[3];
      RETURN_IF_ERROR(LineNumbers(fields, absl::StrCat("block file ", name), line,
                                  "src_offset dst_offset length", v, 3));
      AppendLE(list.mutable_src_offsets(), v[0]);
      AppendLE(list.mutable_dst_offsets(), v[1]);
      AppendLE(list.mutable_lengths(), v[2]);
      return absl::OkStatus();
    }));
  }
  if (list.src_offsets().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("block file ", name,
                     " has no blocks: give one 'src_offset dst_offset length' line per block"));
  }
  return list;
}

absl::StatusOr<v1::StridedRun> ParseStridedSpec(absl::string_view spec) {
  constexpr absl::string_view kForm =
      "src_start,dst_start,block_length,src_stride,dst_stride,count";
  std::vector<absl::string_view> fields = absl::StrSplit(spec, ',');
  if (fields.size() != 6) {
    return absl::InvalidArgumentError(absl::StrCat("--strided '", spec, "': expected 6 fields '",
                                                   kForm, "', got ", fields.size()));
  }
  uint64_t v[6];
  for (size_t i = 0; i < 6; ++i) {
    absl::StatusOr<uint64_t> n = ParseNumber(absl::StripAsciiWhitespace(fields[i]));
    if (!n.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--strided '", spec, "': field ", i + 1,
                                                     " of '", kForm, "': ", n.status().message()));
    }
    v[i] = *n;
  }
  v1::StridedRun run;
  run.set_src_start(v[0]);
  run.set_dst_start(v[1]);
  run.set_block_length(v[2]);
  run.set_src_stride(v[3]);
  run.set_dst_stride(v[4]);
  run.set_count(v[5]);
  return run;
}

absl::StatusOr<v1::LayoutBlocks> ParseIndexFile(absl::string_view contents,
                                                absl::string_view name) {
  v1::LayoutBlocks blocks;
  const std::string what = absl::StrCat("index file ", name);
  RETURN_IF_ERROR(ForEachLine(contents, [&](const auto& fields, int line) -> absl::Status {
    uint64_t v[2];
    RETURN_IF_ERROR(LineNumbers(fields, what, line, "src_index dst_index", v, 2));
    for (uint64_t index : v) {
      if (index > std::numeric_limits<uint32_t>::max()) {
        return absl::InvalidArgumentError(absl::StrCat(what, " line ", line, ": index ", index,
                                                       " does not fit a layout (at most ",
                                                       std::numeric_limits<uint32_t>::max(), ")"));
      }
    }
    AppendLE(blocks.mutable_src_indices(), static_cast<uint32_t>(v[0]));
    AppendLE(blocks.mutable_dst_indices(), static_cast<uint32_t>(v[1]));
    return absl::OkStatus();
  }));
  if (blocks.src_indices().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has no blocks: give one 'src_index dst_index' line per block"));
  }
  return blocks;
}

absl::StatusOr<std::string> ParseOffsetFile(absl::string_view contents, absl::string_view name) {
  std::string packed;
  const std::string what = absl::StrCat("offset file ", name);
  RETURN_IF_ERROR(ForEachLine(contents, [&](const auto& fields, int line) -> absl::Status {
    uint64_t offset = 0;
    RETURN_IF_ERROR(LineNumbers(fields, what, line, "offset", &offset, 1));
    AppendLE(&packed, offset);
    return absl::OkStatus();
  }));
  if (packed.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " has no offsets: give one block offset per line"));
  }
  return packed;
}

std::string ArgumentFileName(const std::string& path) {
  return path == "-" ? "stdin" : absl::StrCat("'", path, "'");
}

absl::StatusOr<std::string> ReadArgumentFile(const std::string& path) {
  std::ostringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
    return text.str();
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open file '", path, "'"));
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<v1::Blocks> BlocksFromArgs(const BlockArgs& args) {
  const int forms = !args.blocks_file.empty() + !args.strided.empty() + !args.layouts.empty();
  if (forms != 1) {
    return absl::InvalidArgumentError(
        "give exactly one of --blocks FILE, --strided SPEC or --layout SRC:DST --indices FILE");
  }
  if (args.layouts.empty() != args.indices_file.empty()) {
    return absl::InvalidArgumentError("--layout and --indices go together");
  }
  v1::Blocks blocks;
  if (!args.blocks_file.empty()) {
    ASSIGN_OR_RETURN(const std::string contents, ReadArgumentFile(args.blocks_file));
    ASSIGN_OR_RETURN(*blocks.mutable_list(),
                     ParseBlockFile(contents, ArgumentFileName(args.blocks_file)));
    return blocks;
  }
  if (!args.strided.empty()) {
    for (const std::string& spec : args.strided) {
      ASSIGN_OR_RETURN(*blocks.mutable_strided()->add_runs(), ParseStridedSpec(spec));
    }
    return blocks;
  }
  std::vector<std::string> names = absl::StrSplit(args.layouts, ':');
  if (names.size() != 2 || names[0].empty() || names[1].empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--layout '", args.layouts, "': expected SRC_LAYOUT:DST_LAYOUT, e.g. kv-pages:peer-pages"));
  }
  ASSIGN_OR_RETURN(const std::string contents, ReadArgumentFile(args.indices_file));
  ASSIGN_OR_RETURN(*blocks.mutable_layout(),
                   ParseIndexFile(contents, ArgumentFileName(args.indices_file)));
  blocks.mutable_layout()->set_src_layout(names[0]);
  blocks.mutable_layout()->set_dst_layout(names[1]);
  return blocks;
}

}  // namespace xferd::client
