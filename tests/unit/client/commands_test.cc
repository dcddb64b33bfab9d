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

TEST_F(CommandLineTest, TopTakesIntervalIterationsAndJson) {
  ConfigureApp(app_, &global_, &action_);
  Parse({"top", "--iterations", "2", "-i", "250ms", "--transfers", "5", "--json"});
  EXPECT_TRUE(action_ != nullptr);
  EXPECT_TRUE(global_.json);
  app_.clear();
  EXPECT_THROW(Parse({"top", "--interval", "soon"}), CLI::ParseError);
  app_.clear();
  EXPECT_THROW(Parse({"top", "--iterations", "-1"}), CLI::ParseError);
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

// Parses "--value `text`" through `validator` into a T.
template <typename T>
T ParseValue(const CLI::Validator& validator, const std::string& text) {
  CLI::App app;
  T value{};
  app.add_option("--value", value)->transform(validator);
  const char* argv[] = {"x", "--value", text.c_str()};
  app.parse(3, argv);
  return value;
}

TEST(SizeArgTest, RewritesSizesToBytes) {
  EXPECT_EQ(ParseValue<uint64_t>(SizeArg(), "64KiB"), 64u * 1024);
  EXPECT_EQ(ParseValue<uint64_t>(SizeArg(), "4097"), 4097u);
  EXPECT_EQ(ParseValue<uint64_t>(SizeArg(), "1.5g"), 3u << 29);
  EXPECT_THROW(ParseValue<uint64_t>(SizeArg(), "-1"), CLI::ValidationError);
}

TEST(DurationArgTest, RewritesDurationsToNanoseconds) {
  EXPECT_EQ(ParseValue<int64_t>(DurationArg(), "1.5s"), 1500000000);
  EXPECT_EQ(ParseValue<int64_t>(DurationArg(), "250ms"), 250000000);
  EXPECT_THROW(ParseValue<int64_t>(DurationArg(), "-2s"), CLI::ValidationError);
}

}  // namespace
}  // namespace xferd::client
