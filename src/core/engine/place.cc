// Placement: devices for every task of a gang, inside the smallest topology domain that holds it.
//
// A single task goes, under the default policy (kArbiter), to the best of a few candidates from
// each bucket of the free-capacity indexes that can hold it, ranked by how much they grow the
// cluster's expected fragmentation (score.cc, docs/design/placement.md); under the other policies,
// to the node that the policy scores best among every feasible one of the job's GPU type. A gang is
// tried in one NVLink group, then one node, then one domain of each operator level from the
// innermost out (the domain with the least free capacity that could hold it first), then the whole
// cluster; a required topology level stops the search at that level. Each attempt is a transaction
// of its own, committed to the caller's when the whole gang is placed, discarded otherwise.
#include <algorithm>
#include <array>
#include <span>
#include <tuple>

#include "core/engine/stages.h"

namespace arbiter::engine {
namespace {

struct Task {
  std::uint32_t group = 0;
  std::uint32_t index = 0;
  const TaskRequest* request = nullptr;
};

// A job's tasks, largest request first: in `few` when they fit there (most jobs: no heap buffer),
// else in `many`.
template <std::size_t N>
std::span<Task> ExpandTasks(const Job& job, std::array<Task, N>& few, std::vector<Task>& many) {
  std::size_t count = 0;
  for (const TaskGroup& g : job.groups) count += static_cast<std::size_t>(std::max(0, g.count));
  std::span<Task> tasks(few.data(), std::min(count, N));
  if (count > N) {
    many.resize(count);
    tasks = many;
  }
  std::size_t k = 0;
  for (std::uint32_t g = 0; g < job.groups.size(); ++g) {
    for (std::int32_t i = 0; i < job.groups[g].count; ++i)
      tasks[k++] = {g, static_cast<std::uint32_t>(i), &job.groups[g].request};
  }
  if (job.groups.size() < 2) return tasks;  // one request: already in order
  std::stable_sort(tasks.begin(), tasks.end(), [](const Task& a, const Task& b) {
    const TaskRequest& x = *a.request;
    const TaskRequest& y = *b.request;
    return std::tie(y.gpu, y.cpu, y.memory) < std::tie(x.gpu, x.cpu, x.memory);
  });
  return tasks;
}

constexpr std::uint32_t kAnyGroup = kNone;
constexpr std::size_t kMaxGroups = kMaxDevicesPerNode;  // groups are numbered densely per node

bool Eligible(const DeviceState& dev, const TaskRequest& req, GpuTypeId type, std::uint32_t group) {
  return dev.type == type && dev.memory >= req.gpu_memory &&
         (group == kAnyGroup || dev.nvlink_group == group);
}

// How a node's devices would serve a task; smaller is better.
struct DeviceScore {
  std::uint32_t spans = 0;  // NVLink groups a whole-GPU task spans
  std::int64_t leftover =
      0;  // free devices left in the chosen group / free share left on the device
};

// Chooses devices of `node` for one task. A whole-GPU task takes the NVLink group with the fewest
// eligible free devices that holds it, else (when allowed to span) the fullest groups first. A
// share takes the partly used device with the least free share that holds it, else a free device
// in the group with the fewest free devices.
bool ChooseDevices(const NodeState& node, const TaskRequest& req, GpuTypeId type,
                   std::uint32_t group_only, bool allow_span, std::vector<DeviceShare>& out,
                   DeviceScore& score) {
  out.clear();
  score = {};
  if (req.gpu.value() == 0) return true;
  std::array<std::uint16_t, kMaxGroups> free_in_group{};
  for (const DeviceState& dev : node.devices) {
    if (Eligible(dev, req, type, group_only) && dev.free == kWholeGpu)
      ++free_in_group[dev.nvlink_group];
  }
  if (req.shared()) {
    std::uint32_t best = kNone;
    for (std::uint32_t d = 0; d < node.devices.size(); ++d) {
      const DeviceState& dev = node.devices[d];
      if (!Eligible(dev, req, type, group_only) || dev.free == kWholeGpu || dev.free < req.gpu ||
          dev.memory_free < req.gpu_memory)
        continue;
      if (best == kNone || dev.free < node.devices[best].free) best = d;
    }
    if (best != kNone) {
      score.leftover = node.devices[best].free.value() - req.gpu.value();
    } else {
      for (std::uint32_t d = 0; d < node.devices.size(); ++d) {
        const DeviceState& dev = node.devices[d];
        if (!Eligible(dev, req, type, group_only) || dev.free != kWholeGpu) continue;
        if (best == kNone ||
            free_in_group[dev.nvlink_group] < free_in_group[node.devices[best].nvlink_group])
          best = d;
      }
      if (best == kNone) return false;
      score.leftover = kMilliPerGpu + free_in_group[node.devices[best].nvlink_group];
    }
    out.push_back({best, req.gpu, req.gpu_memory});
    return true;
  }

  const std::int64_t want = req.whole_gpus();
  std::uint32_t best_group = kNone;
  for (std::uint32_t g = 0; g < node.nvlink_groups; ++g) {
    if (free_in_group[g] >= want &&
        (best_group == kNone || free_in_group[g] < free_in_group[best_group]))
      best_group = g;
  }
  auto take_from = [&](std::uint32_t g, std::int64_t n) {
    for (std::uint32_t d = 0; d < node.devices.size() && n > 0; ++d) {
      const DeviceState& dev = node.devices[d];
      if (dev.nvlink_group == g && dev.free == kWholeGpu && Eligible(dev, req, type, group_only)) {
        out.push_back({d, kWholeGpu, dev.memory});
        --n;
      }
    }
  };
  if (best_group != kNone) {
    take_from(best_group, want);
    score.spans = 1;
    score.leftover = free_in_group[best_group] - want;
    return true;
  }
  if (!allow_span || group_only != kAnyGroup) return false;
  std::int64_t total = 0;
  for (std::uint32_t g = 0; g < node.nvlink_groups; ++g) total += free_in_group[g];
  if (total < want) return false;
  // Span as few groups as possible: fullest groups first.
  std::vector<std::uint32_t> groups(node.nvlink_groups);
  for (std::uint32_t g = 0; g < groups.size(); ++g) groups[g] = g;
  std::stable_sort(groups.begin(), groups.end(), [&](std::uint32_t a, std::uint32_t b) {
    return free_in_group[a] > free_in_group[b];
  });
  std::int64_t need = want;
  for (std::uint32_t g : groups) {
    if (need <= 0) break;
    const std::int64_t n = std::min<std::int64_t>(need, free_in_group[g]);
    take_from(g, n);
    need -= n;
    ++score.spans;
    score.leftover = free_in_group[g] - n;
  }
  std::sort(out.begin(), out.end(),
            [](const DeviceShare& a, const DeviceShare& b) { return a.device < b.device; });
  return true;
}

class Placer {
 public:
  Placer(Transaction& tx, const JobFilter& filter, NodeId begin, NodeId end,
         const CycleOptions& options)
      : tx_(tx),
        state_(tx.state()),
        filter_(filter),
        job_(*filter.job),
        options_(options),
        tasks_(ExpandTasks(job_, few_tasks_, many_tasks_)),
        begin_(begin),
        end_(end) {
    allocation_.gpu_type = job_.total_gpu().value() > 0 ? filter.type : kNone;
  }
  Placer(const Placer&) = delete;  // tasks_ may point into the placer's own array
  Placer& operator=(const Placer&) = delete;

  std::optional<Allocation> Place() {
    const Topology& topo = state_.topology();
    const bool required = job_.topology.mode == ConstraintMode::kRequired ||
                          (filter_.strict && job_.topology.mode == ConstraintMode::kPreferred);
    // The outermost level the job may span; -1 is the whole cluster.
    const int max_level = required ? job_.topology.level : -1;
    const bool allow_span = max_level != topo.nvlink_level();

    if (tasks_.size() == 1) {
      if (PlaceInRange(begin_, end_, allow_span)) return Done();
      return std::nullopt;
    }
    if (allocation_.gpu_type != kNone && PlaceInOneNode(/*per_group=*/true)) return Done();
    if (max_level == topo.nvlink_level()) return std::nullopt;
    if (PlaceInOneNode(/*per_group=*/false)) return Done();
    if (max_level == topo.node_level()) return std::nullopt;
    for (int level = topo.node_level() - 1; level >= std::max(0, max_level); --level) {
      if (PlaceInDomainOf(level)) return Done();
    }
    if (max_level < 0 && PlaceInRange(begin_, end_, true)) return Done();
    return std::nullopt;
  }

  // Under a scoring policy: the rank of the node chosen for the job's first task.
  const PlacementKey& key() const { return key_; }

 private:
  Allocation Done() {
    std::sort(allocation_.tasks.begin(), allocation_.tasks.end(),
              [](const TaskAllocation& a, const TaskAllocation& b) {
                return std::tie(a.group, a.index) < std::tie(b.group, b.index);
              });
    return std::move(allocation_);
  }

  // Takes the task's capacity in `attempt`, the transaction of the placement being tried.
  void Take(Transaction& attempt, const Task& t, NodeId node, std::vector<DeviceShare> devices) {
    TaskAllocation a;
    a.group = t.group;
    a.index = t.index;
    a.node = node;
    a.cpu = t.request->cpu;
    a.memory = t.request->memory;
    a.devices = std::move(devices);
    attempt.Take(a);
    allocation_.tasks.push_back(std::move(a));
  }

  // An attempt that failed: its transaction discards what it took.
  bool Failed() {
    allocation_.tasks.clear();
    return false;
  }

  std::int64_t WholeDevices() const {
    std::int64_t n = 0;
    for (const Task& t : tasks_) n += t.request->whole_gpus();
    return n;
  }

  bool HasSharedTasks() const {
    return std::any_of(tasks_.begin(), tasks_.end(),
                       [](const Task& t) { return t.request->shared(); });
  }

  // Every task on one node (and, per_group, inside one NVLink group of it).
  bool PlaceInOneNode(bool per_group) {
    const std::int64_t devices = WholeDevices();
    // No NVLink group of the type is that large: no node needs to be looked at.
    if (per_group && allocation_.gpu_type != kNone &&
        devices > state_.TypeLargestNvlinkGroup(allocation_.gpu_type))
      return false;
    MilliCpu cpu(0);
    MemMiB memory(0);
    for (const Task& t : tasks_) {
      cpu += t.request->cpu;
      memory += t.request->memory;
    }
    auto try_node = [&](NodeId n) {
      if (!state_.NodeHasRoom(n, cpu, memory)) return false;  // not for every task
      const NodeState& node = state_.node(n);
      if (FilterNode(state_, n, *tasks_.front().request, filter_)) return false;
      const std::uint32_t groups = per_group ? node.nvlink_groups : 1;
      for (std::uint32_t g = 0; g < groups; ++g) {
        if (per_group && allocation_.gpu_type != kNone) {
          // Skip groups without enough free devices of the type before taking anything.
          std::int64_t free = 0;
          for (const DeviceState& dev : node.devices)
            free +=
                dev.nvlink_group == g && dev.type == allocation_.gpu_type && dev.free == kWholeGpu;
          if (free < devices) continue;
        }
        if (PlaceAllOnNode(n, per_group ? g : kAnyGroup)) return true;
      }
      return false;
    };
    // Shares may land on partly used devices, which the free-device index does not show: scan.
    if (allocation_.gpu_type == kNone || HasSharedTasks()) {
      for (NodeId n = begin_; n < end_; ++n) {
        if (try_node(n)) return true;
      }
      return false;
    }
    for (std::uint32_t c = static_cast<std::uint32_t>(devices); c <= state_.max_devices_per_node();
         ++c) {
      const IndexSet& set = state_.NodesWithFreeDevices(allocation_.gpu_type, c);
      for (NodeId n = set.Next(begin_, end_); n < end_; n = set.Next(n + 1, end_)) {
        if (try_node(n)) return true;
      }
    }
    return false;
  }

  bool PlaceAllOnNode(NodeId n, std::uint32_t group) {
    Transaction attempt(tx_);
    std::vector<DeviceShare> devices;
    DeviceScore score;
    for (const Task& t : tasks_) {
      if (FilterNode(state_, n, *t.request, filter_) ||
          !ChooseDevices(state_.node(n), *t.request, allocation_.gpu_type, group,
                         group == kAnyGroup, devices, score)) {
        return Failed();
      }
      Take(attempt, t, n, devices);
    }
    attempt.Commit();
    return true;
  }

  // The gang inside one domain of `level`, best fit first.
  bool PlaceInDomainOf(int level) {
    const std::int64_t devices = WholeDevices();
    std::int64_t milli = 0;
    for (const Task& t : tasks_) milli += t.request->gpu.value();
    std::vector<DomainId> candidates;
    for (DomainId d : state_.domains_at(level)) {
      const Domain& dom = state_.domain(d);
      if (dom.first_node < begin_ || dom.end_node > end_) continue;  // outside the scope
      if (allocation_.gpu_type == kNone ||
          (state_.DomainFreeMilli(d, allocation_.gpu_type) >= milli &&
           state_.DomainFreeDevices(d, allocation_.gpu_type) >= devices)) {
        candidates.push_back(d);
      }
    }
    if (allocation_.gpu_type != kNone) {
      std::stable_sort(candidates.begin(), candidates.end(), [&](DomainId a, DomainId b) {
        return state_.DomainFreeMilli(a, allocation_.gpu_type) <
               state_.DomainFreeMilli(b, allocation_.gpu_type);
      });
    }
    for (DomainId d : candidates) {
      const Domain& dom = state_.domain(d);
      if (PlaceInRange(dom.first_node, dom.end_node, true)) return true;
    }
    return false;
  }

  // Each task, largest first, on the best node of [begin, end); all or none.
  bool PlaceInRange(NodeId begin, NodeId end, bool allow_span) {
    Transaction attempt(tx_);
    for (const Task& t : tasks_) {
      NodeId node = kNone;
      std::vector<DeviceShare> devices;
      if (!ChooseNode(t, begin, end, allow_span, node, devices)) return Failed();
      Take(attempt, t, node, std::move(devices));
    }
    attempt.Commit();
    return true;
  }

  // The best node in [begin, end) for one task under a scoring policy: every feasible node (of the
  // job's GPU type) is scored; the smallest key wins.
  bool ChooseScoredNode(const Task& t, NodeId begin, NodeId end, bool allow_span, NodeId& best,
                        std::vector<DeviceShare>& best_devices) {
    const TaskRequest& req = *t.request;
    const GpuTypeId type = req.gpu.value() > 0 ? allocation_.gpu_type : kNone;
    const PlacementOptions& policy = options_.placement;
    bool found = false;
    PlacementKey best_key;
    std::vector<DeviceShare>& devices = scored_devices_;
    double score = 0;
    NodeScorer scorer(state_, job_, req, type, policy, options_.model.get());
    auto consider = [&](NodeId n) {
      if (FilterNode(state_, n, req, filter_)) return;
      if (!scorer.Score(n, allow_span, devices, score)) return;
      const PlacementKey key{score, TieBreak(policy.seed, n)};
      if (!found || key < best_key) {
        found = true;
        best_key = key;
        best = n;
        best_devices = devices;
      }
    };
    if (type == kNone) {
      for (NodeId n = begin; n < end; ++n) consider(n);
    } else {
      const std::vector<NodeId>& nodes = state_.NodesOfType(type);
      for (auto it = std::lower_bound(nodes.begin(), nodes.end(), begin);
           it != nodes.end() && *it < end; ++it)
        consider(*it);
    }
    return Keyed(found, best_key);
  }

  // Records the rank of the node chosen for the job's first task.
  bool Keyed(bool found, const PlacementKey& key) {
    if (found && !keyed_) {
      key_ = key;
      keyed_ = true;
    }
    return found;
  }

  // The best node in [begin, end) for one task under the default policy. Candidates come from
  // the free-capacity indexes: up to `score_candidates` feasible nodes from each bucket that can
  // hold the task (for a share, each bucket of partly used devices by free share, then each count
  // of fully free devices; for whole GPUs, each count of fully free devices from the task's up),
  // so the cost does not grow with the cluster. They are ranked by the growth of the cluster's
  // expected fragmentation under the shape distribution (NodeScorer, docs/design/placement.md),
  // then by node. A task without GPUs takes, among the first 4 x score_candidates feasible nodes
  // where it grows nothing (no GPU free, ClusterState::NodesWithoutFreeGpu), one without GPUs
  // first, then the one with the least free CPU; else the candidates of each GPU type's buckets,
  // ranked alike.
  bool ChooseNode(const Task& t, NodeId begin, NodeId end, bool allow_span, NodeId& best,
                  std::vector<DeviceShare>& best_devices) {
    if (begin >= end) return false;
    if (options_.placement.policy != PlacementPolicy::kArbiter)
      return ChooseScoredNode(t, begin, end, allow_span, best, best_devices);
    const TaskRequest& req = *t.request;
    const GpuTypeId type = req.gpu.value() > 0 ? allocation_.gpu_type : kNone;
    NodeScorer scorer(state_, job_, req, type, options_.placement, options_.model.get());
    bool found = false;
    PlacementKey best_key;
    std::vector<DeviceShare>& devices = scored_devices_;
    double score = 0;
    // Scores node n; true when it can host the task. A node met again (through another of its
    // devices, or in another bucket) is not scored again: the answer would be the same.
    considered_count_ = 0;
    // `met_before`: n may have been scored already (not so in the first scan of one model's
    // whole-device buckets: a node is in one of them, by its number of free devices).
    auto consider = [&](NodeId n, bool met_before = true) {
      if (!state_.NodeHasRoom(n, req.cpu, req.memory)) return false;  // FilterNode would say so
      for (std::size_t i = 0; met_before && i < considered_count_; ++i) {
        if (considered_[i].first == n) return considered_[i].second;
      }
      const bool fits =
          !FilterNode(state_, n, req, filter_) && scorer.Score(n, allow_span, devices, score);
      // (A node beyond the list's room is scored again if met again, to the same answer.)
      if (considered_count_ < considered_.size()) considered_[considered_count_++] = {n, fits};
      if (!fits) return false;
      const PlacementKey key{score, n};
      if (!found || key < best_key) {
        found = true;
        best_key = key;
        best = n;
        best_devices = devices;
      }
      return true;
    };
    const int limit = std::max(1, options_.score_candidates);
    // Members of a bucket looked at, feasible or not, once some candidate is found: without a
    // bound, a bucket full of nodes whose CPU is taken (or of devices a little too small) is
    // scanned to its end for every task. Until a candidate is found the scan goes on, so a task
    // that fits somewhere is placed.
    const int scan_limit = 32 * limit;
    auto scan_whole = [&](GpuTypeId ty, std::uint32_t from) {
      const bool met_before = considered_count_ > 0;  // by an earlier scan
      for (std::uint32_t c = from; c <= state_.max_devices_per_node(); ++c) {
        int taken = 0, seen = 0;
        state_.NodesWithFreeDevices(ty, c).ForEach(begin, end, [&](NodeId n) {
          if (taken >= limit || (seen >= scan_limit && found)) return false;
          ++seen;
          taken += consider(n, met_before);
          return true;
        });
      }
    };
    // Nodes of partly used devices of `ty` with a free share in bucket `from` or above.
    auto scan_shares = [&](GpuTypeId ty, int from) {
      const std::uint32_t first = state_.node(begin).first_device;
      const std::uint32_t last = end < state_.node_count()
                                     ? state_.node(end).first_device
                                     : static_cast<std::uint32_t>(state_.device_count());
      // Only the bucket of the task's own share may hold devices with less free than it asks
      // (the buckets above hold more): its members' free share is read, the others' is not.
      const int mixed = req.gpu.value() > 0 ? ClusterState::ShareBucket(req.gpu.value()) : -1;
      for (int b = from; b < ClusterState::kShareBuckets; ++b) {
        int taken = 0, seen = 0;
        state_.DevicesWithFreeShare(ty, b).ForEach(first, last, [&](std::uint32_t g) {
          if (taken >= limit || (seen >= scan_limit && found)) return false;
          ++seen;
          // (The bucket's first members may hold less than the task, and on a full cluster most
          // nodes lack the CPU: both passed over without reading the node, whose devices are
          // read only when the task asks for GPU memory.)
          if (b == mixed && state_.DeviceFreeMilli(g) < req.gpu.value()) return true;
          const NodeId n = state_.DeviceNode(g);
          if (!state_.NodeHasRoom(n, req.cpu, req.memory)) return true;  // consider(n) says so
          if (req.gpu_memory.value() > 0) {
            const DeviceState& dev = state_.node(n).devices[g - state_.node(n).first_device];
            if (dev.memory_free < req.gpu_memory || dev.memory < req.gpu_memory) return true;
          }
          taken += consider(n);
          return true;
        });
      }
    };

    if (req.gpu.value() == 0) {
      // Nodes where the task grows no fragmentation (no GPU free): of the first feasible ones in
      // id order, without GPUs first, then the least free CPU.
      std::int64_t best_extra = 0;
      const IndexSet& calm = state_.NodesWithoutFreeGpu();
      int taken = 0, seen = 0;
      for (NodeId n = calm.Next(begin, end);
           n < end && taken < 4 * limit && (seen < scan_limit || !found);
           n = calm.Next(n + 1, end), ++seen) {
        const NodeState& node = state_.node(n);
        if (node.cpu_free < req.cpu || node.memory_free < req.memory) continue;
        if (FilterNode(state_, n, req, filter_)) continue;
        ++taken;
        const std::int64_t extra =
            (node.devices.empty() ? 0 : (std::int64_t{1} << 40)) + node.cpu_free.value();
        if (found && extra >= best_extra) continue;
        found = true;
        best_extra = extra;
        best = n;
      }
      if (found) {
        best_devices.clear();
        return Keyed(true, {0, static_cast<std::uint64_t>(best)});
      }
      for (GpuTypeId ty = 0; ty < state_.gpu_type_count(); ++ty) {
        scan_shares(ty, 0);
        scan_whole(ty, 1);
      }
      return Keyed(found, best_key);
    }
    // No device of the type has the memory the task asks (the filter would refuse every node).
    if (req.gpu_memory > state_.TypeMaxMemory(type)) return Keyed(false, best_key);
    if (req.shared()) scan_shares(type, ClusterState::ShareBucket(req.gpu.value()));
    scan_whole(type, static_cast<std::uint32_t>(std::max<std::int64_t>(1, req.whole_gpus())));
    return Keyed(found, best_key);
  }

  Transaction& tx_;  // the caller's: a placement found is committed to it
  const ClusterState& state_;
  const JobFilter& filter_;
  const Job& job_;
  const CycleOptions& options_;
  std::array<Task, 8> few_tasks_;  // (declared before tasks_, which points into one of them)
  std::vector<Task> many_tasks_;
  std::span<Task> tasks_;
  NodeId begin_ = 0;
  NodeId end_ = 0;
  Allocation allocation_;
  PlacementKey key_;  // scoring policies: the rank of the first task's node
  bool keyed_ = false;
  // ChooseNode: nodes scored, and whether they fit (the first 64: a task's scan meets few more).
  std::array<std::pair<NodeId, bool>, 64> considered_;
  std::size_t considered_count_ = 0;
  std::vector<DeviceShare> scored_devices_;  // ChooseNode: the devices of the node being scored
};

}  // namespace

std::optional<Allocation> PlaceJob(Transaction& tx, const JobFilter& filter,
                                   const CycleOptions& options, PlacementKey* key) {
  return PlaceJobIn(tx, filter, 0, static_cast<NodeId>(tx.state().node_count()), options, key);
}

std::optional<Allocation> PlaceJobIn(Transaction& tx, const JobFilter& filter, NodeId begin,
                                     NodeId end, const CycleOptions& options, PlacementKey* key) {
  Placer placer(tx, filter, begin, end, options);
  std::optional<Allocation> allocation = placer.Place();
  if (key) *key = placer.key();
  return allocation;
}

}  // namespace arbiter::engine
