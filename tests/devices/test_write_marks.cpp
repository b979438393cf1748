// A buffer's write marks (gpu_ref.hpp, buffer_block): what a reader waits on for the writes
// before it, and enqueued_on, the lock-free answer "every write up to N is enqueued and the last
// event was recorded on this queue" that the world engine asks for every buffer of every request,
// and enqueued_without_event, the same for a buffer whose writes never left an event.
#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "atomr/local/device/gpu_ref.hpp"

namespace atomr::local {
namespace {

int queue_a = 0;  // two queues (streams), named by address as the engine does
int queue_b = 0;
const void* const a = &queue_a;
const void* const b = &queue_b;

TEST(WriteMarks, NothingEnqueuedIsNoMarkAndNotOnAnyQueue) {
  buffer_block block;
  EXPECT_FALSE(block.mark_after(1).has_value());
  EXPECT_FALSE(block.enqueued_on(1, a));
  // Waiting for no writes needs nothing.
  ASSERT_TRUE(block.mark_after(0).has_value());
  EXPECT_EQ(block.mark_after(0)->event, nullptr);
}

TEST(WriteMarks, WritesWithoutEventsNeedNoWaitOnceEnqueuedUntilOneLeavesAnEvent) {
  // A host buffer's writes leave no event: once they are enqueued a reader has nothing to wait
  // on, known without the lock (the host backend asks it for every request).
  buffer_block block;
  EXPECT_TRUE(block.enqueued_without_event(0));
  EXPECT_FALSE(block.enqueued_without_event(1));
  block.write_enqueued(1, nullptr, a);
  block.write_enqueued(2, nullptr);
  EXPECT_TRUE(block.enqueued_without_event(1));
  EXPECT_TRUE(block.enqueued_without_event(2));
  EXPECT_FALSE(block.enqueued_without_event(3));  // not enqueued yet
  // One write with an event: from then on readers ask mark_after, even for the earlier writes.
  auto event = std::make_shared<int>(1);
  block.write_enqueued(3, event, a);
  EXPECT_FALSE(block.enqueued_without_event(2));
  EXPECT_FALSE(block.enqueued_without_event(3));
  EXPECT_EQ(block.mark_after(3)->event, event);
  block.write_enqueued(4, nullptr, b);
  EXPECT_FALSE(block.enqueued_without_event(4));
}

TEST(WriteMarks, AnEventOnAQueueCoversReadersOnThatQueueOnly) {
  buffer_block block;
  auto event = std::make_shared<int>(1);
  block.write_enqueued(1, event, a);
  ASSERT_TRUE(block.mark_after(1).has_value());
  EXPECT_EQ(block.mark_after(1)->event, event);
  EXPECT_EQ(block.mark_after(1)->origin, a);
  EXPECT_TRUE(block.enqueued_on(1, a));
  EXPECT_FALSE(block.enqueued_on(1, b));        // another queue must wait on the event
  EXPECT_FALSE(block.enqueued_on(2, a));        // write 2 is not enqueued yet
  EXPECT_FALSE(block.enqueued_on(1, nullptr));  // no queue: always ask mark_after
}

TEST(WriteMarks, AFinishedWriteWithoutAnEventKeepsTheLastEventsQueue) {
  buffer_block block;
  auto event = std::make_shared<int>(1);
  block.write_enqueued(1, event, a);
  block.write_enqueued(2, nullptr, b);  // done already: nothing to wait on, published without an event
  EXPECT_TRUE(block.enqueued_on(2, a));
  EXPECT_FALSE(block.enqueued_on(2, b));
  EXPECT_EQ(block.mark_after(2)->event, event);
}

TEST(WriteMarks, ALaterEventMovesTheQueueAndAnEarlierSequenceNeverLowersTheCount) {
  buffer_block block;
  auto first = std::make_shared<int>(1);
  auto second = std::make_shared<int>(2);
  block.write_enqueued(1, first, a);
  block.write_enqueued(3, second, b);
  EXPECT_TRUE(block.enqueued_on(3, b));
  EXPECT_FALSE(block.enqueued_on(3, a));
  block.write_enqueued(2, nullptr, a);  // reported late
  EXPECT_TRUE(block.mark_after(3).has_value());
  EXPECT_FALSE(block.mark_after(4).has_value());
  EXPECT_EQ(block.mark_after(3)->event, second);
}

// A reader that hears "enqueued on this queue" for write N always finds write N enqueued by
// mark_after too, while a writer reports writes on alternating queues (run under ThreadSanitizer
// in the TSan build: the reads take no lock).
TEST(WriteMarks, EnqueuedOnAgreesWithMarkAfterWhileWritesArrive) {
  buffer_block block;
  constexpr std::uint64_t k_writes = 20000;
  std::thread writer([&] {
    for (std::uint64_t s = 1; s <= k_writes; ++s) block.write_enqueued(s, std::make_shared<int>(0), s % 2 ? a : b);
  });
  std::uint64_t seen = 0;
  std::uint64_t mismatches = 0;
  while (seen < k_writes) {
    const std::uint64_t next = seen + 1;
    if (block.enqueued_on(next, a) || block.enqueued_on(next, b)) {
      const auto mark = block.mark_after(next);
      if (!mark || mark->event == nullptr) ++mismatches;
      seen = next;
    } else if (block.mark_after(next).has_value()) {
      seen = next;  // enqueued, its event's queue already moved on: fine either way
    }
  }
  writer.join();
  EXPECT_EQ(mismatches, 0u);
  EXPECT_TRUE(block.enqueued_on(k_writes, k_writes % 2 ? a : b));
}

}  // namespace
}  // namespace atomr::local
