// Group commit, shared by the SQLite and the PostgreSQL store (docs/design/store.md): every
// write call becomes an Op queued for one writer thread, which takes everything queued (at most
// max_batch), hands the batch to the store's run_batch (one transaction, each Op inside a
// savepoint, then COMMIT), and only then wakes the callers. While one batch commits, the next
// one gathers, so batches grow with the load and a lone call commits at once.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "arbiter/status.h"
#include "store/store.h"

namespace arbiter::store {

class GroupCommit {
 public:
  // A write call waiting for the writer. `body` runs inside the batch's transaction (on the
  // writer thread) and sets `seq` to the last event seq it wrote; run_batch sets `status`.
  struct Op {
    std::function<Status(std::uint64_t& seq)> body;
    Status status;
    // For the store's run_batch: set when the Op is left out of a retried transaction.
    bool excluded = false;
    // GroupCommit's own: a waiting caller (Execute) is woken through `cv` once `done`; an
    // asynchronous one (ExecuteAsync) is told through `on_done`, and its Op is the writer's.
    bool done = false;
    std::condition_variable cv;
    std::function<void(Status)> on_done;
  };
  // Runs one batch in one transaction and sets each Op's status; on the writer thread.
  using RunBatch = std::function<void(std::span<Op* const> batch)>;

  GroupCommit() = default;
  GroupCommit(const GroupCommit&) = delete;
  GroupCommit& operator=(const GroupCommit&) = delete;
  ~GroupCommit() { Stop(); }

  // Starts the writer thread.
  void Start(std::size_t max_batch, RunBatch run_batch);
  // Commits what is queued, then stops the writer; later calls fail ("store: closed").
  void Stop();

  // Queues `body` and waits until its transaction has committed (or failed).
  Status Execute(std::function<Status(std::uint64_t& seq)> body);
  // Queues `body`; `done` runs on the writer thread once its transaction has committed (or
  // failed).
  void ExecuteAsync(std::function<Status(std::uint64_t& seq)> body,
                    std::function<void(Status)> done);

  // The store's submissions over this writer, the same for every store: the specs are checked
  // and encoded on the caller's thread, then `insert` (the store's own, on the writer thread,
  // inside the batch's transaction) records the jobs and their events.
  using InsertJobs = std::function<Status(const std::vector<job::JobSpec>& specs,
                                          const std::vector<std::string>& encoded,
                                          std::vector<Submitted>& out, std::uint64_t& seq)>;
  Result<Submitted> Submit(job::JobSpec spec, const InsertJobs& insert);
  void SubmitAsync(job::JobSpec spec, InsertJobs insert,
                   std::function<void(Result<Submitted>)> done);
  Result<std::vector<Submitted>> SubmitBatch(std::vector<job::JobSpec> specs,
                                             const InsertJobs& insert);

 private:
  void WriterLoop();

  std::size_t max_batch_ = 1024;
  RunBatch run_batch_;
  std::mutex mu_;  // queue_, stop_, Op::done
  std::condition_variable work_cv_;
  std::deque<Op*> queue_;
  bool stop_ = false;
  std::thread writer_;
};

}  // namespace arbiter::store
