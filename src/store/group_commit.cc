#include "store/group_commit.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "store/binary.h"
#include "store/internal.h"

namespace arbiter::store {

void GroupCommit::Start(std::size_t max_batch, RunBatch run_batch) {
  max_batch_ = std::max<std::size_t>(1, max_batch);
  run_batch_ = std::move(run_batch);
  writer_ = std::thread([this] { WriterLoop(); });
}

void GroupCommit::Stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_one();
  if (writer_.joinable()) writer_.join();  // the writer commits what is queued before it stops
}

Status GroupCommit::Execute(std::function<Status(std::uint64_t& seq)> body) {
  Op op;
  op.body = std::move(body);
  std::unique_lock lock(mu_);
  if (stop_ || !writer_.joinable()) return Status::Unavailable("store: closed");
  queue_.push_back(&op);
  work_cv_.notify_one();
  op.cv.wait(lock, [&] { return op.done; });
  return op.status;
}

void GroupCommit::ExecuteAsync(std::function<Status(std::uint64_t& seq)> body,
                               std::function<void(Status)> done) {
  auto op = std::make_unique<Op>();
  op->body = std::move(body);
  op->on_done = std::move(done);
  {
    std::lock_guard lock(mu_);
    if (!stop_ && writer_.joinable()) {
      queue_.push_back(op.release());
      work_cv_.notify_one();
      return;
    }
  }
  op->on_done(Status::Unavailable("store: closed"));
}

void GroupCommit::WriterLoop() {
  std::vector<Op*> batch;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and nothing left
      while (!queue_.empty() && batch.size() < max_batch_) {
        batch.push_back(queue_.front());
        queue_.pop_front();
      }
    }
    run_batch_(batch);
    // The asynchronous callers first (their Ops are the writer's), then the waiting ones,
    // notified under the lock: a caller may return (and free its Op) as soon as it is released.
    for (Op*& op : batch) {
      if (!op->on_done) continue;
      std::unique_ptr<Op> owned(op);
      op = nullptr;
      owned->on_done(owned->status);
    }
    {
      std::lock_guard lock(mu_);
      for (Op* op : batch) {
        if (op == nullptr) continue;
        op->done = true;
        op->cv.notify_one();
      }
    }
    batch.clear();
  }
}

Result<Submitted> GroupCommit::Submit(job::JobSpec spec, const InsertJobs& insert) {
  if (Status s = internal::ValidateSubmission(spec); !s.ok()) return s;
  std::vector<job::JobSpec> specs;
  specs.push_back(std::move(spec));
  const std::vector<std::string> encoded = {EncodeJobSpecBinary(specs[0])};  // outside the writer
  std::vector<Submitted> out;
  Status s = Execute([&](std::uint64_t& seq) { return insert(specs, encoded, out, seq); });
  if (!s.ok()) return s;
  return out[0];
}

void GroupCommit::SubmitAsync(job::JobSpec spec, InsertJobs insert,
                              std::function<void(Result<Submitted>)> done) {
  if (Status s = internal::ValidateSubmission(spec); !s.ok()) return done(s);
  // Everything the writer needs, kept until it has run.
  struct Call {
    std::vector<job::JobSpec> specs;
    std::vector<std::string> encoded;
    std::vector<Submitted> out;
  };
  auto call = std::make_shared<Call>();
  call->encoded.push_back(EncodeJobSpecBinary(spec));  // outside the writer
  call->specs.push_back(std::move(spec));
  ExecuteAsync(
      [call, insert = std::move(insert)](std::uint64_t& seq) {
        return insert(call->specs, call->encoded, call->out, seq);
      },
      [call, done = std::move(done)](Status s) {
        if (!s.ok()) return done(std::move(s));
        done(call->out[0]);
      });
}

Result<std::vector<Submitted>> GroupCommit::SubmitBatch(std::vector<job::JobSpec> specs,
                                                        const InsertJobs& insert) {
  if (Status s = internal::ValidateSpecs(specs, true); !s.ok()) return s;
  std::vector<std::string> encoded;
  encoded.reserve(specs.size());
  for (const job::JobSpec& spec : specs) encoded.push_back(EncodeJobSpecBinary(spec));
  std::vector<Submitted> out;
  Status s = Execute([&](std::uint64_t& seq) { return insert(specs, encoded, out, seq); });
  if (!s.ok()) return s;
  return out;
}

}  // namespace arbiter::store
