// DirectoryCache: a full read, then watch events, as etcd delivers them.
#include "daemon/cluster/directory_cache.h"

#include <gtest/gtest.h>

#include "daemon/cluster/records.h"

namespace xferd::cluster {
namespace {

constexpr char kPrefix[] = "/x/";

mvccpb::KeyValue NodeKv(const std::string& id, const std::string& address, int64_t revision) {
  v1::DirectoryNode node;
  node.set_node_id(id);
  node.set_address(address);
  mvccpb::KeyValue kv;
  kv.set_key(NodeKey(kPrefix, id));
  kv.set_value(Encode(node));
  kv.set_mod_revision(revision);
  return kv;
}

mvccpb::KeyValue RegionKv(const std::string& id, const std::string& name, int64_t revision) {
  v1::DirectoryRegion region;
  region.set_node_id(id);
  region.set_name(name);
  region.set_size(4096);
  mvccpb::KeyValue kv;
  kv.set_key(RegionKey(kPrefix, id, name));
  kv.set_value(Encode(region));
  kv.set_mod_revision(revision);
  return kv;
}

mvccpb::Event Put(mvccpb::KeyValue kv) {
  mvccpb::Event event;
  event.set_type(mvccpb::Event::PUT);
  *event.mutable_kv() = std::move(kv);
  return event;
}

mvccpb::Event Delete(const std::string& key, int64_t revision) {
  mvccpb::Event event;
  event.set_type(mvccpb::Event::DELETE);
  event.mutable_kv()->set_key(key);
  event.mutable_kv()->set_mod_revision(revision);
  return event;
}

KeyValues Kvs(std::initializer_list<mvccpb::KeyValue> list) {
  KeyValues kvs;
  for (const mvccpb::KeyValue& kv : list) *kvs.Add() = kv;
  return kvs;
}

TEST(DirectoryCacheTest, FullReadThenEvents) {
  DirectoryCache cache(kPrefix);
  EXPECT_TRUE(cache
                  .Reset(Kvs({NodeKv("a", "h:1", 3), NodeKv("b", "h:2", 4)}),
                         Kvs({RegionKv("a", "kv", 5)}), 5)
                  .empty());
  EXPECT_EQ(cache.revision(), 5);
  EXPECT_EQ(cache.Node("a")->address(), "h:1");
  EXPECT_FALSE(cache.Node("c").has_value());
  ASSERT_EQ(cache.FindRegion("kv").size(), 1u);

  // b restarts elsewhere: a put replaces its record.
  EXPECT_FALSE(cache.Apply(Put(NodeKv("b", "h:9", 6))).has_value());
  EXPECT_EQ(cache.Node("b")->address(), "h:9");
  EXPECT_EQ(cache.revision(), 6);

  // a leaves: its region goes, then its node, which is reported gone.
  EXPECT_FALSE(cache.Apply(Delete(RegionKey(kPrefix, "a", "kv"), 7)).has_value());
  std::optional<v1::DirectoryNode> gone = cache.Apply(Delete(NodeKey(kPrefix, "a"), 7));
  ASSERT_TRUE(gone.has_value());
  EXPECT_EQ(gone->address(), "h:1");
  EXPECT_TRUE(cache.FindRegion("kv").empty());
  // A delete of a key it never held reports nothing.
  EXPECT_FALSE(cache.Apply(Delete(NodeKey(kPrefix, "zz"), 8)).has_value());

  DirectoryListing listing = cache.Listing();
  ASSERT_EQ(listing.nodes.size(), 1u);
  EXPECT_EQ(listing.nodes[0].node.node_id(), "b");
  EXPECT_EQ(listing.revision, 8);
}

TEST(DirectoryCacheTest, RegionsShowOnlyWithTheirNode) {
  DirectoryCache cache(kPrefix);
  cache.Reset({}, {}, 1);
  cache.Apply(Put(RegionKv("a", "kv", 2)));  // before a's node record
  EXPECT_TRUE(cache.FindRegion("kv").empty());
  EXPECT_TRUE(cache.Listing().nodes.empty());
  cache.Apply(Put(NodeKv("a", "h:1", 3)));
  EXPECT_EQ(cache.FindRegion("kv").size(), 1u);
  ASSERT_EQ(cache.Listing().nodes.size(), 1u);
  EXPECT_EQ(cache.Listing().nodes[0].regions.size(), 1u);
}

TEST(DirectoryCacheTest, ReadAgainReportsWhoLeftInBetween) {
  DirectoryCache cache(kPrefix);
  cache.Reset(Kvs({NodeKv("a", "h:1", 2), NodeKv("b", "h:2", 3)}), {}, 3);
  // After a compaction the watch reads everything again: b is gone.
  std::vector<v1::DirectoryNode> gone =
      cache.Reset(Kvs({NodeKv("a", "h:1", 2), NodeKv("c", "h:3", 9)}), {}, 10);
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].node_id(), "b");
  EXPECT_TRUE(cache.Node("c").has_value());
  EXPECT_EQ(cache.revision(), 10);
}

TEST(DirectoryCacheTest, ForeignKeysAreSkipped) {
  DirectoryCache cache(kPrefix);
  mvccpb::KeyValue junk;
  junk.set_key("/x/nodes/bad");
  junk.set_value("not json");
  cache.Reset(Kvs({junk, NodeKv("a", "h:1", 2)}), {}, 2);
  EXPECT_FALSE(cache.Node("bad").has_value());
  EXPECT_TRUE(cache.Node("a").has_value());
}

}  // namespace
}  // namespace xferd::cluster
