#include "server/durability/recovery.h"

#include <chrono>
#include <sstream>

#include "server/durability/data_dir.h"
#include "server/durability/log_reader.h"
#include "server/durability/log_record.h"
#include "server/durability/snapshot_reader.h"

namespace rkv::wal {
namespace {

constexpr uint64_t kMaxLogFile = uint64_t{1} << 40;  // larger than any log we write

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

}  // namespace

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

  // The newest snapshot.
  uint64_t covered = 0;
  if (!listing.snapshots.empty()) {
    const DataDirListing::File& snap = listing.snapshots.back();
    const std::string path = dir + "/" + snap.name;
    std::unique_ptr<SnapshotReader> r;
    s = SnapshotReader::Open(env, path, &r);
    if (!s.ok()) {
      if (!truncate_corruption) return s;
      report->warnings.push_back("snapshot " + snap.name + " unreadable, ignored: " + s.message());
    } else {
      covered = r->covered_sequence();
      report->snapshot = snap.name;
      report->covered = covered;
      for (;;) {
        std::string_view key, value;
        SnapshotReader::Result res = r->Next(&key, &value);
        if (res == SnapshotReader::Result::kEnd) break;
        if (res == SnapshotReader::Result::kCorrupt) {
          if (!truncate_corruption) return Status(Code::kIoError, r->error());
          report->warnings.push_back("kept the " + std::to_string(report->snapshot_entries) +
                                     " entries before the defect: " + r->error());
          break;
        }
        s = Apply(table, RecordType::kPut, key, value, path);
        if (!s.ok()) return s;
        ++report->snapshot_entries;
      }
      report->bytes_read += r->offset();
    }
  }

  // The logs, in generation order.
  uint64_t last_seq = covered;
  uint64_t max_generation = 0;
  for (size_t i = 0; i < listing.logs.size(); ++i) {
    const DataDirListing::File& log = listing.logs[i];
    max_generation = std::max(max_generation, log.number);
    const std::string path = dir + "/" + log.name;
    std::string bytes;
    s = env->ReadFile(path, kMaxLogFile, &bytes);
    if (!s.ok()) return s;
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
      s = env->RemoveFile(path);
      if (!s.ok()) return s;
      continue;
    }
    if (!DecodeFileHeader(std::string_view(bytes).substr(0, kFileHeaderSize), &id, &error)) {
      defect = "file header: " + error;
    } else {
      LogReader reader(std::string_view(bytes).substr(kFileHeaderSize), kFileHeaderSize);
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
          s = env->TruncateFile(path, good_end);
          if (!s.ok()) return s;
          break;
        }
        if (res == LogReader::Result::kCorrupt) {
          good_end = reader.offset();
          defect = reader.error();
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
    if (!truncate_corruption) return Corrupt(path, good_end, defect);
    report->warnings.push_back(log.name + ": corrupt at offset " + std::to_string(good_end) + " (" +
                               defect + "): cut there, " + std::to_string(bytes.size() - good_end) +
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
  report->next_sequence = last_seq + 1;
  report->next_generation = max_generation + 1;
  report->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return Status::Ok();
}

}  // namespace rkv::wal
