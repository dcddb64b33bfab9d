#include "daemon/engine/spin_window.h"

#include <chrono>

#include "gtest/gtest.h"

namespace xferd::engine {
namespace {

using std::chrono::microseconds;

TEST(SpinWindowTest, ShortSleepsDoubleTheWindowUpToItsMax) {
  SpinWindow spin(microseconds(50), microseconds(200));
  EXPECT_EQ(spin.now(), microseconds(50));
  spin.Slept(microseconds(30));
  EXPECT_EQ(spin.now(), microseconds(100));
  spin.Slept(microseconds(199));
  EXPECT_EQ(spin.now(), microseconds(200));
  spin.Slept(microseconds(200));  // within the max still counts as short
  EXPECT_EQ(spin.now(), microseconds(200));
}

TEST(SpinWindowTest, ALongSleepReturnsTheWindowToItsBase) {
  SpinWindow spin(microseconds(50), microseconds(200));
  spin.Slept(microseconds(10));
  spin.Slept(microseconds(10));
  ASSERT_EQ(spin.now(), microseconds(200));
  spin.Slept(microseconds(201));
  EXPECT_EQ(spin.now(), microseconds(50));
  spin.Slept(std::chrono::seconds(5));
  EXPECT_EQ(spin.now(), microseconds(50));
}

TEST(SpinWindowTest, ZeroBaseNeverSpins) {
  SpinWindow spin(microseconds(0), microseconds(200));
  spin.Slept(microseconds(1));
  spin.Slept(microseconds(1));
  EXPECT_EQ(spin.now(), microseconds(0));
}

TEST(SpinWindowTest, AMaxAtOrBelowTheBaseKeepsTheBase) {
  SpinWindow spin(microseconds(80), microseconds(20));
  spin.Slept(microseconds(1));
  EXPECT_EQ(spin.now(), microseconds(80));
  spin.Slept(microseconds(500));
  EXPECT_EQ(spin.now(), microseconds(80));
}

}  // namespace
}  // namespace xferd::engine
