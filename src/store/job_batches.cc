#include "store/job_batches.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>
#include <utility>

#include "store/binary.h"

namespace arbiter::store {

Status JobError(JobId id, const Status& st) {
  return Status::Internal(fmt::format("store: job {}: {}", id, st.message()));
}

Status DecodeJobRecords(std::string_view spec, std::string_view allocation, StoredJob& job) {
  if (Status st = DecodeJobSpecBinary(spec, job.spec, "spec"); !st.ok()) {
    return JobError(job.id, st);
  }
  if (!allocation.empty()) {
    if (Status st = DecodeAllocationBinary(allocation, job.status.allocation, "allocation");
        !st.ok()) {
      return JobError(job.id, st);
    }
  }
  return Status::Ok();
}

Status ReadJobBatches(const std::function<void(JobBatch&)>& fill, const LoadOptions& options,
                      std::vector<StoredJob>& jobs) {
  const std::size_t workers = std::clamp<std::size_t>(std::thread::hardware_concurrency(), 1, 8);
  auto read = [&](JobBatch& b) {
    b.jobs.clear();
    b.arena.clear();
    b.records.clear();
    b.jobs.reserve(kJobBatch);
    fill(b);
  };
  std::vector<Status> errors(workers);
  auto process = [&](JobBatch& b) -> Status {
    const std::string_view all(b.arena);
    auto decode = [&](std::size_t w) {
      // Worker w takes a contiguous share; the first error of the share is kept.
      const std::size_t n = b.records.size();
      for (std::size_t i = n * w / workers; i < n * (w + 1) / workers; ++i) {
        const JobBatch::Records& r = b.records[i];
        Status st = DecodeJobRecords(all.substr(r.spec_begin, r.spec_end - r.spec_begin),
                                     all.substr(r.spec_end, r.alloc_end - r.spec_end), b.jobs[i]);
        if (!st.ok()) {
          errors[w] = std::move(st);
          return;
        }
      }
    };
    if (workers == 1 || b.records.size() < 1024) {
      for (std::size_t w = 0; w < workers; ++w) decode(w);
    } else {
      std::vector<std::thread> helpers;
      for (std::size_t w = 1; w < workers; ++w) helpers.emplace_back(decode, w);
      decode(0);
      for (std::thread& h : helpers) h.join();
    }
    for (const Status& e : errors) {
      if (!e.ok()) return e;
    }
    if (options.each_batch) return options.each_batch(b.jobs);
    for (StoredJob& job : b.jobs) jobs.push_back(std::move(job));
    return Status::Ok();
  };

  JobBatch current, next;
  read(current);
  for (;;) {
    if (!current.status.ok()) return current.status;
    std::thread reader;
    if (!current.last) reader = std::thread([&] { read(next); });
    const Status st = process(current);
    if (reader.joinable()) reader.join();
    if (!st.ok()) return st;
    if (current.last) return Status::Ok();
    std::swap(current, next);
  }
}

}  // namespace arbiter::store
