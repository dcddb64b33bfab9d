// Notes: a poller's pass wakes the notes thread once, when the pass ends;
// notes taken outside a pass wake it at once. Watched through a region's
// landed-event count, which only the notes thread raises.
#include "daemon/engine/notes.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "daemon/memory/region_registry.h"
#include "tests/testing/wait_until.h"

namespace xferd {
namespace {

using testing::WaitUntil;

class NotesTest : public ::testing::Test {
 protected:
  NotesTest() {
    registry_ = std::make_unique<memory::RegionRegistry>(memory::RegistryOptions{});
    memory::RegionSpec spec;
    spec.name = "dst";
    spec.size = 4096;
    auto region = registry_->Register(spec, nullptr);
    EXPECT_TRUE(region.ok()) << region.status();
    region_ = *region;
    auto notes = engine::Notes::Create(16, [](engine::Transfer&) {});
    EXPECT_TRUE(notes.ok()) << notes.status();
    notes_ = *std::move(notes);
  }

  transport::Landing Landing(uint64_t id) const {
    transport::Landing landing;
    landing.region = region_;
    landing.source = std::make_shared<const std::string>("peer");
    landing.notice.transfer_id = id;
    landing.notice.length = 4096;
    landing.time = absl::Now();
    return landing;
  }

  uint64_t published() const { return region_->landed().published(); }

  std::unique_ptr<memory::RegionRegistry> registry_;
  std::shared_ptr<memory::Region> region_;
  std::unique_ptr<engine::Notes> notes_;
};

TEST_F(NotesTest, ANoteOutsideAPassIsHandledAtOnce) {
  notes_->Landed(Landing(1));
  EXPECT_TRUE(WaitUntil([&] { return published() == 1; }, absl::Seconds(10)));
}

TEST_F(NotesTest, APassWakesTheThreadOnceItEnds) {
  // Let the thread reach its sleep: nothing has woken it since it started.
  absl::SleepFor(absl::Milliseconds(50));
  {
    engine::Notes::Batch pass(*notes_);
    notes_->Landed(Landing(1));
    notes_->Landed(Landing(2));
    // Queued, and nobody woke the sleeping thread: it must not run them yet.
    absl::SleepFor(absl::Milliseconds(100));
    EXPECT_EQ(published(), 0u);
  }
  EXPECT_TRUE(WaitUntil([&] { return published() == 2; }, absl::Seconds(10)));
}

TEST_F(NotesTest, NotesAfterStopAreHandledByTheirCaller) {
  notes_->Stop();
  engine::Notes::Batch pass(*notes_);
  notes_->Landed(Landing(1));
  EXPECT_EQ(published(), 1u);
}

}  // namespace
}  // namespace xferd
