// SPDX-License-Identifier: Apache-2.0
// The abandoned-import rule (server/cluster/import_sweeper.h, ImportSweeper::Abandoned) and the
// import tickets it relies on (OwnershipTable::BeginImports, BeginImportWrite, BeginPurge,
// DropImport): a copy under way to this server keeps its slots, and so does a map that names
// this server; anything else (no record, a finished, failed or other server's record, a copy
// of other slots) gives them back; a new import of the slot, or a word a map changed, makes
// DropImport a no-op; BeginImports changes all of its slots or none; a taken-over import's
// writes and purge batches are refused, and admitted ones hold WaitIdle.
#include "server/cluster/import_sweeper.h"

#include <gtest/gtest.h>

#include <chrono>
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

bool Begin(OwnershipTable* t, uint32_t slot, uint32_t qp, uint64_t word) {
  OwnershipTable::ImportBegun begun;
  return t->BeginImports({slot}, {word}, qp, &begun);
}

TEST(ImportSweeper, DropImportReleasesOnlyTheImportItSaw) {
  std::vector<uint64_t> words(4, 0);
  OwnershipTable t(words.data(), 4, 1);
  const uint64_t free = OwnerWord(3, SlotState::kNotOwned);
  t.Set(1, free);
  ASSERT_TRUE(Begin(&t, 1, 42, free));
  EXPECT_EQ(t.Importer(1), 42u);
  const uint64_t word = t.Word(1), first = t.ImportTicket(1);
  EXPECT_NE(first, 0u);
  EXPECT_EQ(WordState(word), SlotState::kImporting);
  EXPECT_EQ(WordEpoch(word), 3u);
  // A second import of the slot from the same connection: a new ticket, the same word.
  ASSERT_TRUE(Begin(&t, 1, 42, word));
  EXPECT_NE(t.ImportTicket(1), first);
  EXPECT_EQ(t.Word(1), word);
  EXPECT_FALSE(t.DropImport(1, first, word, free));
  EXPECT_EQ(t.Word(1), word);
  // A map made the slot OWNED meanwhile: neither a BEGIN checked before it nor the drop.
  const uint64_t second = t.ImportTicket(1);
  t.Set(1, OwnerWord(4, SlotState::kOwned));
  EXPECT_FALSE(Begin(&t, 1, 43, word));
  EXPECT_EQ(t.ImportTicket(1), second);
  EXPECT_EQ(t.Importer(1), 42u);
  EXPECT_FALSE(t.DropImport(1, second, word, free));
  EXPECT_EQ(WordState(t.Word(1)), SlotState::kOwned);
  // The import it saw, unchanged: released.
  t.Set(1, word);
  EXPECT_TRUE(t.DropImport(1, second, word, free));
  EXPECT_EQ(t.Word(1), free);
  EXPECT_EQ(t.ImportTicket(1), 0u);
  // Only an IMPORTING word, and only a ticket given, is ever dropped.
  EXPECT_FALSE(t.DropImport(1, 0, free, free));
  EXPECT_FALSE(t.DropImport(9, 0, word, free));
}

TEST(ImportSweeper, BeginImportsIsAllOrNothing) {
  std::vector<uint64_t> words(4, 0);
  OwnershipTable t(words.data(), 4, 1);
  const uint64_t free = OwnerWord(2, SlotState::kNotOwned);
  for (uint32_t s = 0; s < 4; ++s) t.Set(s, free);
  ASSERT_TRUE(Begin(&t, 2, 7, free));  // an import of slot 2 under way
  const uint64_t importing = t.Word(2), t2 = t.ImportTicket(2);
  t.Set(3, OwnerWord(3, SlotState::kBackup));  // a map gave slot 3 a role since it was checked
  OwnershipTable::ImportBegun begun;
  EXPECT_FALSE(t.BeginImports({0, 2, 3}, {free, importing, free}, 9, &begun));
  EXPECT_TRUE(begun.tickets.empty());
  EXPECT_EQ(t.Word(0), free);
  EXPECT_EQ(t.ImportTicket(0), 0u);
  EXPECT_EQ(t.Word(2), importing);  // the import under way keeps its connection and ticket
  EXPECT_EQ(t.ImportTicket(2), t2);
  EXPECT_EQ(t.Importer(2), 7u);
  EXPECT_EQ(WordState(t.Word(3)), SlotState::kBackup);
  ASSERT_TRUE(t.BeginImports({0, 2}, {free, importing}, 9, &begun));
  ASSERT_EQ(begun.tickets.size(), 2u);
  EXPECT_NE(begun.tickets[0], begun.tickets[1]);
  EXPECT_EQ(t.ImportTicket(2), begun.tickets[1]);
  EXPECT_EQ(t.Importer(0), 9u);
  // That BEGIN refused after all (its record was no longer etcd's): undone, and the import it
  // took over goes on; a slot another BEGIN took since stays with it.
  ASSERT_TRUE(Begin(&t, 0, 11, t.Word(0)));
  const uint64_t newer = t.ImportTicket(0);
  t.UndoImports(begun);
  EXPECT_EQ(t.Word(2), importing);
  EXPECT_EQ(t.ImportTicket(2), t2);
  EXPECT_EQ(t.Importer(2), 7u);
  EXPECT_EQ(t.ImportTicket(0), newer);
  EXPECT_EQ(t.Importer(0), 11u);
  EXPECT_EQ(WordState(t.Word(0)), SlotState::kImporting);
  // Undoing an import of a NOT_OWNED slot gives the word back.
  ASSERT_TRUE(t.BeginImports({1}, {free}, 12, &begun));
  t.UndoImports(begun);
  EXPECT_EQ(t.Word(1), free);
  EXPECT_EQ(t.ImportTicket(1), 0u);
}

TEST(ImportSweeper, ImportWritesAndPurgesHoldTheSlotOnlyForTheirImport) {
  std::vector<uint64_t> words(4, 0);
  OwnershipTable t(words.data(), 4, 1);
  const uint64_t free = OwnerWord(2, SlotState::kNotOwned);
  t.Set(1, free);
  EXPECT_FALSE(t.BeginImportWrite(1, 5));  // not IMPORTING
  ASSERT_TRUE(Begin(&t, 1, 5, free));
  const uint64_t first = t.ImportTicket(1), word = t.Word(1);
  EXPECT_FALSE(t.BeginImportWrite(1, 6));  // another connection
  ASSERT_TRUE(t.BeginImportWrite(1, 5));   // counted in flight: WaitIdle waits for it
  EXPECT_FALSE(t.WaitIdle(1, std::chrono::steady_clock::now()));
  t.EndWrite(1);
  EXPECT_TRUE(t.WaitIdle(1, std::chrono::steady_clock::now()));
  ASSERT_TRUE(t.BeginPurge(1, first));
  EXPECT_FALSE(t.WaitIdle(1, std::chrono::steady_clock::now()));  // a newer BEGIN waits for it
  t.EndWrite(1);
  ASSERT_TRUE(Begin(&t, 1, 6, word));  // taken over: the older purge stops, its writes too
  EXPECT_FALSE(t.BeginPurge(1, first));
  EXPECT_FALSE(t.BeginImportWrite(1, 5));
  EXPECT_TRUE(t.BeginImportWrite(1, 6));
  t.EndWrite(1);
  EXPECT_TRUE(t.DropImport(1, t.ImportTicket(1), word, free));
  EXPECT_FALSE(t.BeginImportWrite(1, 6));  // released: no migration write lands any more
  EXPECT_TRUE(t.WaitIdle(1, std::chrono::steady_clock::now()));
}

}  // namespace
}  // namespace rkv::cluster
