#include "daemon/rings/name_table.h"

#include <gtest/gtest.h>

#include <string>

namespace xferd::rings {
namespace {

TEST(NameTableTest, InternsOnceAndLooksUp) {
  NameTable t;
  const absl::StatusOr<uint32_t> a = t.Intern("node-b");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_NE(*a, 0u) << "0 means no name in an entry";
  EXPECT_EQ(*t.Intern("node-b"), *a) << "the same name, the same handle";
  const absl::StatusOr<uint32_t> b = t.Intern("src");
  ASSERT_TRUE(b.ok());
  EXPECT_NE(*b, *a);
  EXPECT_EQ(*t.Lookup(*a, "peer"), "node-b");
  EXPECT_EQ(*t.Lookup(*b, "src"), "src");
  EXPECT_EQ(t.size(), 2u);
}

TEST(NameTableTest, RefusesBadNamesAndUnknownHandles) {
  NameTable t;
  EXPECT_EQ(t.Intern("").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(t.Intern(std::string(256, 'x')).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(t.Intern(std::string(255, 'x')).ok());
  for (uint32_t handle : {0u, 2u, 0xffffffffu}) {
    const absl::Status s = t.Lookup(handle, "dst").status();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << handle;
    EXPECT_NE(s.message().find("dst"), absl::string_view::npos) << "names the field: " << s;
  }
}

}  // namespace
}  // namespace xferd::rings
