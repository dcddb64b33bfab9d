// Tenants: who a client is from its credentials or certificate, the checks
// and limits each tenant keeps to, and the bandwidth bucket's arithmetic.
#include "daemon/engine/tenants.h"

#include <memory>

#include "daemon/engine/rate_limit.h"
#include "daemon/memory/region_registry.h"
#include "gtest/gtest.h"

namespace xferd::engine {
namespace {

TenantConfig Named(const char* name) {
  TenantConfig c;
  c.name = name;
  return c;
}

// A region named "r" that `owner` registered, shared with `shared`.
std::shared_ptr<memory::Region> RegionOf(const char* owner, std::vector<std::string> shared) {
  memory::RegionRegistry registry({});
  memory::RegionSpec spec;
  spec.name = "r";
  spec.size = 4096;
  spec.owner = owner;
  spec.shared_with = std::move(shared);
  absl::StatusOr<std::shared_ptr<memory::Region>> region = registry.Register(spec, nullptr);
  EXPECT_TRUE(region.ok()) << region.status();
  return *region;
}

TEST(TenantsTest, WithoutTenantsEveryoneIsTheDefault) {
  Tenants tenants({});
  EXPECT_FALSE(tenants.configured());
  EXPECT_EQ(tenants.ForCredentials(0, 0).name(), "default");
  EXPECT_EQ(tenants.ForCertificate({"any"}).name(), "default");
  ASSERT_EQ(tenants.all().size(), 1u);
}

TEST(TenantsTest, UidFirstThenGidThenCertificateNames) {
  TenantConfig kv = Named("kv");
  kv.uids = {1001};
  kv.cert_names = {"kv.example"};
  TenantConfig ops = Named("ops");
  ops.gids = {50};
  Tenants tenants({ops, kv});
  EXPECT_TRUE(tenants.configured());
  EXPECT_EQ(tenants.ForCredentials(1001, 50).name(), "kv");  // the uid wins
  EXPECT_EQ(tenants.ForCredentials(7, 50).name(), "ops");
  EXPECT_EQ(tenants.ForCredentials(7, 7).name(), "default");
  EXPECT_EQ(tenants.ForCertificate({"other", "kv.example"}).name(), "kv");
  EXPECT_EQ(tenants.ForCertificate({"other"}).name(), "default");
  // By name, "default" added, each with its index.
  ASSERT_EQ(tenants.all().size(), 3u);
  for (uint32_t i = 0; i < 3; ++i) EXPECT_EQ(tenants.all()[i]->index(), i);
  EXPECT_EQ(tenants.all()[0]->name(), "default");
  EXPECT_EQ(tenants.Find("ops"), tenants.all()[2].get());
  EXPECT_EQ(tenants.Find("nobody"), nullptr);
}

TEST(TenantsTest, RegionsAreTheOwnersAndThoseItSharesWith) {
  Tenants tenants({Named("a"), Named("b"), Named("c")});
  const Tenant& a = *tenants.Find("a");
  const Tenant& b = *tenants.Find("b");
  const Tenant& c = *tenants.Find("c");
  auto own = RegionOf("a", {});
  EXPECT_TRUE(a.MayUse(*own));
  EXPECT_FALSE(b.MayUse(*own));
  EXPECT_EQ(b.CheckUse(*own).message(),
            "region 'r' belongs to tenant 'a' and is not shared with tenant 'b' (its owner may "
            "register it with shared_with = [\"b\"])");
  auto shared = RegionOf("a", {"b"});
  EXPECT_TRUE(b.MayUse(*shared));
  EXPECT_FALSE(c.MayUse(*shared));
  EXPECT_TRUE(c.MayUse(*RegionOf("a", {"*"})));
  // Sharing is not owning.
  EXPECT_EQ(b.CheckOwner(*shared, "deregister").message(),
            "tenant 'b' may not deregister region 'r': only its owner, tenant 'a', may");
  EXPECT_TRUE(a.CheckOwner(*shared, "deregister").ok());
  EXPECT_EQ(b.Stats().refused_access, 2u);
  EXPECT_EQ(c.Stats().refused_access, 0u);  // MayUse only asks
}

TEST(TenantsTest, LimitsRefuseAndCount) {
  TenantConfig kv = Named("kv");
  kv.max_inflight_transfers = 3;
  kv.max_priority = "normal";
  Tenants tenants({kv});
  const Tenant& t = *tenants.Find("kv");
  EXPECT_EQ(t.CheckPriority(Priority::kCritical).message(),
            "tenant 'kv' may not use priority critical: its max_priority is normal");
  EXPECT_TRUE(t.CheckPriority(Priority::kNormal).ok());
  EXPECT_TRUE(t.CheckPriority(Priority::kBackground).ok());
  ASSERT_TRUE(t.Admit(2).ok());
  EXPECT_EQ(t.Admit(2).message(),
            "tenant 'kv' has 2 transfers in flight of its max_inflight_transfers=3: 2 more do "
            "not fit; wait for some to end");
  ASSERT_TRUE(t.Admit(1).ok());
  t.Release(4096, absl::Milliseconds(3));
  t.Unadmit(1);
  const TenantStats s = t.Stats();
  EXPECT_EQ(s.in_flight, 1u);
  EXPECT_EQ(s.submitted, 2u);
  EXPECT_EQ(s.bytes, 4096u);
  // One ended having posted an op, after 3 ms in the queue.
  EXPECT_EQ(s.started, 1u);
  EXPECT_EQ(s.queue_wait, absl::Milliseconds(3));
  EXPECT_EQ(s.refused_quota, 1u);
  EXPECT_EQ(s.refused_access, 1u);
  // The default has no limits of its own.
  EXPECT_TRUE(tenants.Default().Admit(1'000'000).ok());
}

TEST(RateLimitTest, PostsAheadOfItsRateByTheBurstAtMost) {
  RateLimit none(0, absl::Milliseconds(10));
  EXPECT_FALSE(none.limited());
  // 1 MB/s, 10 ms of burst: 10 KB may go at once.
  RateLimit limit(1'000'000, absl::Milliseconds(10));
  ASSERT_TRUE(limit.limited());
  const int64_t t0 = 1'000'000'000;
  EXPECT_EQ(limit.Allowance(t0), 10'000u);
  EXPECT_EQ(limit.WaitNs(t0), 0);
  limit.Charge(30'000, t0);  // 30 ms of bytes: 20 ms past the burst
  EXPECT_EQ(limit.Allowance(t0), 0u);
  EXPECT_EQ(limit.WaitNs(t0), 20'000'000);
  EXPECT_EQ(limit.Allowance(t0 + 25'000'000), 5'000u);
  // Idle time is not banked beyond the burst.
  EXPECT_EQ(limit.Allowance(t0 + 10'000'000'000), 10'000u);
  limit.Charge(1'000, t0 + 10'000'000'000);
  EXPECT_EQ(limit.Allowance(t0 + 10'000'000'000), 9'000u);
}

}  // namespace
}  // namespace xferd::engine
