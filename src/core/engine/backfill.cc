// Backfill with reservations: when a job is blocked, find when and where it will fit as the running
// jobs end by their runtime estimates, and hold those devices from jobs that would still run then.
#include <algorithm>
#include <tuple>

#include "core/engine/stages.h"

namespace arbiter::engine {

Millis EstimatedEnd(const Job& job, Millis start, const BackfillOptions& options) {
  return start + (job.runtime_estimate > 0 ? job.runtime_estimate : options.default_runtime);
}

Millis ExpectedEnd(const Job& job, Millis start, Millis now, const BackfillOptions& options) {
  const Millis end = EstimatedEnd(job, start, options);
  return end > now ? end : now + options.overrun_grace;
}

std::optional<Reservation> Reserve(Transaction& tx, const JobFilter& filter,
                                   std::span<const PlacedJob> placed, Millis now,
                                   const CycleOptions& options) {
  const ClusterState& state = tx.state();
  struct Release {
    Millis end;
    JobId id;
    const Allocation* allocation;
    const RunningJob* running;  // nullptr for a job placed this cycle
  };
  // Only jobs on GPUs of the job's type can make it fit (for a job without GPUs, every job).
  const GpuTypeId type = filter.type;
  std::vector<Release> releases;
  releases.reserve(state.running().size() + placed.size());
  auto consider = [&](const Job& job, Millis start, const Allocation& allocation,
                      const RunningJob* running) {
    if (type != kNone && allocation.gpu_type != type) return;
    releases.push_back(
        {ExpectedEnd(job, start, now, options.backfill), job.id, &allocation, running});
  };
  if (type == kNone) {
    for (const auto& [id, r] : state.running()) consider(r.job, r.start_time, r.allocation, &r);
  } else {
    for (NodeId n : state.NodesOfType(type)) {
      for (const Resident& res : state.node(n).residents) {
        // A job on several nodes is listed once, by the node of its first task.
        const RunningJob* r = res.job;
        if (r->allocation.tasks.front().node == n)
          consider(r->job, r->start_time, r->allocation, r);
      }
    }
  }
  for (const PlacedJob& p : placed) consider(*p.job, now, *p.allocation, nullptr);
  // Released in order of expected end: a heap, so that only what is released gets ordered.
  auto later = [](const Release& a, const Release& b) {
    return std::tie(a.end, a.id) > std::tie(b.end, b.id);
  };
  std::make_heap(releases.begin(), releases.end(), later);
  auto heap_end = releases.end();  // [begin, heap_end) is the heap; the released follow in order

  const std::int64_t demand = filter.job->total_gpu().value();
  // The free GPU of the type: the sums of the outermost domains, which hold every node.
  std::int64_t free = 0;
  if (type != kNone && state.topology().node_level() > 0) {
    for (DomainId d : state.domains_at(0)) free += state.DomainFreeMilli(d, type);
  } else if (type != kNone) {
    for (NodeId n : state.NodesOfType(type)) {
      for (const DeviceState& d : state.node(n).devices)
        free += d.type == type ? d.free.value() : 0;
    }
  }
  // The future, on the scratch state: released jobs give their capacity back, and the
  // transaction undoes it all.
  Transaction future(tx);
  int attempts = 0;
  // A job of one task that failed a trial fits later only on a node released to since, and only
  // where that node passes the filter (every placement checks it): until one does, the trial is
  // known to fail and is not run (it still counts as an attempt, so the result is the same).
  const bool one_task = filter.job->groups.size() == 1 && filter.job->groups.front().count == 1;
  bool failed = false;
  std::vector<NodeId> released_to;  // since the last trial, once one failed
  while (heap_end != releases.begin()) {
    std::pop_heap(releases.begin(), heap_end, later);
    --heap_end;
    const Release& rel = *heap_end;
    if (rel.running) future.Release(*rel.running);
    for (auto t = rel.allocation->tasks.rbegin(); t != rel.allocation->tasks.rend(); ++t) {
      if (!rel.running) future.Give(*t);
      if (failed) released_to.push_back(t->node);
      for (const DeviceShare& d : t->devices)
        free += state.node(t->node).devices[d.device].type == type ? d.gpu.value() : 0;
    }
    // (Jobs that end at the same time need not all be released first: the time is the same.)
    if (type != kNone && free < demand) continue;
    if (++attempts > options.backfill.max_attempts) break;
    if (failed) {
      const TaskRequest& request = filter.job->groups.front().request;
      const bool may_fit = std::any_of(released_to.begin(), released_to.end(), [&](NodeId n) {
        return !FilterNode(state, n, request, filter).has_value();
      });
      released_to.clear();
      if (!may_fit) continue;
    }
    Transaction trial(future);
    std::optional<Allocation> allocation = PlaceJob(trial, filter, options);
    if (allocation) return Reservation{filter.job->id, 0, rel.end, std::move(*allocation)};
    failed = one_task;
  }
  return std::nullopt;
}

void ReservationHolds::Add(const Reservation& r) {
  earliest_ = reservations_.empty() ? r.start : std::min(earliest_, r.start);
  reservations_.push_back(r);
}

void ReservationHolds::Apply(Transaction& tx) {
  const ClusterState& state = tx.state();
  held_.clear();
  for (const Reservation& r : reservations_) {
    for (const TaskAllocation& task : r.allocation.tasks) {
      const NodeState& node = state.node(task.node);
      TaskAllocation hold;
      hold.node = task.node;
      hold.cpu = std::min(node.cpu_free, task.cpu);
      hold.memory = std::min(node.memory_free, task.memory);
      for (const DeviceShare& d : task.devices) {
        const DeviceState& dev = node.devices[d.device];
        const DeviceShare share{d.device, std::min(dev.free, d.gpu),
                                std::min(dev.memory_free, d.memory)};
        if (share.gpu.value() > 0 || share.memory.value() > 0) hold.devices.push_back(share);
      }
      if (hold.devices.empty() && hold.cpu.value() == 0 && hold.memory.value() == 0) continue;
      tx.Hold(hold);
      held_.push_back(std::move(hold));
    }
  }
}

void ReservationHolds::Release(Transaction& tx) {
  for (auto it = held_.rbegin(); it != held_.rend(); ++it) tx.Unhold(*it);
  held_.clear();
}

}  // namespace arbiter::engine
