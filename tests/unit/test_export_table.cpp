// The export table: the owner's live exports as words in a memfd, read by consumers through a
// mapping of their own (here a second mapping in the same process, which the kernel treats as it
// treats another process's: the same pages).
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <random>
#include <set>
#include <vector>

#include "atomr/cluster/buffers/export_table.hpp"

namespace atomr::cluster::detail {
namespace {

TEST(ExportTable, AConsumerSeesAnExportFromItsClaimToItsClear) {
  auto table = export_table::create(8);
  ASSERT_TRUE(table) << table.error_value().describe();
  auto view = export_view::map(table->fd());
  ASSERT_TRUE(view) << view.error_value().describe();
  EXPECT_EQ(view->capacity(), 8u);

  const auto slot = table->claim(41);
  ASSERT_TRUE(slot.has_value());
  EXPECT_TRUE(view->live(*slot, 41));
  EXPECT_FALSE(view->live(*slot, 42));  // another export id
  EXPECT_EQ(table->in_use(), 1u);

  table->clear(*slot);
  EXPECT_FALSE(view->live(*slot, 41));
  EXPECT_EQ(table->in_use(), 0u);
  table->clear(*slot);  // twice: no effect, the slot is not freed twice
  EXPECT_EQ(table->in_use(), 0u);
}

TEST(ExportTable, AReusedSlotNeverVouchesForTheExportThatLeftIt) {
  auto table = export_table::create(1);
  ASSERT_TRUE(table);
  auto view = export_view::map(table->fd());
  ASSERT_TRUE(view);
  const auto first = table->claim(7);
  ASSERT_TRUE(first.has_value());
  EXPECT_FALSE(table->claim(8).has_value()) << "a table of one slot is full";
  table->clear(*first);
  const auto second = table->claim(8);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(*second, *first);
  EXPECT_FALSE(view->live(*first, 7));
  EXPECT_TRUE(view->live(*second, 8));
}

TEST(ExportTable, BadSlotsAndIdsFromTheWireAreNotLive) {
  auto table = export_table::create(4);
  ASSERT_TRUE(table);
  auto view = export_view::map(table->fd());
  ASSERT_TRUE(view);
  EXPECT_FALSE(table->claim(0).has_value()) << "0 means no export";
  EXPECT_FALSE(view->live(0, 0));
  EXPECT_FALSE(view->live(4, 1));
  EXPECT_FALSE(view->live(export_table::k_no_slot, 1));
  EXPECT_FALSE(view->live(2, 5));  // never claimed
  table->clear(3);                 // never claimed: ignored
  EXPECT_EQ(table->in_use(), 0u);
}

TEST(ExportTable, ManyExportsComeAndGoWithoutMixingUp) {
  auto table = export_table::create(64);
  ASSERT_TRUE(table);
  auto view = export_view::map(table->fd());
  ASSERT_TRUE(view);
  std::mt19937 rng(20261124);
  std::vector<std::pair<std::uint32_t, std::uint64_t>> live;
  std::uint64_t next_id = 1;
  for (int step = 0; step < 10000; ++step) {
    if (live.size() < 64 && (live.empty() || rng() % 2 == 0)) {
      const auto slot = table->claim(next_id);
      ASSERT_TRUE(slot.has_value()) << "step " << step;
      live.emplace_back(*slot, next_id++);
    } else {
      const auto i = rng() % live.size();
      table->clear(live[i].first);
      EXPECT_FALSE(view->live(live[i].first, live[i].second));
      live.erase(live.begin() + static_cast<long>(i));
    }
    ASSERT_EQ(table->in_use(), live.size());
  }
  std::set<std::uint32_t> slots;
  for (const auto& [slot, id] : live) {
    EXPECT_TRUE(view->live(slot, id));
    EXPECT_TRUE(slots.insert(slot).second) << "slot " << slot << " given twice";
  }
}

TEST(ExportTable, AFileThatIsNotATableIsRefusedByName) {
  const int empty = ::memfd_create("atomr-test-empty", MFD_CLOEXEC);
  ASSERT_GE(empty, 0);
  auto none = export_view::map(empty);
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error_value().code(), errc::protocol);
  EXPECT_NE(none.error_value().message().find("0 bytes"), std::string::npos) << none.error_value().message();
  ASSERT_EQ(::ftruncate(empty, 12), 0);
  auto odd = export_view::map(empty);
  ASSERT_FALSE(odd);
  EXPECT_EQ(odd.error_value().code(), errc::protocol);
  ::close(empty);
  EXPECT_FALSE(export_view::map(-1));
  EXPECT_EQ(export_table::create(0).error_value().code(), errc::invalid_argument);
}

}  // namespace
}  // namespace atomr::cluster::detail
