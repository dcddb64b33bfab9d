#include "daemon/memory/region.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <thread>
#include <vector>

namespace xferd::memory {
namespace {

std::unique_ptr<Region> MakeRegion(uint64_t size, std::vector<std::string> acl = {}) {
  RegionSpec spec;
  spec.name = "r";
  spec.size = size;
  spec.allowed_peers = std::move(acl);
  auto backing = MemoryBacking::Create(BackingSpec{Backing::kAnonymous, size});
  return std::make_unique<Region>(7, std::move(spec), *std::move(backing));
}

TEST(RegionTest, CheckRangeAcceptsExactlyTheRegion) {
  auto region = MakeRegion(4096);
  EXPECT_TRUE(region->CheckRange(0, 4096, "source").ok());
  EXPECT_TRUE(region->CheckRange(4095, 1, "source").ok());
  EXPECT_EQ(region->CheckRange(4096, 1, "source").code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(region->CheckRange(1, 4096, "source").code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(region->CheckRange(0, 0, "source").code(), absl::StatusCode::kInvalidArgument);
}

TEST(RegionTest, CheckRangeDoesNotOverflow) {
  auto region = MakeRegion(4096);
  const uint64_t max = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ(region->CheckRange(max, 2, "destination").code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(region->CheckRange(2, max, "destination").code(), absl::StatusCode::kOutOfRange);
  EXPECT_EQ(region->CheckRange(max, max, "destination").code(), absl::StatusCode::kOutOfRange);
  absl::Status s = region->CheckRange(4000, 200, "destination");
  EXPECT_NE(s.message().find("destination"), absl::string_view::npos);
  EXPECT_NE(s.message().find("4096 bytes"), absl::string_view::npos);
}

TEST(RegionTest, Acl) {
  EXPECT_TRUE(MakeRegion(4096)->PeerAllowed("anyone"));
  auto region = MakeRegion(4096, {"a", "b"});
  EXPECT_TRUE(region->PeerAllowed("b"));
  EXPECT_FALSE(region->PeerAllowed("c"));
  EXPECT_FALSE(region->PeerAllowed(""));
}

TEST(RegionTest, AclChanges) {
  auto region = MakeRegion(4096, {"a", "b"});
  region->SetAllowedPeers({"b", "c"});
  EXPECT_FALSE(region->PeerAllowed("a"));
  EXPECT_TRUE(region->PeerAllowed("c"));
  EXPECT_EQ(region->allowed_peers(), (std::vector<std::string>{"b", "c"}));
  // The spec keeps what was registered.
  EXPECT_EQ(region->spec().allowed_peers, (std::vector<std::string>{"a", "b"}));
  region->SetAllowedPeers({});
  EXPECT_TRUE(region->PeerAllowed("anyone"));
}

// Writers' checks (pollers) run while the ACL changes: each sees one ACL
// whole, never a freed one (run under TSan/ASan in the sanitizer suites).
TEST(RegionTest, AclChangesWhileChecked) {
  auto region = MakeRegion(4096, {"a"});
  std::atomic<bool> stop{false};
  std::thread reader([&] {
    while (!stop.load()) (void)region->PeerAllowed("a");
  });
  for (int i = 0; i < 1000; ++i) region->SetAllowedPeers({i % 2 == 0 ? "b" : "a"});
  stop = true;
  reader.join();
  EXPECT_TRUE(region->PeerAllowed("a"));
}

TEST(RegionTest, UsersCount) {
  auto region = MakeRegion(4096);
  region->AddUser();
  region->AddUser();
  region->RemoveUser();
  EXPECT_EQ(region->users(), 1u);
}

// Memory and SHM regions cannot lose a page; a file region can, and once an
// access to it faulted it says why until it goes.
TEST(RegionTest, AFileRegionLosesItsMemoryOnce) {
  EXPECT_FALSE(MakeRegion(4096)->can_lose_memory());
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/lost.bin";
  BackingSpec file{Backing::kFile, 1 << 20};
  file.file_path = path;
  file.create = true;
  file.file_confinement.dirs = {dir != nullptr ? dir : "/tmp"};
  auto backing = MemoryBacking::Create(file);
  ASSERT_TRUE(backing.ok()) << backing.status();
  RegionSpec spec;
  spec.name = "dst";
  spec.backing = Backing::kFile;
  Region region(9, std::move(spec), *std::move(backing));
  EXPECT_TRUE(region.can_lose_memory());
  EXPECT_FALSE(region.lost());
  EXPECT_TRUE(region.LostStatus().ok());
  ASSERT_EQ(::truncate(path.c_str(), 4096), 0);  // as another process would
  const absl::Status lost = region.MarkLost();
  EXPECT_EQ(lost.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(lost.message(),
            "region 'dst' lost its memory: its file was truncated by another process (it has "
            "4096 of the region's 1048576 bytes); deregister it (and register it again to use "
            "the file)");
  EXPECT_TRUE(region.lost());
  EXPECT_EQ(region.LostStatus(), lost);
  // The first cause stays, whatever the file does next.
  ASSERT_EQ(::truncate(path.c_str(), 1 << 20), 0);
  EXPECT_EQ(region.MarkLost(), lost);
  ::unlink(path.c_str());
}

}  // namespace
}  // namespace xferd::memory
