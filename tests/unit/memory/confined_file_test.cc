// File regions stay inside regions.file_dirs: the path-escape battery
// (outside paths, "..", symlinks in every position, hard links, special
// files, a directory swapped for a symlink while opening), and undoing a
// creation removes that file only.
#include "daemon/memory/confined_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>

namespace xferd::memory {
namespace {

namespace fs = std::filesystem;

class ConfinedFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    root_ = fs::path(tmp != nullptr ? tmp : "/tmp") / "confined";
    fs::remove_all(root_);
    fs::create_directories(root_ / "data" / "sub");
    fs::create_directories(root_ / "outside");
    data_ = (root_ / "data").string();
    outside_ = (root_ / "outside").string();
    confinement_.dirs = {data_};
    confinement_.create_mode = 0640;
    Touch(outside_ + "/secret");
    Touch(data_ + "/ok");
  }
  void TearDown() override { fs::remove_all(root_); }

  static void Touch(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0600);
    ASSERT_GE(fd, 0) << path;
    ASSERT_EQ(::write(fd, "secret", 6), 6);
    ::close(fd);
  }

  absl::Status Open(const std::string& path, int flags = O_RDWR) {
    bool created = false;
    return OpenConfined(confinement_, path, flags, &created).status();
  }

  // Refused as outside the data directories, naming the configuration key.
  void ExpectDenied(const std::string& path, int flags = O_RDWR) {
    const absl::Status s = Open(path, flags);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << path << ": " << s;
    EXPECT_NE(s.message().find("regions.file_dirs"), absl::string_view::npos) << s;
  }

  fs::path root_;
  std::string data_, outside_;
  FileConfinement confinement_;
};

TEST_F(ConfinedFileTest, OpensAndCreatesInsideWithTheConfiguredMode) {
  EXPECT_TRUE(Open(data_ + "/ok").ok());
  bool created = false;
  const ::mode_t old_umask = ::umask(077);
  auto fd = OpenConfined(confinement_, data_ + "/sub/new", O_RDWR | O_CREAT | O_EXCL, &created);
  ::umask(old_umask);
  ASSERT_TRUE(fd.ok()) << fd.status();
  EXPECT_TRUE(created);
  struct stat st;
  ASSERT_EQ(::fstat(fd->get(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u) << "the configured mode, whatever the umask";
}

TEST_F(ConfinedFileTest, PathsOutsideAreRefused) {
  ExpectDenied(outside_ + "/secret");
  ExpectDenied("/etc/passwd", O_RDONLY);
  ExpectDenied("/proc/self/environ", O_RDONLY);
  ExpectDenied("/dev/null");
  ExpectDenied(data_);  // the directory itself
  ExpectDenied(data_ + "x/ok");  // a sibling whose name starts the same
  ExpectDenied(data_ + "/../outside/secret");
  ExpectDenied(data_ + "/sub/../ok");
  ExpectDenied(data_ + "//ok");
  ExpectDenied(data_ + "/./ok");
  EXPECT_EQ(Open("data/ok").code(), absl::StatusCode::kInvalidArgument);
  // The kernel would open "ok/" cut at the NUL: refused before it gets there.
  EXPECT_EQ(Open(data_ + std::string("/ok\0/../x", 10)).code(),
            absl::StatusCode::kInvalidArgument);
  confinement_.dirs.clear();
  const absl::Status none = Open(data_ + "/ok");
  EXPECT_EQ(none.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(none.message().find("none configured"), absl::string_view::npos) << none;
}

TEST_F(ConfinedFileTest, SymlinksAreRefusedInEveryPosition) {
  fs::create_symlink(outside_ + "/secret", data_ + "/last");
  fs::create_symlink(outside_, data_ + "/middle");
  fs::create_symlink(data_ + "/ok", data_ + "/inside");  // even one that stays inside
  fs::create_symlink("../outside/secret", data_ + "/relative");
  ExpectDenied(data_ + "/last");
  ExpectDenied(data_ + "/middle/secret");
  ExpectDenied(data_ + "/inside");
  ExpectDenied(data_ + "/relative");
  // O_EXCL on an existing symlink: EEXIST, nothing opened.
  EXPECT_FALSE(Open(data_ + "/last", O_RDWR | O_CREAT | O_EXCL).ok());
  ExpectDenied(data_ + "/middle/created", O_RDWR | O_CREAT | O_EXCL);
  EXPECT_FALSE(fs::exists(outside_ + "/created"));
  std::error_code ec;
  EXPECT_EQ(fs::file_size(outside_ + "/secret", ec), 6u) << "the outside file is untouched";
}

TEST_F(ConfinedFileTest, HardLinksAndSpecialFilesAreRefused) {
  ASSERT_EQ(::link((outside_ + "/secret").c_str(), (data_ + "/hard").c_str()), 0);
  ExpectDenied(data_ + "/hard");
  ASSERT_EQ(::mkfifo((data_ + "/fifo").c_str(), 0600), 0);
  ExpectDenied(data_ + "/fifo");  // and does not block opening it
  if (::mknod((data_ + "/null").c_str(), S_IFCHR | 0600, makedev(1, 3)) == 0) {
    ExpectDenied(data_ + "/null");
  }
  ExpectDenied(data_ + "/sub");
}

TEST_F(ConfinedFileTest, AConfiguredSymlinkIsTrustedUnderEitherName) {
  fs::create_symlink(data_, root_ / "alias");
  confinement_.dirs = {(root_ / "alias").string()};
  EXPECT_TRUE(Open((root_ / "alias" / "ok").string()).ok());
  EXPECT_TRUE(Open(data_ + "/ok").ok());
}

// A directory swapped for a symlink to the outside while the daemon opens a
// file below it: the kernel resolves the whole path at once, so no open
// ever reaches the outside, whatever the timing.
TEST_F(ConfinedFileTest, ADirectorySwappedForASymlinkNeverLeadsOutside) {
  const std::string swap = data_ + "/swap";
  const std::string real = data_ + "/real";
  fs::create_directories(real);
  fs::create_symlink(outside_, data_ + "/evil");
  std::atomic<bool> stop{false};
  std::thread swapper([&] {
    bool is_dir = false;
    while (!stop.load()) {
      // rename() replaces atomically: swap is a directory or a symlink.
      ::rename((is_dir ? (data_ + "/evil") : real).c_str(), swap.c_str());
      ::rename(swap.c_str(), (is_dir ? (data_ + "/evil") : real).c_str());
      is_dir = !is_dir;
    }
  });
  int opened = 0;
  for (int i = 0; i < 3000; ++i) {
    bool created = false;
    auto fd = OpenConfined(confinement_, swap + "/f" + std::to_string(i % 8),
                           O_RDWR | O_CREAT, &created);
    if (fd.ok()) ++opened;
  }
  stop = true;
  swapper.join();
  for (int i = 0; i < 8; ++i) {
    EXPECT_FALSE(fs::exists(outside_ + "/f" + std::to_string(i))) << "created outside";
  }
  std::error_code ec;
  EXPECT_EQ(fs::file_size(outside_ + "/secret", ec), 6u);
  RecordProperty("opened_inside", opened);
}

TEST_F(ConfinedFileTest, RemoveCreatedRemovesTheFileItCreated) {
  for (const std::string& path : {data_ + "/top", data_ + "/sub/deeper"}) {
    bool created = false;
    auto fd = OpenConfined(confinement_, path, O_RDWR | O_CREAT | O_EXCL, &created);
    ASSERT_TRUE(fd.ok()) << fd.status();
    RemoveCreated(confinement_, path, fd->get());
    EXPECT_FALSE(fs::exists(path)) << path;
  }
}

TEST_F(ConfinedFileTest, RemoveCreatedLeavesAnotherFileUnderThatNameAlone) {
  const std::string path = data_ + "/sub/replaced";
  bool created = false;
  auto fd = OpenConfined(confinement_, path, O_RDWR | O_CREAT | O_EXCL, &created);
  ASSERT_TRUE(fd.ok()) << fd.status();
  fs::remove(path);
  Touch(path);  // someone else's file now has the name
  RemoveCreated(confinement_, path, fd->get());
  EXPECT_TRUE(fs::exists(path));
}

TEST_F(ConfinedFileTest, RemoveCreatedNeverFollowsADirectorySwappedForASymlink) {
  fs::create_directories(data_ + "/swap");
  const std::string path = data_ + "/swap/secret";
  bool created = false;
  auto fd = OpenConfined(confinement_, path, O_RDWR | O_CREAT | O_EXCL, &created);
  ASSERT_TRUE(fd.ok()) << fd.status();
  // After the open, the directory becomes a symlink to where a file of the
  // same name lives: unlinking by path would delete outside/secret.
  fs::rename(data_ + "/swap", data_ + "/moved");
  fs::create_symlink(outside_, data_ + "/swap");
  RemoveCreated(confinement_, path, fd->get());
  EXPECT_TRUE(fs::exists(outside_ + "/secret"));
  EXPECT_TRUE(fs::exists(data_ + "/moved/secret")) << "not reached the way it was created";
}

}  // namespace
}  // namespace xferd::memory
