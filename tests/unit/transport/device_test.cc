#include "daemon/transport/verbs/device.h"

#include <gtest/gtest.h>

namespace xferd::transport::verbs {
namespace {

GidEntry Gid(uint32_t index, GidType type, bool ipv4) {
  GidEntry gid;
  gid.index = index;
  gid.type = type;
  gid.raw[0] = 0xfe;  // link-local unless IPv4-mapped
  if (ipv4) {
    gid.raw = {};
    gid.raw[10] = gid.raw[11] = 0xff;
    gid.raw[12] = 10;
    gid.raw[15] = 1;
  }
  return gid;
}

DeviceInfo Roce(const std::string& name, PortState state) {
  DeviceInfo device;
  device.name = name;
  PortInfo port;
  port.number = 1;
  port.state = state;
  port.ethernet = true;
  port.active_mtu = 1024;
  port.max_mtu = 4096;
  port.gids = {Gid(0, GidType::kRoceV2, false), Gid(1, GidType::kRoceV2, true),
               Gid(2, GidType::kRoceV1, true)};
  device.ports.push_back(port);
  return device;
}

TEST(SelectPortTest, PrefersRoceV2WithAnIpv4MappedGid) {
  auto s = SelectPort({Roce("rxe0", PortState::kActive)}, DeviceRequest{});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->device, "rxe0");
  EXPECT_EQ(s->port, 1);
  EXPECT_EQ(s->gid.index, 1u);
  EXPECT_TRUE(s->gid.ipv4_mapped());
  EXPECT_EQ(s->gid.ToString(), "::ffff:10.0.0.1");
  EXPECT_EQ(s->mtu, 1024u);
  EXPECT_NE(s->description.find("RoCE v2 GID[1] ::ffff:10.0.0.1"), std::string::npos);
}

TEST(SelectPortTest, HonoursRequestsAndExplainsRefusals) {
  const std::vector<DeviceInfo> devices = {Roce("down0", PortState::kDown),
                                           Roce("rxe0", PortState::kActive)};
  EXPECT_EQ(SelectPort(devices, DeviceRequest{})->device, "rxe0");  // skips the DOWN port
  auto v1 = SelectPort(devices, DeviceRequest{"rxe0", 0, 2, 0});
  ASSERT_TRUE(v1.ok());
  EXPECT_EQ(v1->gid.type, GidType::kRoceV1);
  auto mtu = SelectPort(devices, DeviceRequest{"rxe0", 0, -1, 512});
  ASSERT_TRUE(mtu.ok());
  EXPECT_EQ(mtu->mtu, 512u);

  absl::Status s = SelectPort(devices, DeviceRequest{"mlx5_9", 0, -1, 0}).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("down0, rxe0"), absl::string_view::npos) << s;
  s = SelectPort(devices, DeviceRequest{"down0", 0, -1, 0}).status();
  EXPECT_NE(s.message().find("DOWN"), absl::string_view::npos) << s;
  s = SelectPort(devices, DeviceRequest{"rxe0", 0, 7, 0}).status();
  EXPECT_NE(s.message().find("GID index 7"), absl::string_view::npos) << s;
  s = SelectPort(devices, DeviceRequest{"rxe0", 0, -1, 4096}).status();
  EXPECT_NE(s.message().find("active MTU 1024"), absl::string_view::npos) << s;
  s = SelectPort({}, DeviceRequest{}).status();
  EXPECT_NE(s.message().find("no RDMA device"), absl::string_view::npos) << s;
}

TEST(SelectPortTest, RoceWithoutAnAddressHasNoUsableGid) {
  DeviceInfo device = Roce("rxe0", PortState::kActive);
  device.ports[0].gids = {Gid(0, GidType::kIb, false)};
  absl::Status s = SelectPort({device}, DeviceRequest{}).status();
  EXPECT_NE(s.message().find("IP address"), absl::string_view::npos) << s;
}

TEST(SelectPortTest, InfinibandUsesGidZeroAndTheLid) {
  DeviceInfo device;
  device.name = "mlx5_0";
  PortInfo port;
  port.number = 1;
  port.state = PortState::kActive;
  port.active_mtu = 4096;
  port.lid = 7;
  port.gids = {Gid(0, GidType::kIb, false)};
  device.ports.push_back(port);
  auto s = SelectPort({device}, DeviceRequest{});
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->ethernet);
  EXPECT_EQ(s->lid, 7);
  EXPECT_NE(s->description.find("LID 7"), std::string::npos);
}

// On real hardware (or Soft-RoCE in the VM suite): discovery sees it.
TEST(QueryDevicesTest, ListsWhatLibibverbsSees) {
  auto devices = QueryDevices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  if (devices->empty()) GTEST_SKIP() << "no RDMA device on this machine";
  for (const DeviceInfo& d : *devices) {
    EXPECT_TRUE(d.error.empty()) << d.name << ": " << d.error;
    EXPECT_FALSE(d.ports.empty()) << d.name;
  }
  EXPECT_TRUE(SelectPort(*devices, DeviceRequest{}).ok());
}

}  // namespace
}  // namespace xferd::transport::verbs
