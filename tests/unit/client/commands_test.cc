// xferctl's command line: value parsing (sizes, durations), global options
// after subcommands, default subcommands and usage errors. No daemon.
#include "client/cpp/commands.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

namespace xferd::client {
namespace {

// Parses `args` (without the program name) with xferctl's full command line.
class CommandLineTest : public ::testing::Test {
 protected:
  void Parse(std::vector<std::string> args) {
    std::vector<std::string> argv = {"xferctl"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<const char*> raw;
    for (const std::string& a : argv) raw.push_back(a.c_str());
    app_.parse(static_cast<int>(raw.size()), raw.data());
  }

  CLI::App app_{"test"};
  GlobalOptions global_;
  Action action_;
};

TEST_F(CommandLineTest, ChoosesTheSubcommandAndReadsGlobalsAfterIt) {
  ConfigureApp(app_, &global_, &action_);
  Parse({"write", "src", "node-b", "dst", "--length", "64KiB", "--json", "--target", "h:1"});
  EXPECT_TRUE(action_ != nullptr);
  EXPECT_TRUE(global_.json);
  EXPECT_EQ(global_.target, "h:1");
}

TEST_F(CommandLineTest, TargetDefaultsToEnvironmentThenSocket) {
  ::unsetenv("XFERD_TARGET");
  ConfigureApp(app_, &global_, &action_);
  Parse({"info"});
  EXPECT_EQ(global_.target, kDefaultTarget);
  EXPECT_FALSE(global_.json);

  ::setenv("XFERD_TARGET", "unix:/tmp/x.sock", 1);
  CLI::App other{"other"};
  GlobalOptions global;
  Action action;
  ConfigureApp(other, &global, &action);
  const char* argv[] = {"xferctl", "stats"};
  other.parse(2, argv);
  EXPECT_EQ(global.target, "unix:/tmp/x.sock");
  ::unsetenv("XFERD_TARGET");
}

TEST_F(CommandLineTest, RegionsAndPeersAloneList) {
  ConfigureApp(app_, &global_, &action_);
  Parse({"regions"});
  EXPECT_TRUE(action_ != nullptr);
  action_ = nullptr;
  app_.clear();
  Parse({"peers"});
  EXPECT_TRUE(action_ != nullptr);
}

TEST_F(CommandLineTest, UsageErrorsThrowParseErrors) {
  ConfigureApp(app_, &global_, &action_);
  EXPECT_THROW(Parse({}), CLI::ParseError);
  app_.clear();
  EXPECT_THROW(Parse({"write", "src", "peer"}), CLI::ParseError);  // DST missing
  app_.clear();
  EXPECT_THROW(Parse({"write", "a", "b", "c", "--length", "12xyz"}), CLI::ParseError);
  app_.clear();
  EXPECT_THROW(Parse({"regions", "register", "r", "1MiB", "--backing", "tape"}), CLI::ParseError);
  app_.clear();
  EXPECT_THROW(Parse({"write", "a", "b", "c", "--timeout", "soon"}), CLI::ParseError);
}

TEST(SizeArgTest, RewritesSizesToBytes) {
  CLI::App app;
  uint64_t size = 0;
  app.add_option("--size", size)->transform(SizeArg());
  const char* argv[] = {"x", "--size", "64KiB"};
  app.parse(3, argv);
  EXPECT_EQ(size, 64u * 1024);
  const char* plain[] = {"x", "--size", "4097"};
  app.parse(3, plain);
  EXPECT_EQ(size, 4097u);
  const char* bad[] = {"x", "--size", "-1"};
  EXPECT_THROW(app.parse(3, bad), CLI::ValidationError);
}

TEST(DurationArgTest, RewritesDurationsToNanoseconds) {
  CLI::App app;
  int64_t ns = 0;
  app.add_option("--timeout", ns)->transform(DurationArg());
  const char* argv[] = {"x", "--timeout", "1.5s"};
  app.parse(3, argv);
  EXPECT_EQ(ns, 1500000000);
  const char* bad[] = {"x", "--timeout", "-2s"};
  EXPECT_THROW(app.parse(3, bad), CLI::ValidationError);
}

}  // namespace
}  // namespace xferd::client
