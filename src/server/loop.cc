// The scheduling loop: a cycle of the engine when something changed (after a minimum interval),
// the events due on virtual nodes and of draining victims, and the periodic save of fair-share
// usage. Runs on its own thread; holds mu_ while a cycle runs.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "arbiter/attained_service.h"
#include "job/resolve.h"
#include "server/core.h"
#include "store/codec.h"

namespace arbiter::server {
namespace {

using Json = nlohmann::json;
using job::JobState;
using store::Event;
using store::EventKind;
using Role = config::TokenSpec::Role;

constexpr Millis kNeverDue = std::numeric_limits<Millis>::max();
// How often the queues' fair-share usage is saved (and at a clean stop): a crash loses at most
// this much of it, as Slurm's periodic state save does.
constexpr Millis kUsageSavePeriod = 60 * kMillisPerSecond;
// How often the queues' usage is sampled for the dashboard's chart (QueueUsageHistory).
constexpr Millis kUsageSamplePeriod = 60 * kMillisPerSecond;

}  // namespace

void Core::Loop() {
  for (;;) {
    Millis wait = 0;
    bool dirty = false;
    {
      Changes lock(*this);
      DrainInboxLocked();
      const Millis now = Now();
      const Millis due = std::min(DueEventsLocked(now), LoseSilentNodesLocked(now));
      FlushNodeHealthLocked();
      if (now - last_usage_save_ >= kUsageSavePeriod) SaveUsageLocked(now);
      if (now - last_usage_sample_ >= kUsageSamplePeriod) SampleUsageLocked(now);
      if (due <= now) continue;  // it changed something: look again
      const Millis interval =
          dirty_ ? config_.server.cycle_min_interval : config_.server.cycle_period;
      if (now - last_cycle_ >= interval) {
        CycleLocked(now);
        continue;
      }
      wait = std::min(due, last_cycle_ + interval) - now;
      dirty = dirty_;
    }
    // Waits without mu_. A submission wakes the loop only when no cycle is due already (it
    // would run after the minimum interval anyway): under a stream of submissions the loop
    // wakes once per interval, not once per job.
    std::unique_lock lock(inbox_mu_);
    loop_waits_for_inbox_ = !dirty;
    cv_.wait_for(lock, std::chrono::milliseconds(std::max<Millis>(1, wait)),
                 [&] { return stop_ || wake_ || (loop_waits_for_inbox_ && !inbox_.empty()); });
    wake_ = false;
    if (stop_) return;
  }
}

void Core::CycleLocked(Millis now) {
  last_cycle_ = now;
  const bool unchanged = !dirty_;
  dirty_ = false;
  // Nothing changed since a plan that holds until later: this cycle would decide as it did.
  if (unchanged && now < stable_until_) {
    state_->AccrueUsage(now);
    metrics_.cycles_skipped.Increment();
    return;
  }
  std::vector<Job> pending;
  for (const auto& [id, entry] : jobs_) {
    if (entry.stored.status.state == JobState::kPending) pending.push_back(entry.job);
  }
  if (pending.empty()) return;
  const auto t0 = std::chrono::steady_clock::now();
  state_->AccrueUsage(now);
  const Plan plan = engine_.Schedule(*state_, pending, now);
  stable_until_ = plan.stable_until;
  if (options_.check_invariants) {
    if (Status st = CheckPlan(*state_, pending, plan); !st.ok()) {
      fmt::print(stderr, "internal error: cycle at {}: {}\n", FormatTime(now, TimeStyle::kCalendar),
                 st.message());
      std::fflush(stderr);
      std::_Exit(70);
    }
  }

  std::vector<Event> events;
  for (const Eviction& e : plan.evictions) {
    Event ev;
    ev.time = now;
    ev.kind = EventKind::kEvictionSignalled;
    ev.job = e.job;
    ev.actor = "scheduler";
    ev.message = fmt::format("preempted by job {}; {} sent, stopped by its grace period",
                             e.preemptor, e.signal);
    ev.stop_at = std::max(e.stop_at, now);
    events.push_back(std::move(ev));
  }
  for (const Bind& b : plan.binds) {
    Event ev;
    ev.time = std::max(now, b.start_after);  // when it starts to run
    ev.kind = EventKind::kStarted;
    ev.job = b.job;
    ev.actor = "scheduler";
    ev.allocation = job::ToStoredAllocation(b.allocation, *state_);
    events.push_back(std::move(ev));
  }
  // The service a least-attained-service order counts from each start on (a starvation promotion
  // applied), at the time it starts to run (its `started` event's, which a restart replays); the
  // engine adds the running time itself.
  for (const Bind& b : plan.binds) {
    Job& job = pending[b.pending_index];
    const Millis start = std::max(now, b.start_after);
    BeginService(job, start, engine_.options().ordering);
    Job& kept = jobs_.at(b.job).job;
    kept.attained = job.attained;
    kept.starved = job.starved;
    kept.service_time = start;
  }
  if (!events.empty()) {
    if (Status st = AppendLocked(std::move(events)); !st.ok()) {
      fmt::print(stderr, "error: cycle at {}: the store refused the plan: {}\n",
                 FormatTime(now, TimeStyle::kCalendar), st.message());
      return;
    }
    if (Status st = state_->Apply(plan, pending); !st.ok()) {
      fmt::print(stderr, "internal error: the plan does not apply: {}\n", st.message());
    }
  }
  for (const Eviction& e : plan.evictions) {
    draining_[e.job] = std::max(e.stop_at, now);
    const Entry& victim = jobs_.at(e.job);
    metrics_.Evicted(victim.stored.spec.queue, victim.stored.status.priority_class,
                     EvictionKindName(e.kind), e.lost_gpu_hours * 3600);
  }
  for (const Bind& b : plan.binds) {
    Entry& entry = jobs_.at(b.job);
    entry.run_start = std::max(now, b.start_after);
    const Millis since =
        entry.pending_since >= 0 ? entry.pending_since : entry.stored.spec.submit_time;
    metrics_.Admitted(entry.stored.spec.queue,
                      static_cast<double>(std::max<Millis>(0, now - since)) /
                          static_cast<double>(kMillisPerSecond));
    entry.pending_since = -1;
    entry.reason.clear();
    entry.reason_stage.clear();
    entry.never = false;
    entry.reserved_start = -1;
  }
  for (const Unplaced& u : plan.unplaced) {
    Entry& entry = jobs_.at(u.job);
    entry.reason = u.reason.Describe(TimeStyle::kCalendar);
    entry.reason_stage = StageName(u.reason.stage);
    entry.never = u.reason.verdict == Verdict::kNever;
    entry.reserved_start = u.reason.reserved_start;
  }
  for (const StageTiming& t : plan.timings) {
    if (t.calls > 0) metrics_.StageTime(StageName(t.stage), static_cast<double>(t.micros) / 1e6);
  }
  metrics_.cycles.Increment();
  ObserveSince(metrics_.cycle_seconds, t0);
}

Millis Core::DueEventsLocked(Millis now) {
  std::vector<Event> events;
  Millis next = kNeverDue;
  auto event = [&](EventKind kind, JobId job, Millis time, std::string message) {
    Event ev;
    ev.time = time;
    ev.kind = kind;
    ev.job = job;
    ev.actor = options_.virtual_nodes ? "virtual-node" : "scheduler";
    ev.message = std::move(message);
    events.push_back(std::move(ev));
  };
  // A victim on an agent's node stops when its agent says its tasks are gone (or the node is
  // lost); on virtual nodes, at the end of its grace period.
  for (const auto& [id, stop_at] : draining_) {
    if (agents()) continue;
    if (stop_at <= now) {
      event(EventKind::kEvicted, id, now, "stopped after its grace period");
    } else {
      next = std::min(next, stop_at);
    }
  }
  if (options_.virtual_nodes) {
    for (const auto& [id, running] : state_->running()) {
      const Entry& entry = jobs_.at(id);
      const Millis start = entry.run_start;
      const Millis end =
          entry.job.runtime_estimate > 0 ? start + entry.job.runtime_estimate : kNeverDue;
      if (end <= now) {
        event(EventKind::kCompleted, id, end, "ran its runtime estimate on virtual nodes");
        continue;
      }
      next = std::min(next, end);
      if (entry.job.checkpoint_interval > 0) {
        const Millis interval = entry.job.checkpoint_interval;
        const Millis last = std::max(start, entry.stored.status.last_checkpoint);
        Millis due = last + interval;
        if (due >= end) continue;
        if (due <= now) {
          // The latest checkpoint due (one event, even after the server was down a while).
          due = std::min(last + (now - last) / interval * interval, end - 1);
          event(EventKind::kCheckpointed, id, due, {});
        } else {
          next = std::min(next, due);
        }
      }
    }
  }
  if (events.empty()) return next;
  std::vector<JobId> completed, evicted;
  for (const Event& ev : events) {
    if (ev.kind == EventKind::kCompleted) completed.push_back(ev.job);
    if (ev.kind == EventKind::kEvicted) evicted.push_back(ev.job);
  }
  std::vector<std::pair<JobId, Millis>> checkpoints;
  for (const Event& ev : events) {
    if (ev.kind == EventKind::kCheckpointed) checkpoints.emplace_back(ev.job, ev.time);
  }
  if (Status st = AppendLocked(std::move(events)); !st.ok()) {
    fmt::print(stderr, "error: the store refused the nodes' events: {}\n", st.message());
    return now + kMillisPerSecond;
  }
  for (JobId id : evicted) draining_.erase(id);
  for (JobId id : completed) Check(state_->Unbind(id, now), "end a completed job");
  for (const auto& [id, at] : checkpoints) {
    Check(state_->RecordCheckpoint(id, at), "record a checkpoint");
  }
  if (!completed.empty() || !evicted.empty()) dirty_ = true;
  // Less work to lose: a victim the loss threshold refused may be taken now.
  if (!checkpoints.empty() && config_.engine.preemption.enabled &&
      config_.engine.preemption.max_loss_per_gpu >= 0)
    dirty_ = true;
  return now;
}

}  // namespace arbiter::server
