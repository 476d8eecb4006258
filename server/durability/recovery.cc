// SPDX-License-Identifier: Apache-2.0
#include "server/durability/recovery.h"

#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <sstream>
#include <unordered_set>

#include "server/durability/data_dir.h"
#include "server/durability/log_reader.h"
#include "server/durability/log_record.h"
#include "server/durability/snapshot_reader.h"

namespace rkv::wal {
namespace {

// A log file is mapped (Env::OpenReadOnly: page cache, not heap); each is bounded by
// --snapshot_log_size plus what is written while a snapshot runs, far below this.
constexpr uint64_t kMaxLogFile = uint64_t{16} << 30;
// Sequences count writes from 1; one at or beyond 2^63 can only come from a damaged or planted
// file (and would let the counter wrap).
constexpr uint64_t kMaxSequence = uint64_t{1} << 63;

Status Corrupt(const std::string& path, uint64_t offset, const std::string& why) {
  return Status(Code::kIoError, path + ": corrupt at offset " + std::to_string(offset) + ": " +
                                    why + " (kvserver --recover=truncate keeps what precedes it)");
}

Status Apply(Table* table, RecordType type, std::string_view key, std::string_view value,
             const std::string& where) {
  Status s;
  if (type == RecordType::kPut) {
    s = table->Put(key, value);
  } else {
    s = table->Delete(key);
    if (s.IsNotFound()) s = Status::Ok();
  }
  if (s.ok()) return s;
  return Status(s.code(), where + ": cannot load into the table: " + s.message() +
                              " (is --memory smaller than when the data was written?)");
}

constexpr char kSeedMagic[8] = {'R', 'K', 'V', 'S', 'E', 'E', 'D', '1'};

}  // namespace

Status LoadOrCreateSeed(Env* env, const std::string& dir, uint64_t proposed, uint64_t* seed) {
  const std::string path = JoinPath(dir, "SEED");
  std::vector<std::string> names;
  Status s = env->GetChildren(dir, &names);
  if (!s.ok()) return s;
  std::string bytes;
  if (std::find(names.begin(), names.end(), "SEED") != names.end()) {
    s = env->ReadFile(path, 64, &bytes);
    if (!s.ok()) return s;
    uint64_t sum, value;
    uint32_t version;
    if (bytes.size() != 32 || std::memcmp(bytes.data(), kSeedMagic, 8) != 0)
      return Status(Code::kIoError, path + ": not a seed file (32 bytes starting RKVSEED1)");
    std::memcpy(&version, bytes.data() + 8, 4);
    std::memcpy(&value, bytes.data() + 16, 8);
    std::memcpy(&sum, bytes.data() + 24, 8);
    if (version != 1 || sum != XXH3_64bits_withSeed(bytes.data(), 24, kLogSeed))
      return Status(Code::kIoError, path + ": corrupt at offset 0: bad version or checksum");
    *seed = value;
    return Status::Ok();
  }
  // First start on this directory.
  bytes.assign(kSeedMagic, 8);
  uint32_t version = 1, reserved = 0;
  bytes.append(reinterpret_cast<const char*>(&version), 4);
  bytes.append(reinterpret_cast<const char*>(&reserved), 4);
  bytes.append(reinterpret_cast<const char*>(&proposed), 8);
  uint64_t sum = XXH3_64bits_withSeed(bytes.data(), 24, kLogSeed);
  bytes.append(reinterpret_cast<const char*>(&sum), 8);
  const std::string tmp = path + ".new";
  (void)env->RemoveFile(tmp);
  std::unique_ptr<WritableFile> f;
  s = env->NewWritableFile(tmp, &f);
  if (s.ok()) s = f->Append(bytes);
  if (s.ok()) s = f->Sync();
  f.reset();
  if (s.ok()) s = env->RenameFile(tmp, path);
  if (s.ok()) s = env->SyncDir(dir);
  if (!s.ok()) return s;
  *seed = proposed;
  return Status::Ok();
}

std::string RecoveryReport::Summary() const {
  std::ostringstream o;
  o << "recovered " << (snapshot.empty() ? "no snapshot" : snapshot) << " (" << snapshot_entries
    << " entries, covers sequence " << covered << ") and " << log_records << " log records from "
    << log_files << " log files (" << log_skipped << " already in the snapshot), " << bytes_read
    << " bytes read in " << seconds << " s; next sequence " << next_sequence;
  return o.str();
}

Status Recover(Env* env, const std::string& dir, bool truncate_corruption, Table* table,
               RecoveryReport* report) {
  const auto start = std::chrono::steady_clock::now();
  *report = RecoveryReport();
  DataDirListing listing;
  Status s = ListDataDir(env, dir, &listing);
  if (!s.ok()) return s;
  for (const std::string& t : listing.temporaries) {
    s = env->RemoveFile(dir + "/" + t);
    if (!s.ok()) return s;
    report->warnings.push_back("removed " + t + " (an unfinished snapshot)");
  }

  // Numbers in use, discarded files included, so that new ones never repeat them.
  uint64_t max_generation = 0, max_sequence = 0;
  for (const std::string& name : listing.unknown) {
    constexpr std::string_view kDiscarded = ".discarded";
    uint64_t n;
    if (name.size() <= kDiscarded.size() ||
        name.compare(name.size() - kDiscarded.size(), kDiscarded.size(), kDiscarded) != 0)
      continue;
    const std::string base = name.substr(0, name.size() - kDiscarded.size());
    if (ParseLogFileName(base, &n)) max_generation = std::max(max_generation, n);
    if (ParseSnapshotFileName(base, &n)) max_sequence = std::max(max_sequence, n);
  }
  for (const auto& f : listing.snapshots) max_sequence = std::max(max_sequence, f.number);
  if (max_sequence >= kMaxSequence)
    return Status(Code::kIoError, dir + ": a snapshot is numbered " + std::to_string(max_sequence) +
                                      ", beyond any sequence");

  // The newest snapshot's header: what it covers.
  uint64_t covered = 0;
  std::unique_ptr<SnapshotReader> snapshot;
  std::string snapshot_path;
  if (!listing.snapshots.empty()) {
    const DataDirListing::File& snap = listing.snapshots.back();
    snapshot_path = JoinPath(dir, snap.name);
    s = SnapshotReader::Open(env, snapshot_path, &snapshot);
    if (!s.ok()) {
      if (!truncate_corruption) return s;
      report->warnings.push_back("snapshot " + snap.name + " unreadable, renamed to " + snap.name +
                                 ".discarded: " + s.message());
      s = env->RenameFile(snapshot_path, snapshot_path + ".discarded");
      if (!s.ok()) return s;
      snapshot.reset();
    } else {
      covered = snapshot->covered_sequence();
      report->snapshot = snap.name;
      report->covered = covered;
    }
  }

  // Keys written after the snapshot's sequence: their snapshot entries are skipped, the log
  // alone rebuilds them. (The snapshot was scanned while writes went on; loading both could hold
  // a key deleted during the scan and the one inserted in its place, more than the table ever
  // held at once.)
  // Also the first sequence in each log (0: none readable), which tells obsolete logs apart.
  std::unordered_set<std::string> rewritten;
  std::vector<uint64_t> first_sequence(listing.logs.size(), 0);
  // Without a snapshot neither matters (nothing to skip, nothing obsolete): no pre-scan.
  for (size_t i = 0; snapshot && i < listing.logs.size(); ++i) {
    std::unique_ptr<ReadOnlyFile> file;
    if (!env->OpenReadOnly(JoinPath(dir, listing.logs[i].name), kMaxLogFile, &file).ok()) continue;
    const std::string_view bytes = file->data();
    if (bytes.size() < kFileHeaderSize) continue;
    LogReader reader(bytes.substr(kFileHeaderSize), kFileHeaderSize);
    LogRecord rec;
    while (reader.Next(&rec) == LogReader::Result::kRecord) {
      if (first_sequence[i] == 0) first_sequence[i] = rec.sequence;
      if (rec.sequence > covered) rewritten.emplace(rec.key);
    }
  }
  // Log i is obsolete when a later log starts at or before covered + 1: sequences grow from one
  // log to the next, so every record of log i is in the snapshot. (Its file is deleted once the
  // snapshot is durable; a crash can leave it.) Damage there loses nothing.
  auto obsolete = [&](size_t i) {
    for (size_t j = i + 1; j < listing.logs.size(); ++j)
      if (first_sequence[j] != 0) return first_sequence[j] <= covered + 1;
    return false;
  };

  if (snapshot) {
    for (;;) {
      std::string_view key, value;
      SnapshotReader::Result res = snapshot->Next(&key, &value);
      if (res == SnapshotReader::Result::kEnd) break;
      if (res == SnapshotReader::Result::kCorrupt) {
        if (!truncate_corruption) return Status(Code::kIoError, snapshot->error());
        report->warnings.push_back("kept the " + std::to_string(report->snapshot_entries) +
                                   " entries before the defect: " + snapshot->error());
        break;
      }
      ++report->snapshot_entries;
      if (rewritten.count(std::string(key)) != 0) continue;
      s = Apply(table, RecordType::kPut, key, value, snapshot_path);
      if (!s.ok()) return s;
    }
    report->bytes_read += snapshot->offset();
  }

  // The logs, in generation order.
  uint64_t last_seq = covered;
  for (size_t i = 0; i < listing.logs.size(); ++i) {
    const DataDirListing::File& log = listing.logs[i];
    max_generation = std::max(max_generation, log.number);
    const std::string path = dir + "/" + log.name;
    std::unique_ptr<ReadOnlyFile> file;
    s = env->OpenReadOnly(path, kMaxLogFile, &file);
    if (!s.ok()) return s;
    const std::string_view bytes = file->data();
    report->bytes_read += bytes.size();
    ++report->log_files;
    uint64_t id = 0;
    std::string error;
    uint64_t good_end = 0;  // where the valid data ends
    std::string defect;     // corruption found (empty: none)
    if (bytes.size() < kFileHeaderSize) {
      // A crash while the file was being created: nothing in it was ever acknowledged.
      report->warnings.push_back(log.name + ": torn file header (" + std::to_string(bytes.size()) +
                                 " bytes) dropped");
      file.reset();
      s = env->RemoveFile(path);
      if (!s.ok()) return s;
      continue;
    }
    if (!DecodeFileHeader(bytes.substr(0, kFileHeaderSize), &id, &error)) {
      defect = "file header: " + error;
    } else {
      LogReader reader(bytes.substr(kFileHeaderSize), kFileHeaderSize);
      for (;;) {
        LogRecord rec;
        LogReader::Result res = reader.Next(&rec);
        if (res == LogReader::Result::kEnd) {
          good_end = bytes.size();
          break;
        }
        if (res == LogReader::Result::kTornTail) {
          good_end = reader.offset();
          report->warnings.push_back(log.name + ": torn record at offset " +
                                     std::to_string(good_end) + " (a crash during an append), " +
                                     std::to_string(reader.remaining()) +
                                     " bytes dropped; it was never acknowledged");
          file.reset();
          s = env->TruncateFile(path, good_end);
          if (!s.ok()) return s;
          break;
        }
        if (res == LogReader::Result::kCorrupt) {
          good_end = reader.offset();
          defect = reader.error();
          break;
        }
        if (rec.sequence >= kMaxSequence) {
          good_end = reader.offset() - EncodedSize(rec.key.size(), rec.value.size());
          defect = "sequence " + std::to_string(rec.sequence) + " is out of range";
          break;
        }
        if (rec.sequence <= covered) {
          ++report->log_skipped;
          continue;
        }
        if (rec.sequence <= last_seq) {
          good_end = reader.offset() - EncodedSize(rec.key.size(), rec.value.size());
          defect = "sequence " + std::to_string(rec.sequence) + " does not follow " +
                   std::to_string(last_seq);
          break;
        }
        last_seq = rec.sequence;
        s = Apply(table, rec.type, rec.key, rec.value,
                  path + " offset " + std::to_string(reader.offset()));
        if (!s.ok()) return s;
        ++report->log_records;
      }
    }
    if (defect.empty()) continue;
    const uint64_t size = bytes.size();
    file.reset();  // unmapped before the file is cut or renamed
    if (obsolete(i)) {
      report->warnings.push_back(
          log.name + ": corrupt at offset " + std::to_string(good_end) + " (" + defect +
          "), but every record in it is in the snapshot (covers " + std::to_string(covered) +
          "): renamed to " + log.name + ".discarded, nothing lost");
      s = env->RenameFile(path, path + ".discarded");
      if (!s.ok()) return s;
      continue;
    }
    if (!truncate_corruption) return Corrupt(path, good_end, defect);
    report->warnings.push_back(log.name + ": corrupt at offset " + std::to_string(good_end) + " (" +
                               defect + "): cut there, " + std::to_string(size - good_end) +
                               " bytes dropped");
    if (good_end < kFileHeaderSize) {
      s = env->RenameFile(path, path + ".discarded");
    } else {
      s = env->TruncateFile(path, good_end);
    }
    if (!s.ok()) return s;
    for (size_t j = i + 1; j < listing.logs.size(); ++j) {
      const std::string later = dir + "/" + listing.logs[j].name;
      max_generation = std::max(max_generation, listing.logs[j].number);
      s = env->RenameFile(later, later + ".discarded");
      if (!s.ok()) return s;
      report->warnings.push_back(listing.logs[j].name + ": follows the damage, renamed to " +
                                 listing.logs[j].name + ".discarded");
    }
    break;
  }
  s = env->SyncDir(dir);
  if (!s.ok()) return s;
  report->next_sequence = std::max(last_seq, max_sequence) + 1;
  report->next_generation = max_generation + 1;
  report->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status::Ok();
}

}  // namespace rkv::wal
