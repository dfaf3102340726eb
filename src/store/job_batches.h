// Load's pipeline of job batches, shared by the SQLite and the PostgreSQL store: while a helper
// thread reads the rows of the next batch (their columns, their binary records copied into the
// batch), the loading thread decodes the records of the current batch on every core and hands
// it on (LoadOptions::each_batch, or appended to the snapshot's jobs).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "arbiter/status.h"
#include "store/store.h"

namespace arbiter::store {

// At most this many jobs a batch.
inline constexpr std::size_t kJobBatch = 8192;

struct JobBatch {
  std::vector<StoredJob> jobs;  // the columns read, the records not yet decoded
  std::string arena;            // the records, back to back
  struct Records {
    std::size_t spec_begin, spec_end, alloc_end;  // offsets into `arena`
  };
  std::vector<Records> records;  // one per job
  bool last = false;             // no rows after these
  Status status;                 // a read that failed

  // The binary records of the job last added to `jobs` (allocation empty when none).
  void AddRecords(std::string_view spec, std::string_view allocation) {
    Records& r = records.emplace_back();
    r.spec_begin = arena.size();
    arena.append(spec);
    r.spec_end = arena.size();
    arena.append(allocation);
    r.alloc_end = arena.size();
  }
};

// `fill` reads the next rows (at most kJobBatch) into an empty batch, setting `last` after the
// last row or `status` on an error. The batches go to options.each_batch, or to `jobs`.
Status ReadJobBatches(const std::function<void(JobBatch&)>& fill, const LoadOptions& options,
                      std::vector<StoredJob>& jobs);

// A stored record that does not read back: "store: job N: PROBLEM" (a broken invariant).
Status JobError(JobId id, const Status& st);
// A job's binary records (store/binary.h) into `job`; errors name the job, field and byte.
Status DecodeJobRecords(std::string_view spec, std::string_view allocation, StoredJob& job);

}  // namespace arbiter::store
