#include "daemon/memory/region.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
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

}  // namespace
}  // namespace xferd::memory
