#include "daemon/transport/verbs/device_pairing.h"

#include <gtest/gtest.h>

namespace xferd::transport::verbs {
namespace {

// A RoCE v2 device whose GID is the IPv4-mapped address a.b.c.d.
PairingDevice Ipv4(const std::string& name, uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
  PairingDevice device;
  device.name = name;
  device.gid = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d};
  return device;
}

std::vector<std::pair<uint32_t, uint32_t>> Flat(const std::vector<DevicePair>& pairs) {
  std::vector<std::pair<uint32_t, uint32_t>> out;
  for (const DevicePair& p : pairs) out.emplace_back(p.local, p.remote);
  return out;
}

using Pairs = std::vector<std::pair<uint32_t, uint32_t>>;

TEST(DevicePairingTest, IndexPairsTheSmallerCount) {
  const std::vector<PairingDevice> two = {Ipv4("rxe0", 10, 9, 9, 1), Ipv4("rxe1", 10, 9, 10, 1)};
  const std::vector<PairingDevice> one = {Ipv4("mlx5_0", 192, 168, 0, 1)};
  auto pairs = PairDevices(two, two, Pairing::kIndex, 0);
  ASSERT_TRUE(pairs.ok());
  EXPECT_EQ(Flat(*pairs), (Pairs{{0, 0}, {1, 1}}));
  pairs = PairDevices(two, one, Pairing::kIndex, 0);
  ASSERT_TRUE(pairs.ok());
  EXPECT_EQ(Flat(*pairs), (Pairs{{0, 0}}));
  pairs = PairDevices(one, two, Pairing::kIndex, 0);
  ASSERT_TRUE(pairs.ok());
  EXPECT_EQ(Flat(*pairs), (Pairs{{0, 0}}));
}

TEST(DevicePairingTest, RailPairsDevicesOnTheSameSubnet) {
  // Listed in different orders on the two hosts: rails still match.
  const std::vector<PairingDevice> a = {Ipv4("a0", 10, 1, 0, 1), Ipv4("a1", 10, 1, 1, 1),
                                        Ipv4("a2", 10, 1, 2, 1)};
  const std::vector<PairingDevice> b = {Ipv4("b0", 10, 1, 2, 2), Ipv4("b1", 10, 1, 0, 2)};
  auto pairs = PairDevices(a, b, Pairing::kRail, 0);
  ASSERT_TRUE(pairs.ok()) << pairs.status();
  EXPECT_EQ(Flat(*pairs), (Pairs{{0, 1}, {2, 0}}));
  // A /16 puts everything on one rail: first come, first paired.
  pairs = PairDevices(a, b, Pairing::kRail, 96 + 16);
  ASSERT_TRUE(pairs.ok());
  EXPECT_EQ(Flat(*pairs), (Pairs{{0, 0}, {1, 1}}));
}

TEST(DevicePairingTest, RailPairsInfinibandBySubnetPrefix) {
  PairingDevice x{"mlx5_0", {0xfe, 0x80, 0, 0, 0, 0, 0, 1, 9, 9, 9, 9, 9, 9, 9, 1}};
  PairingDevice y{"mlx5_1", {0xfe, 0x80, 0, 0, 0, 0, 0, 2, 9, 9, 9, 9, 9, 9, 9, 2}};
  PairingDevice peer_y{"mlx5_0", {0xfe, 0x80, 0, 0, 0, 0, 0, 2, 7, 7, 7, 7, 7, 7, 7, 7}};
  auto pairs = PairDevices({x, y}, {peer_y}, Pairing::kRail, 0);
  ASSERT_TRUE(pairs.ok());
  EXPECT_EQ(Flat(*pairs), (Pairs{{1, 0}}));
}

TEST(DevicePairingTest, NoCommonRailIsAnErrorNamingTheDevices) {
  auto pairs = PairDevices({Ipv4("rxe0", 10, 9, 9, 1)}, {Ipv4("rxe7", 10, 9, 10, 1)},
                           Pairing::kRail, 0);
  ASSERT_FALSE(pairs.ok());
  EXPECT_EQ(pairs.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(pairs.status().message().find("rxe7 (::ffff:10.9.10.1)"), std::string::npos)
      << pairs.status();
  EXPECT_NE(pairs.status().message().find("verbs_pairing"), std::string::npos);
}

TEST(DevicePairingTest, ParsesPairing) {
  EXPECT_EQ(*ParsePairing("index"), Pairing::kIndex);
  EXPECT_EQ(*ParsePairing("rail"), Pairing::kRail);
  EXPECT_FALSE(ParsePairing("bond").ok());
}

}  // namespace
}  // namespace xferd::transport::verbs
