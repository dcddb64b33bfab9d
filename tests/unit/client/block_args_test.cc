// xferctl's many-block arguments: block files (text and binary), strided
// specs, index and offset files, and the errors that name the line.
#include "client/cpp/block_args.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "daemon/base/endian.h"

namespace xferd::client {
namespace {

std::vector<uint64_t> U64s(const std::string& packed) {
  std::vector<uint64_t> out;
  for (size_t i = 0; i + 8 <= packed.size(); i += 8) {
    out.push_back(LoadLE<uint64_t>(reinterpret_cast<const uint8_t*>(packed.data() + i)));
  }
  return out;
}

std::vector<uint32_t> U32s(const std::string& packed) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i + 4 <= packed.size(); i += 4) {
    out.push_back(LoadLE<uint32_t>(reinterpret_cast<const uint8_t*>(packed.data() + i)));
  }
  return out;
}

TEST(BlockFileTest, TextLinesWithCommentsBlanksAndUnits) {
  absl::StatusOr<v1::BlockList> list = ParseBlockFile(
      "# src dst length\n0 4096 512\n\n  8192\t0  4KiB  # a page\r\n18446744073709551615 1 1\n",
      "'b.txt'");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(U64s(list->src_offsets()), (std::vector<uint64_t>{0, 8192, 18446744073709551615u}));
  EXPECT_EQ(U64s(list->dst_offsets()), (std::vector<uint64_t>{4096, 0, 1}));
  EXPECT_EQ(U64s(list->lengths()), (std::vector<uint64_t>{512, 4096, 1}));
}

TEST(BlockFileTest, ABadLineIsNamedByItsNumber) {
  absl::StatusOr<v1::BlockList> list = ParseBlockFile("0 0 8\n# fine\n0 8\n", "'b.txt'");
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(list.status().message(),
            "block file 'b.txt' line 3: expected 'src_offset dst_offset length', got 2 fields");
  list = ParseBlockFile("0 0 8\n0 8 x12\n", "stdin");
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.status().message().find("block file stdin line 2: field 3 of 'src_offset "
                                         "dst_offset length': invalid size 'x12'"),
            std::string::npos)
      << list.status();
  EXPECT_FALSE(ParseBlockFile("# nothing\n\n", "'e'").ok());
}

TEST(BlockFileTest, BinaryRecordsAfterTheMagic) {
  std::string file(kBlockFileMagic);
  for (uint64_t v : {1u, 2u, 3u, 40u, 50u, 60u}) {
    uint8_t b[8];
    StoreLE<uint64_t>(b, v);
    file.append(reinterpret_cast<const char*>(b), 8);
  }
  absl::StatusOr<v1::BlockList> list = ParseBlockFile(file, "'b.bin'");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_EQ(U64s(list->src_offsets()), (std::vector<uint64_t>{1, 40}));
  EXPECT_EQ(U64s(list->dst_offsets()), (std::vector<uint64_t>{2, 50}));
  EXPECT_EQ(U64s(list->lengths()), (std::vector<uint64_t>{3, 60}));
  file.pop_back();
  list = ParseBlockFile(file, "'b.bin'");
  ASSERT_FALSE(list.ok());
  EXPECT_NE(list.status().message().find("47 bytes after the 'XFERBLK1' header"),
            std::string::npos)
      << list.status();
}

TEST(StridedSpecTest, SixFieldsWithUnits) {
  absl::StatusOr<v1::StridedRun> run = ParseStridedSpec("0, 1MiB,4KiB,8KiB,4096,16");
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ(run->src_start(), 0u);
  EXPECT_EQ(run->dst_start(), 1u << 20);
  EXPECT_EQ(run->block_length(), 4096u);
  EXPECT_EQ(run->src_stride(), 8192u);
  EXPECT_EQ(run->dst_stride(), 4096u);
  EXPECT_EQ(run->count(), 16u);
  EXPECT_EQ(ParseStridedSpec("0,0,4096").status().message(),
            "--strided '0,0,4096': expected 6 fields "
            "'src_start,dst_start,block_length,src_stride,dst_stride,count', got 3");
  EXPECT_FALSE(ParseStridedSpec("0,0,4096,4096,4096,many").ok());
}

TEST(IndexFileTest, PairsOfUint32) {
  absl::StatusOr<v1::LayoutBlocks> blocks = ParseIndexFile("17 0\n3 1\n", "'i'");
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_EQ(U32s(blocks->src_indices()), (std::vector<uint32_t>{17, 3}));
  EXPECT_EQ(U32s(blocks->dst_indices()), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(ParseIndexFile("1 2\n4294967296 0\n", "'i'").status().message(),
            "index file 'i' line 2: index 4294967296 does not fit a layout (at most 4294967295)");
}

TEST(OffsetFileTest, OnePerLine) {
  absl::StatusOr<std::string> packed = ParseOffsetFile("0\n64KiB\n", "'o'");
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_EQ(U64s(*packed), (std::vector<uint64_t>{0, 65536}));
  EXPECT_EQ(ParseOffsetFile("0 1\n", "'o'").status().message(),
            "offset file 'o' line 1: expected 'offset', got 2 fields");
}

TEST(BlocksFromArgsTest, ExactlyOneFormAndLayoutNames) {
  BlockArgs none;
  EXPECT_FALSE(BlocksFromArgs(none).ok());
  BlockArgs two;
  two.strided = {"0,0,1,1,1,1"};
  two.blocks_file = "x";
  EXPECT_FALSE(BlocksFromArgs(two).ok());
  BlockArgs lonely;
  lonely.layouts = "a:b";
  EXPECT_EQ(BlocksFromArgs(lonely).status().message(), "--layout and --indices go together");

  const std::string path = ::testing::TempDir() + "/indices.txt";
  std::FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  std::fputs("5 6\n", f);
  std::fclose(f);
  BlockArgs layout;
  layout.layouts = "theirs:ours";
  layout.indices_file = path;
  absl::StatusOr<v1::Blocks> blocks = BlocksFromArgs(layout);
  ASSERT_TRUE(blocks.ok()) << blocks.status();
  EXPECT_EQ(blocks->layout().src_layout(), "theirs");
  EXPECT_EQ(blocks->layout().dst_layout(), "ours");
  EXPECT_EQ(U32s(blocks->layout().dst_indices()), (std::vector<uint32_t>{6}));
  layout.layouts = "theirs";
  EXPECT_FALSE(BlocksFromArgs(layout).ok());

  BlockArgs missing;
  missing.blocks_file = ::testing::TempDir() + "/no-such-file";
  EXPECT_EQ(BlocksFromArgs(missing).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace xferd::client
