#include "daemon/memory/region_registry.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"

namespace xferd::memory {
namespace {

RegistryOptions Options() { return RegistryOptions(); }

RegionSpec Anonymous(std::string name, uint64_t size) {
  RegionSpec spec;
  spec.name = std::move(name);
  spec.size = size;
  return spec;
}

class CountingRegistrar : public RegionRegistrar {
 public:
  struct Registration : TransportRegistration {
    int marker = 22;
  };
  absl::StatusOr<std::unique_ptr<TransportRegistration>> RegisterMemory(const Region&) override {
    ++calls;
    if (fail) return absl::ResourceExhaustedError("no MR for you");
    return std::make_unique<Registration>();
  }
  int calls = 0;
  bool fail = false;
};

TEST(RegionRegistryTest, RegisterFindAndRemove) {
  RegionRegistry registry(Options());
  CountingRegistrar registrar;
  auto a = registry.Register(Anonymous("a", 4096), &registrar);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(registrar.calls, 1);
  EXPECT_EQ(static_cast<const CountingRegistrar::Registration*>((*a)->registration())->marker, 22);
  auto b = registry.Register(Anonymous("b", 8192), nullptr);
  ASSERT_TRUE(b.ok());
  EXPECT_NE((*a)->id(), (*b)->id());
  EXPECT_EQ(registry.Find("a"), *a);
  EXPECT_EQ(registry.FindById((*b)->id()), *b);
  EXPECT_EQ(registry.count(), 2u);
  EXPECT_EQ(registry.registered_bytes(), 4096u + 8192u);
  ASSERT_TRUE(registry.Remove("a", false).ok());
  EXPECT_EQ(registry.Find("a"), nullptr);
  EXPECT_EQ(registry.FindById((*a)->id()), nullptr);
  EXPECT_EQ(registry.registered_bytes(), 8192u);
  EXPECT_EQ(registry.Remove("a", false).status().code(), absl::StatusCode::kNotFound);
}

TEST(RegionRegistryTest, IdsAreNeverReused) {
  RegionRegistry registry(Options());
  const uint32_t first = (*registry.Register(Anonymous("x", 4096), nullptr))->id();
  ASSERT_TRUE(registry.Remove("x", false).ok());
  EXPECT_NE((*registry.Register(Anonymous("x", 4096), nullptr))->id(), first);
}

TEST(RegionRegistryTest, NameClashIsAlreadyExists) {
  RegionRegistry registry(Options());
  ASSERT_TRUE(registry.Register(Anonymous("same", 4096), nullptr).ok());
  absl::Status s = registry.Register(Anonymous("same", 4096), nullptr).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(s.message().find("same"), absl::string_view::npos);
}

TEST(RegionRegistryTest, ValidatesNamesAndSpecs) {
  RegionRegistry registry(Options());
  for (const char* bad : {"", "..", "has space", "slash/name", "semi;colon",
                          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}) {
    EXPECT_EQ(registry.Register(Anonymous(bad, 4096), nullptr).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_EQ(registry.Register(Anonymous("zero", 0), nullptr).status().code(),
            absl::StatusCode::kInvalidArgument);
  RegionSpec shm_with_file = Anonymous("f", 4096);
  shm_with_file.backing = Backing::kShm;
  shm_with_file.file_path = "/tmp/x";
  EXPECT_FALSE(registry.Register(shm_with_file, nullptr).ok());
  RegionSpec huge_shm = Anonymous("h", 4096);
  huge_shm.backing = Backing::kShm;
  huge_shm.hugepages = true;
  EXPECT_FALSE(registry.Register(huge_shm, nullptr).ok());
  EXPECT_EQ(registry.count(), 0u);
}

TEST(RegionRegistryTest, RemoveRefusesBusyRegionsUnlessForced) {
  RegionRegistry registry(Options());
  auto region = *registry.Register(Anonymous("busy", 4096), nullptr);
  region->AddUser();
  absl::Status s = registry.Remove("busy", false).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("force"), absl::string_view::npos);
  EXPECT_TRUE(registry.Remove("busy", true).ok());
  region->RemoveUser();
}

TEST(RegionRegistryTest, CapOnRegisteredBytes) {
  RegistryOptions options = Options();
  options.max_registered_bytes = 10000;
  RegionRegistry registry(options);
  ASSERT_TRUE(registry.Register(Anonymous("a", 8192), nullptr).ok());
  EXPECT_EQ(registry.Register(Anonymous("b", 4096), nullptr).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(registry.registered_bytes(), 8192u);
}

TEST(RegionRegistryTest, FailedTransportRegistrationLeavesNothingBehind) {
  RegionRegistry registry(Options());
  CountingRegistrar registrar;
  registrar.fail = true;
  EXPECT_EQ(registry.Register(Anonymous("a", 4096), &registrar).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(registry.count(), 0u);
  EXPECT_EQ(registry.registered_bytes(), 0u);
  registrar.fail = false;
  EXPECT_TRUE(registry.Register(Anonymous("a", 4096), &registrar).ok());
}

TEST(RegionRegistryTest, ShmRegionsAreMemfdsNamedAfterTheRegion) {
  RegionRegistry registry(Options());
  RegionSpec spec = Anonymous("shared", 4096);
  spec.backing = Backing::kShm;
  auto region = registry.Register(spec, nullptr);
  ASSERT_TRUE(region.ok()) << region.status();
  const int fd = (*region)->backing().shm_fd();
  ASSERT_GE(fd, 0);
  char link[256] = {};
  ASSERT_GT(::readlink(absl::StrCat("/proc/self/fd/", fd).c_str(), link, sizeof(link) - 1), 0);
  EXPECT_EQ(std::string(link), "/memfd:xferd-region:shared (deleted)");
}

TEST(RegionRegistryTest, RemoveClosesLandedEvents) {
  RegionRegistry registry(Options());
  auto region = *registry.Register(Anonymous("w", 4096), nullptr);
  ASSERT_TRUE(registry.Remove("w", false).ok());
  struct Nop : LandedWatcher {
    void OnLandedNews() override {}
  } watcher;
  LandedEventHub::Cursor cursor;
  EXPECT_FALSE(region->landed().Subscribe(&watcher, &cursor));
}

TEST(RegionRegistryTest, LandedEventsCountRemovedRegionsToo) {
  RegionRegistry registry(Options());
  auto a = *registry.Register(Anonymous("a", 4096), nullptr);
  auto b = *registry.Register(Anonymous("b", 4096), nullptr);
  a->landed().Publish(LandedEvent{0, 10, "peer", 1});
  b->landed().Publish(LandedEvent{0, 10, "peer", 2});
  b->landed().Publish(LandedEvent{0, 10, "peer", 3});
  EXPECT_EQ(registry.landed_events(), 3u);
  ASSERT_TRUE(registry.Remove("b", false).ok());
  EXPECT_EQ(registry.landed_events(), 3u);  // a counter: it never goes down
  a->landed().Publish(LandedEvent{0, 10, "peer", 4});
  EXPECT_EQ(registry.landed_events(), 4u);
}

TEST(RegionRegistryTest, ConcurrentRegistrationOfOneNameYieldsOneWinner) {
  RegionRegistry registry(Options());
  std::atomic<int> ok{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      if (registry.Register(Anonymous("race", 1 << 20), nullptr).ok()) ++ok;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(ok.load(), 1);
  EXPECT_EQ(registry.registered_bytes(), 1u << 20);
}

}  // namespace
}  // namespace xferd::memory
