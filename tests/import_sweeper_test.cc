// SPDX-License-Identifier: Apache-2.0
// The abandoned-import rule (server/cluster/import_sweeper.h, ImportSweeper::Abandoned) and the
// import tickets it relies on (OwnershipTable::BeginImport, DropImport): a copy under way to
// this server keeps its slots, and so does a map that names this server; anything else (no
// record, a finished, failed or other server's record, a copy of other slots) gives them
// back; a new import of the slot, or a word a map changed, makes DropImport a no-op.
#include "server/cluster/import_sweeper.h"

#include <gtest/gtest.h>

#include <vector>

#include "common/cluster/ownership_word.h"

namespace rkv::cluster {
namespace {

constexpr uint32_t kMe = 7;

SlotMap MapNaming(uint32_t slot, uint16_t role) {
  SlotMap m;
  EXPECT_TRUE(SlotMap::Create(8, 2, 5, &m).ok());
  const uint16_t a = m.AddServer({1, "10.0.0.1", 7001});
  const uint16_t b = m.AddServer({2, "10.0.0.2", 7002});
  const uint16_t me = m.AddServer({kMe, "10.0.0.7", 7007});
  for (uint32_t s = 0; s < 8; ++s) {
    EXPECT_TRUE(m.Assign(s, 0, a));
    EXPECT_TRUE(m.Assign(s, 1, b));
  }
  if (role != 0xffff) {
    EXPECT_TRUE(m.Assign(slot, role, kUnassigned));
    EXPECT_TRUE(m.Assign(slot, role, me));
  }
  return m;
}

MigrationRecord Copy(uint32_t to, std::vector<uint32_t> slots,
                     MigrationRecord::State st = MigrationRecord::kCopy) {
  MigrationRecord r;
  r.state = st;
  r.kind = MigrationRecord::kAddReplica;
  r.from_id = 1;
  r.to_id = to;
  r.slots = std::move(slots);
  return r;
}

TEST(ImportSweeper, ACopyUnderWayToThisServerKeepsItsSlots) {
  const SlotMap map = MapNaming(3, 0xffff);
  const MigrationRecord rec = Copy(kMe, {2, 3});
  EXPECT_FALSE(ImportSweeper::Abandoned(3, kMe, &rec, &map));
  EXPECT_TRUE(ImportSweeper::Abandoned(4, kMe, &rec, &map));  // not in the record
}

TEST(ImportSweeper, ARecordThatIsNotThisServersCopyGivesTheSlotBack) {
  const SlotMap map = MapNaming(3, 0xffff);
  EXPECT_TRUE(ImportSweeper::Abandoned(3, kMe, nullptr, &map));  // no record at all
  for (MigrationRecord r : {Copy(kMe, {3}, MigrationRecord::kFailed),
                            Copy(kMe, {3}, MigrationRecord::kDone), Copy(2, {3})})
    EXPECT_TRUE(ImportSweeper::Abandoned(3, kMe, &r, &map));
}

TEST(ImportSweeper, AMapThatNamesThisServerKeepsTheSlot) {
  const MigrationRecord done = Copy(kMe, {3}, MigrationRecord::kDone);
  for (uint16_t role : {0, 1}) {
    const SlotMap map = MapNaming(3, role);
    EXPECT_FALSE(ImportSweeper::Abandoned(3, kMe, &done, &map)) << role;
    EXPECT_FALSE(ImportSweeper::Abandoned(3, kMe, nullptr, &map)) << role;
    EXPECT_TRUE(ImportSweeper::Abandoned(4, kMe, nullptr, &map)) << role;
  }
  EXPECT_FALSE(ImportSweeper::Abandoned(3, kMe, nullptr, nullptr));  // no map: no judgement
  const SlotMap map = MapNaming(3, 0xffff);
  EXPECT_FALSE(ImportSweeper::Abandoned(99, kMe, nullptr, &map));  // out of range
}

TEST(ImportSweeper, DropImportReleasesOnlyTheImportItSaw) {
  std::vector<uint64_t> words(4, 0);
  OwnershipTable t(words.data(), 4, 1);
  const uint64_t free = OwnerWord(3, SlotState::kNotOwned);
  t.Set(1, free);
  ASSERT_TRUE(t.BeginImport(1, 42, free));
  EXPECT_EQ(t.Importer(1), 42u);
  const uint64_t word = t.Word(1), first = t.ImportTicket(1);
  EXPECT_EQ(WordState(word), SlotState::kImporting);
  EXPECT_EQ(WordEpoch(word), 3u);
  // A second import of the slot from the same connection: a new ticket, the same word.
  ASSERT_TRUE(t.BeginImport(1, 42, word));
  EXPECT_NE(t.ImportTicket(1), first);
  EXPECT_EQ(t.Word(1), word);
  EXPECT_FALSE(t.DropImport(1, first, word, free));
  EXPECT_EQ(t.Word(1), word);
  // A map made the slot OWNED meanwhile: neither a BEGIN checked before it nor the drop.
  const uint64_t second = t.ImportTicket(1);
  t.Set(1, OwnerWord(4, SlotState::kOwned));
  EXPECT_FALSE(t.BeginImport(1, 43, word));
  EXPECT_EQ(t.ImportTicket(1), second);
  EXPECT_FALSE(t.DropImport(1, second, word, free));
  EXPECT_EQ(WordState(t.Word(1)), SlotState::kOwned);
  // The import it saw, unchanged: released.
  t.Set(1, word);
  EXPECT_TRUE(t.DropImport(1, second, word, free));
  EXPECT_EQ(t.Word(1), free);
  EXPECT_EQ(t.Importer(1), 0u);
  // Only an IMPORTING word is ever dropped.
  EXPECT_FALSE(t.DropImport(1, 0, free, free));
  EXPECT_FALSE(t.DropImport(9, 0, word, free));
}

}  // namespace
}  // namespace rkv::cluster
