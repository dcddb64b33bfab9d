#include "daemon/cluster/records.h"

#include <gtest/gtest.h>

namespace xferd::cluster {
namespace {

TEST(RecordsTest, KeyLayout) {
  EXPECT_EQ(NodesPrefix("/xferd/"), "/xferd/nodes/");
  EXPECT_EQ(NodeKey("/xferd/", "host-a:7300"), "/xferd/nodes/host-a:7300");
  EXPECT_EQ(RegionsPrefix("/t/x/"), "/t/x/regions/");
  EXPECT_EQ(NodeRegionsPrefix("/xferd/", "a"), "/xferd/regions/a/");
  EXPECT_EQ(RegionKey("/xferd/", "a", "kv"), "/xferd/regions/a/kv");
}

TEST(RecordsTest, RangeEndCoversExactlyThePrefix) {
  const std::string end = RangeEnd("/xferd/regions/a/");
  EXPECT_EQ(end, "/xferd/regions/a0");  // '/' + 1
  EXPECT_LT(std::string("/xferd/regions/a/zzz"), end);
  EXPECT_GE(std::string("/xferd/regions/a0"), end);
  // Node "ab"'s regions are not node "a"'s.
  EXPECT_GT(std::string("/xferd/regions/ab/kv"), end);
}

TEST(RecordsTest, NodeIdIsOneKeySegment) {
  EXPECT_TRUE(CheckNodeId("host-a:7300").ok());
  absl::Status slash = CheckNodeId("a/b");
  EXPECT_EQ(slash.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(slash.message().find("hold no '/'"), absl::string_view::npos) << slash;
  EXPECT_FALSE(CheckNodeId("").ok());
}

TEST(RecordsTest, RoundTripsThroughJson) {
  v1::DirectoryNode node;
  node.set_node_id("a");
  node.set_address("10.0.0.1:7300");
  node.set_transport(v1::TRANSPORT_KIND_VERBS);
  node.set_device("mlx5_0:1");
  node.add_identity("a");
  node.set_incarnation(0xfedcba9876543210ull);
  node.set_lease(42);
  const std::string json = Encode(node);
  EXPECT_NE(json.find("\"address\":\"10.0.0.1:7300\""), std::string::npos) << json;
  absl::StatusOr<v1::DirectoryNode> back = DecodeNode("/xferd/nodes/a", json);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->SerializeAsString(), node.SerializeAsString());

  v1::DirectoryRegion region;
  region.set_node_id("a");
  region.set_name("kv");
  region.set_size(1 << 20);
  region.set_backing(v1::REGION_BACKING_SHM);
  region.mutable_access()->set_remote_write(true);
  absl::StatusOr<v1::DirectoryRegion> region_back =
      DecodeRegion("/xferd/regions/a/kv", Encode(region));
  ASSERT_TRUE(region_back.ok()) << region_back.status();
  EXPECT_EQ(region_back->SerializeAsString(), region.SerializeAsString());
}

TEST(RecordsTest, UnknownFieldsOfNewerDaemonsAreIgnoredGarbageIsNot) {
  absl::StatusOr<v1::DirectoryNode> newer =
      DecodeNode("/xferd/nodes/a", R"({"nodeId":"a","futureField":1})");
  ASSERT_TRUE(newer.ok()) << newer.status();
  EXPECT_EQ(newer->node_id(), "a");
  absl::StatusOr<v1::DirectoryNode> garbage = DecodeNode("/xferd/nodes/x", "not json");
  EXPECT_EQ(garbage.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(garbage.status().message().find("etcd key /xferd/nodes/x does not hold a "
                                            "DirectoryNode record"),
            absl::string_view::npos)
      << garbage.status();
}

}  // namespace
}  // namespace xferd::cluster
