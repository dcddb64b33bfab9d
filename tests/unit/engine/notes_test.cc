// Notes: a poller's pass wakes the notes thread once, when the pass ends;
// notes taken outside a pass wake it at once; quiet notes (nobody waits for
// them: here, landings on a region nobody watches) wake it only when a pass
// or a sleeping poller flushes them. Watched through a region's landed-event
// count, which only the notes thread raises.
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
    auto notes = engine::Notes::Create(64, [](engine::Transfer&) {});
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

  // A watcher on the region: its landings are then notes someone waits for.
  struct Watcher : memory::LandedWatcher {
    void OnLandedNews() override {}
  };
  void Watch() {
    memory::LandedEventHub::Cursor cursor;
    ASSERT_TRUE(region_->landed().Subscribe(&watcher_, &cursor));
  }
  void TearDown() override { region_->landed().Unsubscribe(&watcher_); }

  // Lets the thread reach its sleep: nothing has woken it since it started.
  static void LetItSleep() { absl::SleepFor(absl::Milliseconds(50)); }

  Watcher watcher_;

  std::unique_ptr<memory::RegionRegistry> registry_;
  std::shared_ptr<memory::Region> region_;
  std::unique_ptr<engine::Notes> notes_;
};

TEST_F(NotesTest, ANoteOutsideAPassIsHandledAtOnce) {
  notes_->Landed(Landing(1));
  EXPECT_TRUE(WaitUntil([&] { return published() == 1; }, absl::Seconds(10)));
}

TEST_F(NotesTest, APassWakesTheThreadOnceItEnds) {
  Watch();
  LetItSleep();
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

TEST_F(NotesTest, QuietNotesWaitForAFlush) {
  LetItSleep();
  {
    engine::Notes::Batch pass(*notes_);
    notes_->Landed(Landing(1));
    notes_->Landed(Landing(2));
  }
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(published(), 0u);  // the pass ended without waking the thread
  notes_->Flush();             // what a poller does before it sleeps
  EXPECT_TRUE(WaitUntil([&] { return published() == 2; }, absl::Seconds(10)));
}

// Whichever comes first wakes the thread for the quiet notes: kQuietNotes
// passes, or a pass kQuietDelayNs after the first of them (under TSan 32
// passes can outlast that delay, and the passes after such a wake start a
// new count). So within any kQuietNotes passes one wake comes, and after
// twice as many at least kQuietNotes notes are out, none flushed.
TEST_F(NotesTest, QuietNotesOfManyPassesWakeTheThread) {
  LetItSleep();
  for (uint32_t i = 0; i < 2 * engine::Notes::kQuietNotes; ++i) {
    engine::Notes::Batch pass(*notes_);
    notes_->Landed(Landing(i));
  }
  EXPECT_TRUE(WaitUntil([&] { return published() >= engine::Notes::kQuietNotes; },
                        absl::Seconds(10)))
      << published() << " of " << 2 * engine::Notes::kQuietNotes << " published";
}

TEST_F(NotesTest, AQuietNoteWakesTheThreadAPassAfterItsDelay) {
  LetItSleep();
  {
    engine::Notes::Batch pass(*notes_);
    notes_->Landed(Landing(1));
  }
  absl::SleepFor(absl::Nanoseconds(engine::Notes::kQuietDelayNs) + absl::Milliseconds(1));
  { engine::Notes::Batch idle_pass(*notes_); }  // a later pass with nothing of its own
  EXPECT_TRUE(WaitUntil([&] { return published() == 1; }, absl::Seconds(10)));
}

TEST_F(NotesTest, AWaitedNoteWakesTheThreadForTheQuietOnesToo) {
  LetItSleep();
  {
    engine::Notes::Batch pass(*notes_);
    notes_->Landed(Landing(1));  // quiet
  }
  Watch();
  {
    engine::Notes::Batch pass(*notes_);
    notes_->Landed(Landing(2));  // watched
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
