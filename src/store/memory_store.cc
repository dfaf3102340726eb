// The in-memory store: the same answers as the SQLite store, nothing durable. For tests of the
// server and for runs that need no data directory.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include "store/internal.h"
#include "store/store.h"

namespace arbiter::store {
namespace {

class MemoryStore final : public Store {
 public:
  Result<Submitted> Submit(job::JobSpec spec) override {
    if (Status s = internal::ValidateSubmission(spec); !s.ok()) return s;
    std::lock_guard lock(mu_);
    return Record(std::move(spec));
  }

  Result<std::vector<Submitted>> SubmitBatch(std::vector<job::JobSpec> specs) override {
    if (Status s = internal::ValidateSpecs(specs, true); !s.ok()) return s;
    std::vector<Submitted> out;
    std::lock_guard lock(mu_);
    for (job::JobSpec& spec : specs) out.push_back(Record(std::move(spec)));
    return out;
  }

  Result<std::vector<Event>> Append(std::vector<Event> events) override {
    if (Status s = internal::ValidateEvents(events); !s.ok()) return s;
    std::lock_guard lock(mu_);
    // All or none: apply to copies, then commit.
    std::map<JobId, JobStatus> touched;
    for (std::size_t i = 0; i < events.size(); ++i) {
      Event& e = events[i];
      auto it = touched.find(e.job);
      if (it == touched.end()) {
        auto job = jobs_.find(e.job);
        if (job == jobs_.end())
          return Status::NotFound(fmt::format("no job {}", e.job), fmt::format("events[{}]", i));
        it = touched.emplace(e.job, job->second.status).first;
      }
      if (Status s = ApplyEvent(it->second, e); !s.ok()) {
        return internal::EventError(i, e, s.message());
      }
      e.state = it->second.state;
    }
    for (auto& [id, status] : touched) jobs_[id].status = std::move(status);
    for (Event& e : events) AddEvent(e);
    PublishEvents(events);
    return events;
  }

  Result<Event> SetQueueQuota(QueueQuotaOverride quota) override {
    if (Status s = internal::ValidateQuota(quota); !s.ok()) return s;
    std::lock_guard lock(mu_);
    Event e = internal::QuotaEvent(quota);
    quotas_[quota.queue] = std::move(quota);
    return Publish(e);
  }

  Result<Event> ResetQueueQuota(const std::string& queue, Millis time,
                                const std::string& actor) override {
    if (Status s = internal::ValidateQuota({queue, {}, time, actor}); !s.ok()) return s;
    std::lock_guard lock(mu_);
    quotas_.erase(queue);
    Event e = internal::QuotaResetEvent(queue, time, actor);
    return Publish(e);
  }

  Result<Event> SetNodeState(NodeAdmin node) override {
    if (Status s = internal::ValidateNode(node); !s.ok()) return s;
    std::lock_guard lock(mu_);
    Event e = internal::NodeEvent(node);
    nodes_[node.node] = std::move(node);  // schedulable too: it overrides a configured cordon
    return Publish(e);
  }

  Result<std::vector<Event>> RecordNodeHealth(std::vector<Event> events) override {
    if (Status s = internal::ValidateNodeHealth(events); !s.ok()) return s;
    std::lock_guard lock(mu_);
    for (Event& e : events) AddEvent(e);
    PublishEvents(events);
    return events;
  }

  Status SaveQueueUsage(std::vector<QueueUsage> usage) override {
    std::lock_guard lock(mu_);
    usage_ = std::move(usage);
    return Status::Ok();
  }

  Result<std::vector<Event>> EventsSince(std::uint64_t cursor, std::size_t limit) override {
    std::lock_guard lock(mu_);
    std::vector<Event> out;
    // Seqs are 1, 2, ...: event `seq` is at index seq - 1.
    for (std::uint64_t i = cursor; i < events_.size() && out.size() < limit; ++i) {
      out.push_back(events_[i]);
    }
    return out;
  }

  Result<std::optional<StoredJob>> GetJob(JobId id) override {
    std::lock_guard lock(mu_);
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return std::optional<StoredJob>();
    return std::optional<StoredJob>(it->second);
  }

  Result<std::vector<StoredJob>> RecentFinished(std::size_t limit) override {
    std::lock_guard lock(mu_);
    std::vector<StoredJob> out;
    for (auto it = jobs_.rbegin(); it != jobs_.rend() && out.size() < limit; ++it) {
      if (job::IsFinished(it->second.status.state)) out.push_back(it->second);
    }
    return out;
  }

  Result<Snapshot> Load(const LoadOptions& options) override {
    std::lock_guard lock(mu_);
    Snapshot snap;
    for (const auto& [id, job] : jobs_) {
      if (!options.include_jobs) break;
      if (options.include_finished || !job::IsFinished(job.status.state)) snap.jobs.push_back(job);
    }
    if (options.each_batch) {
      if (Status s = options.each_batch(snap.jobs); !s.ok()) return s;
      snap.jobs.clear();
    }
    for (const auto& [name, q] : quotas_) snap.queue_quotas.push_back(q);
    for (const auto& [name, n] : nodes_) snap.nodes.push_back(n);
    snap.queue_usage = usage_;
    snap.last_seq = next_seq_ - 1;
    snap.last_job_id = next_id_ - 1;
    return snap;
  }

 private:
  // Under mu_, spec valid.
  Submitted Record(job::JobSpec spec) {
    if (!spec.idempotency_key.empty()) {
      auto it = keys_.find({spec.user, spec.idempotency_key});
      if (it != keys_.end()) return {it->second, 0, true};
      keys_.emplace(std::make_pair(spec.user, spec.idempotency_key), next_id_);
    }
    StoredJob job;
    job.id = next_id_++;
    job.status = internal::NewStatus(spec);
    Event e = internal::SubmittedEvent(spec);
    e.job = job.id;
    job.spec = std::move(spec);
    const JobId id = job.id;
    jobs_.emplace(id, std::move(job));
    AddEvent(e);
    PublishEvents(std::span<const Event>(&e, 1));
    return {id, e.seq, false};
  }

  void AddEvent(Event& e) {
    e.seq = next_seq_++;
    events_.push_back(e);
  }

  Event Publish(Event& e) {
    AddEvent(e);
    PublishEvents(std::span<const Event>(&e, 1));
    return e;
  }

  std::mutex mu_;
  std::map<JobId, StoredJob> jobs_;
  std::map<std::pair<std::string, std::string>, JobId> keys_;
  std::vector<Event> events_;
  std::map<std::string, QueueQuotaOverride> quotas_;
  std::map<std::string, NodeAdmin> nodes_;
  std::vector<QueueUsage> usage_;
  JobId next_id_ = 1;
  std::uint64_t next_seq_ = 1;
};

}  // namespace

std::unique_ptr<Store> MakeMemoryStore() { return std::make_unique<MemoryStore>(); }

}  // namespace arbiter::store
