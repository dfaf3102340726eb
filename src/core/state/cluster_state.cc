#include "core/state/cluster_state.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <bitset>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <numeric>
#include <set>

namespace arbiter {
namespace {

std::string Quoted(const std::string& s) { return "'" + s + "'"; }

// Levels end with "node" and "nvlink", whatever the configuration listed.
Topology NormalizedTopology(const Topology& given) {
  Topology t;
  t.levels.clear();
  for (const std::string& level : given.levels) {
    if (level != "node" && level != "nvlink") t.levels.push_back(level);
  }
  t.levels.push_back("node");
  t.levels.push_back("nvlink");
  return t;
}

}  // namespace

Result<ClusterState> ClusterState::Create(const ClusterSpec& spec) {
  ClusterState s;
  s.topology_ = NormalizedTopology(spec.topology);
  s.fair_share_half_life_ = spec.fair_share_half_life;
  if (s.fair_share_half_life_ <= 0)
    return Status::InvalidArgument("must be positive", "fair_share_half_life");
  s.fair_share_period_ = spec.fair_share_period;
  if (s.fair_share_period_ < 0)
    return Status::InvalidArgument("must not be negative", "fair_share_period");
  const int operator_levels = s.topology_.node_level();
  {
    std::set<std::string> seen;
    for (const std::string& level : s.topology_.levels) {
      if (!seen.insert(level).second)
        return Status::InvalidArgument("duplicate level " + Quoted(level), "topology.levels");
    }
  }

  // Priority classes.
  if (spec.priority_classes.empty())
    return Status::InvalidArgument("at least one is required", "priority_classes");
  for (const PriorityClassSpec& pc : spec.priority_classes) {
    if (s.FindPriorityClass(pc.name))
      return Status::InvalidArgument("duplicate name " + Quoted(pc.name), "priority_classes");
    s.classes_.push_back(pc);
  }

  // GPU types, in order of first appearance.
  for (const NodeSpec& n : spec.nodes) {
    for (const DeviceSpec& d : n.devices) {
      if (d.type.empty())
        return Status::InvalidArgument("a device has no GPU model", "nodes." + n.name + ".devices");
      if (!s.FindGpuType(d.type)) s.gpu_types_.push_back(d.type);
    }
  }
  if (s.gpu_types_.size() > kMaxGpuTypes)
    return Status::InvalidArgument("more than 64 GPU models", "nodes");
  const std::size_t types = s.gpu_types_.size();

  // Queues: a forest by parent name.
  if (spec.queues.empty()) return Status::InvalidArgument("at least one is required", "queues");
  for (const QueueSpec& q : spec.queues) {
    if (q.name.empty()) return Status::InvalidArgument("a queue has no name", "queues");
    if (s.FindQueue(q.name))
      return Status::InvalidArgument("duplicate name " + Quoted(q.name), "queues");
    if (q.weight <= 0)
      return Status::InvalidArgument("must be positive", "queues." + q.name + ".weight");
    QueueInfo info;
    info.spec = q;
    info.id = static_cast<QueueId>(s.queues_.size());
    s.queues_.push_back(std::move(info));
  }
  for (QueueInfo& q : s.queues_) {
    if (q.spec.parent.empty()) continue;
    auto parent = s.FindQueue(q.spec.parent);
    if (!parent)
      return Status::NotFound("unknown queue " + Quoted(q.spec.parent),
                              "queues." + q.spec.name + ".parent");
    q.parent = *parent;
    s.queues_[*parent].children.push_back(q.id);
  }
  for (QueueInfo& q : s.queues_) {
    int depth = 0;
    for (QueueId p = q.parent; p != kNone; p = s.queues_[p].parent) {
      if (++depth > static_cast<int>(s.queues_.size()))
        return Status::InvalidArgument("the queue tree has a cycle",
                                       "queues." + q.spec.name + ".parent");
    }
    q.depth = depth;
  }

  // Quota limits per queue and resource (QuotaTree).
  {
    std::vector<QueueSpec> specs;
    std::vector<QuotaTree::QueueLink> links;
    for (const QueueInfo& q : s.queues_) {
      specs.push_back(q.spec);
      links.push_back({q.parent, q.children, q.depth});
    }
    Result<QuotaTree> quota = QuotaTree::Resolve(
        specs, links, types, [&](const std::string& name) { return s.FindGpuType(name); });
    if (!quota.ok()) return std::move(quota).status();
    s.quota_ = std::move(*quota);
  }
  s.recent_usage_.assign(s.queues_.size(), 0.0);
  s.period_usage_.assign(s.queues_.size(), 0.0);

  // Topology domains: identity is (parent domain, name); ids in order of first appearance.
  s.domains_by_level_.assign(static_cast<std::size_t>(operator_levels), {});
  std::map<std::pair<DomainId, std::string>, DomainId> domain_ids;
  std::vector<std::vector<DomainId>> node_domains(spec.nodes.size());
  for (std::size_t i = 0; i < spec.nodes.size(); ++i) {
    const NodeSpec& n = spec.nodes[i];
    if (static_cast<int>(n.domains.size()) != operator_levels) {
      return Status::InvalidArgument(
          "expected a domain for each of the " + std::to_string(operator_levels) +
              " levels above 'node', got " + std::to_string(n.domains.size()),
          "nodes." + n.name + ".topology");
    }
    DomainId parent = kNone;
    for (int level = 0; level < operator_levels; ++level) {
      auto key = std::make_pair(parent, n.domains[level]);
      auto it = domain_ids.find(key);
      if (it == domain_ids.end()) {
        Domain d;
        d.level = level;
        d.name = n.domains[level];
        d.parent = parent;
        it = domain_ids.emplace(key, static_cast<DomainId>(s.domains_.size())).first;
        s.domains_.push_back(std::move(d));
      }
      parent = it->second;
      node_domains[i].push_back(parent);
    }
  }
  // Nodes ordered by their domain path so that each domain is a contiguous range.
  std::vector<std::size_t> order(spec.nodes.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return node_domains[a] < node_domains[b]; });

  for (std::size_t pos = 0; pos < order.size(); ++pos) {
    const NodeSpec& n = spec.nodes[order[pos]];
    if (n.name.empty()) return Status::InvalidArgument("a node has no name", "nodes");
    const NodeId id = static_cast<NodeId>(pos);
    if (!s.node_by_name_.emplace(n.name, id).second)
      return Status::InvalidArgument("duplicate name " + Quoted(n.name), "nodes");
    if (n.cpu.value() < 0 || n.memory.value() < 0)
      return Status::InvalidArgument("cpu and memory must not be negative", "nodes." + n.name);
    NodeState ns;
    ns.name = n.name;
    ns.labels = n.labels;
    ns.taints = n.taints;
    ns.cpu = ns.cpu_free = n.cpu;
    ns.memory = ns.memory_free = n.memory;
    ns.cordoned = n.cordoned;
    ns.domains = node_domains[order[pos]];
    if (n.devices.size() > kMaxDevicesPerNode) {
      return Status::InvalidArgument(
          "at most " + std::to_string(kMaxDevicesPerNode) + " devices per node",
          "nodes." + n.name + ".devices");
    }
    ns.first_device = static_cast<std::uint32_t>(s.device_count_);
    std::map<std::uint32_t, std::uint32_t> groups;  // configured group -> dense index
    for (const DeviceSpec& d : n.devices) {
      if (d.memory.value() < 0)
        return Status::InvalidArgument("memory must not be negative",
                                       "nodes." + n.name + ".devices");
      DeviceState ds;
      ds.type = *s.FindGpuType(d.type);
      ds.memory = ds.memory_free = d.memory;
      ds.nvlink_group =
          groups.emplace(d.nvlink_group, static_cast<std::uint32_t>(groups.size())).first->second;
      ns.gpu_types.Add(ds.type);
      ns.devices.push_back(ds);
      s.device_node_.push_back(id);
    }
    ns.nvlink_groups = static_cast<std::uint32_t>(groups.size());
    s.device_count_ += ns.devices.size();
    s.max_devices_ = std::max(s.max_devices_, static_cast<std::uint32_t>(ns.devices.size()));
    for (DomainId d : ns.domains) {
      Domain& dom = s.domains_[d];
      if (dom.end_node == 0) dom.first_node = id;
      dom.end_node = id + 1;
    }
    s.nodes_.push_back(std::move(ns));
  }
  for (DomainId d = 0; d < s.domains_.size(); ++d)
    s.domains_by_level_[static_cast<std::size_t>(s.domains_[d].level)].push_back(d);
  for (auto& level : s.domains_by_level_) {
    std::sort(level.begin(), level.end(), [&](DomainId a, DomainId b) {
      return s.domains_[a].first_node < s.domains_[b].first_node;
    });
  }

  // Indexes: every device starts fully free.
  s.whole_index_.assign(types * (s.max_devices_ + 1), IndexSet(s.nodes_.size()));
  s.share_index_.assign(types * kShareBuckets, IndexSet(s.device_count_));
  s.node_free_devices_.assign(s.nodes_.size() * types, 0);
  s.node_devices_.assign(s.nodes_.size() * types, 0);
  s.domain_free_devices_.assign(s.domains_.size() * types, 0);
  s.domain_free_milli_.assign(s.domains_.size() * types, 0);
  s.nodes_of_type_.assign(types, {});
  s.type_min_memory_.assign(types, GpuMemMiB(std::numeric_limits<std::int64_t>::max()));
  s.type_max_memory_.assign(types, GpuMemMiB(0));
  s.type_max_group_.assign(types, 0);
  s.node_since_.assign(s.nodes_.size(), kNoSince);
  s.by_since_.assign(types, {});
  s.by_since_entry_.assign(s.nodes_.size() * types, {});
  s.unusual_ = IndexSet(s.nodes_.size());
  s.no_free_gpu_ = IndexSet(s.nodes_.size());
  s.node_free_milli_.assign(s.nodes_.size(), 0);
  s.nodes_by_free_gpus_.assign(s.max_devices_ + 1, 0);
  s.device_free_.assign(s.device_count_, static_cast<std::int16_t>(kMilliPerGpu));
  s.node_room_.resize(s.nodes_.size());
  s.node_stamp_.assign(s.nodes_.size(), 0);
  for (NodeId n = 0; n < s.nodes_.size(); ++n) {
    s.node_room_[n] = {s.nodes_[n].cpu.value(), s.nodes_[n].memory.value()};
    s.UpdateUnusual(n);
    s.node_free_milli_[n] = static_cast<std::int64_t>(s.nodes_[n].devices.size()) * kMilliPerGpu;
    s.free_gpu_milli_ += s.node_free_milli_[n];
    ++s.nodes_by_free_gpus_[static_cast<std::size_t>(s.node_free_milli_[n] / kMilliPerGpu)];
    if (s.nodes_[n].devices.empty()) s.no_free_gpu_.Insert(n);
    for (GpuTypeId t = 0; t < types; ++t) {
      if (s.nodes_[n].gpu_types.Contains(t)) s.nodes_of_type_[t].push_back(n);
    }
    if ((s.nodes_[n].gpu_types.bits() & (s.nodes_[n].gpu_types.bits() - 1)) != 0)
      s.mixed_type_nodes_ = true;
    std::map<std::pair<std::uint32_t, GpuTypeId>, std::uint32_t> group_devices;
    for (const DeviceState& d : s.nodes_[n].devices) {
      std::uint32_t& in_group = group_devices[{d.nvlink_group, d.type}];
      ++in_group;
      s.type_max_group_[d.type] = std::max(s.type_max_group_[d.type], in_group);
      s.type_min_memory_[d.type] = std::min(s.type_min_memory_[d.type], d.memory);
      s.type_max_memory_[d.type] = std::max(s.type_max_memory_[d.type], d.memory);
      ++s.node_devices_[n * types + d.type];
      ++s.node_free_devices_[n * types + d.type];
      for (DomainId dom : s.nodes_[n].domains) {
        ++s.domain_free_devices_[dom * types + d.type];
        s.domain_free_milli_[dom * types + d.type] += kMilliPerGpu;
      }
    }
    for (GpuTypeId t = 0; t < types; ++t) {
      const std::uint32_t count = s.node_free_devices_[n * types + t];
      if (count > 0) s.whole_index_[t * (s.max_devices_ + 1) + count].Insert(n);
    }
  }
  // The throughput matrix: a row per workload, with a value for every GPU model of the cluster
  // (models the cluster lacks are ignored: one matrix may serve several clusters).
  s.type_devices_.assign(types, 0);
  for (const NodeState& node : s.nodes_) {
    for (const DeviceState& d : node.devices) ++s.type_devices_[d.type];
  }
  if (!spec.throughput.rows.empty()) {
    if (spec.throughput.label.empty())
      return Status::InvalidArgument("must not be empty", "gpu_throughput.label");
    s.throughput_label_ = spec.throughput.label;
    double all = 0;
    for (std::int64_t c : s.type_devices_) all += static_cast<double>(c);
    for (const ThroughputRow& row : spec.throughput.rows) {
      const std::string field = "gpu_throughput.workloads." + row.workload;
      if (row.workload.empty())
        return Status::InvalidArgument("a workload has no name", "gpu_throughput.workloads");
      const auto index = static_cast<std::uint32_t>(s.throughput_equal_.size());
      if (!s.throughput_rows_.emplace(row.workload, index).second)
        return Status::InvalidArgument("repeated workload", field);
      double equal = 0;
      for (GpuTypeId t = 0; t < types; ++t) {
        auto it = row.by_model.find(s.gpu_types_[t]);
        if (it == row.by_model.end())
          return Status::InvalidArgument(
              "no throughput for GPU model " + Quoted(s.gpu_types_[t]) + " of the cluster", field);
        if (!(it->second > 0) || !std::isfinite(it->second))
          return Status::InvalidArgument("must be a positive number", field + "." + it->first);
        s.throughput_.push_back(it->second);
        equal += it->second * static_cast<double>(s.type_devices_[t]);
      }
      s.throughput_equal_.push_back(all > 0 ? equal / all : 1);
    }
  }
  // The digest of the nodes' capacity, node by node in id order (SplitMix64's finaliser over a
  // running sum: any change of a value, or of the order, changes it).
  std::uint64_t digest = 0x13198a2e03707344ull;
  auto mix = [&digest](std::uint64_t v) {
    std::uint64_t x = (digest += v * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    digest = x ^ (x >> 31);
  };
  mix(types);
  for (const NodeState& node : s.nodes_) {
    mix(static_cast<std::uint64_t>(node.cpu.value()));
    mix(static_cast<std::uint64_t>(node.memory.value()));
    mix(node.devices.size());
    for (const DeviceState& d : node.devices) {
      mix(d.type);
      mix(static_cast<std::uint64_t>(d.memory.value()));
      mix(d.nvlink_group);
    }
  }
  s.capacity_digest_ = digest;
  return s;
}

std::optional<GpuTypeId> ClusterState::FindGpuType(const std::string& name) const {
  for (GpuTypeId t = 0; t < gpu_types_.size(); ++t) {
    if (gpu_types_[t] == name) return t;
  }
  return std::nullopt;
}

std::optional<QueueId> ClusterState::FindQueue(const std::string& name) const {
  for (const QueueInfo& q : queues_) {
    if (q.spec.name == name) return q.id;
  }
  return std::nullopt;
}

std::optional<PriorityClassId> ClusterState::FindPriorityClass(const std::string& name) const {
  for (PriorityClassId i = 0; i < classes_.size(); ++i) {
    if (classes_[i].name == name) return i;
  }
  return std::nullopt;
}

std::optional<NodeId> ClusterState::FindNode(const std::string& name) const {
  auto it = node_by_name_.find(name);
  if (it == node_by_name_.end()) return std::nullopt;
  return it->second;
}

const RunningJob* ClusterState::FindRunning(JobId id) const {
  auto it = running_.find(id);
  return it == running_.end() ? nullptr : &it->second;
}

// ---- Capacity changes ----

void ClusterState::AdjustFree(NodeId n, std::uint32_t d, MilliGpu delta, GpuMemMiB memory_delta) {
  NodeState& node = nodes_[n];
  DeviceState& dev = node.devices[d];
  const std::size_t types = gpu_types_.size();
  const std::int64_t old_free = dev.free.value();
  const std::int64_t new_free = old_free + delta.value();
  assert(new_free >= 0 && new_free <= kMilliPerGpu);
  dev.free = MilliGpu(new_free);
  dev.memory_free += memory_delta;
  assert(dev.memory_free.value() >= 0 && dev.memory_free <= dev.memory);

  std::int64_t& node_free = node_free_milli_[n];
  if (node_free == 0) no_free_gpu_.Erase(n);
  --nodes_by_free_gpus_[static_cast<std::size_t>(node_free / kMilliPerGpu)];
  node_free += delta.value();
  ++nodes_by_free_gpus_[static_cast<std::size_t>(node_free / kMilliPerGpu)];
  free_gpu_milli_ += delta.value();
  if (node_free == 0) no_free_gpu_.Insert(n);

  const std::uint32_t global = node.first_device + d;
  device_free_[global] = static_cast<std::int16_t>(new_free);
  if (old_free > 0 && old_free < kMilliPerGpu)
    share_index_[dev.type * kShareBuckets + ShareBucket(old_free)].Erase(global);
  if (new_free > 0 && new_free < kMilliPerGpu)
    share_index_[dev.type * kShareBuckets + ShareBucket(new_free)].Insert(global);

  const int whole_delta = (new_free == kMilliPerGpu) - (old_free == kMilliPerGpu);
  if (whole_delta != 0) {
    std::uint32_t& count = node_free_devices_[n * types + dev.type];
    IndexSet* buckets = &whole_index_[dev.type * (max_devices_ + 1)];
    if (count > 0) buckets[count].Erase(n);
    count = static_cast<std::uint32_t>(static_cast<int>(count) + whole_delta);
    if (count > 0) buckets[count].Insert(n);
  }
  for (DomainId dom : node.domains) {
    domain_free_devices_[dom * types + dev.type] += whole_delta;
    domain_free_milli_[dom * types + dev.type] += delta.value();
  }
}

void ClusterState::AdjustTask(NodeId n, MilliCpu cpu, MemMiB memory,
                              std::span<const DeviceShare> devices, bool take) {
  NodeState& node = nodes_[n];
  if (take) {
    node.cpu_free -= cpu;
    node.memory_free -= memory;
    assert(node.cpu_free.value() >= 0 && node.memory_free.value() >= 0);
    ++node.tasks;
  } else {
    node.cpu_free += cpu;
    node.memory_free += memory;
    --node.tasks;
  }
  node_room_[n] = {node.cpu_free.value(), node.memory_free.value()};
  Restamp(n);
  for (const DeviceShare& share : devices) {
    if (take) {
      AdjustFree(n, share.device, MilliGpu(0) - share.gpu, GpuMemMiB(0) - share.memory);
    } else {
      AdjustFree(n, share.device, share.gpu, share.memory);
    }
  }
}

void ClusterState::TakeTask(const TaskAllocation& task) {
  AdjustTask(task.node, task.cpu, task.memory, task.devices, /*take=*/true);
}

void ClusterState::GiveTask(const TaskAllocation& task) {
  AdjustTask(task.node, task.cpu, task.memory, task.devices, /*take=*/false);
}

void ClusterState::Restamp(NodeId n) {
  if (!restamp_) return;  // (a transaction being undone: its stamps are given back after)
  if (!marks_.empty()) stamps_before_.emplace_back(n, node_stamp_[n]);
  node_stamp_[n] = ++last_stamp_;
}

// ---- Transactions ----

namespace {
#ifdef NDEBUG
std::atomic<bool> check_discards_by_default{false};
#else
std::atomic<bool> check_discards_by_default{true};
#endif
}  // namespace

void ClusterState::SetCheckDiscardsByDefault(bool on) { check_discards_by_default = on; }
bool ClusterState::DefaultCheckDiscards() { return check_discards_by_default; }

void ClusterState::Log(Op op, const TaskAllocation& task) {
  Undo u;
  u.op = op;
  u.node = task.node;
  u.first = static_cast<std::uint32_t>(undo_devices_.size());
  u.count = static_cast<std::uint32_t>(task.devices.size());
  u.cpu = task.cpu;
  u.memory = task.memory;
  undo_devices_.insert(undo_devices_.end(), task.devices.begin(), task.devices.end());
  undo_.push_back(u);
}

void ClusterState::Redo(const Undo& u, bool forward) {
  auto task = [&](bool take) {
    AdjustTask(u.node, u.cpu, u.memory,
               std::span<const DeviceShare>(undo_devices_.data() + u.first, u.count), take);
  };
  auto evict = [&](bool out, bool charge) {
    const RunningJob& r = *u.job;
    if (out) {
      for (auto t = r.allocation.tasks.rbegin(); t != r.allocation.tasks.rend(); ++t) GiveTask(*t);
    } else {
      for (const TaskAllocation& t : r.allocation.tasks) TakeTask(t);
    }
    const std::int64_t milli = r.job.total_gpu().value();
    if (charge) Charge(r.job.queue, r.allocation.gpu_type, out ? -milli : milli);
  };
  switch (u.op) {
    case Op::kTake:
    case Op::kHold:
      task(/*take=*/forward);
      break;
    case Op::kGive:
    case Op::kUnhold:
      task(/*take=*/!forward);
      break;
    case Op::kCharge:
      Charge(u.queue, u.type, forward ? u.milli : -u.milli);
      break;
    case Op::kEvict:
      evict(forward, /*charge=*/true);
      break;
    case Op::kReadmit:
      evict(!forward, /*charge=*/true);
      break;
    case Op::kRelease:
      evict(forward, /*charge=*/false);
      break;
  }
}

std::size_t ClusterState::Open() {
  marks_.push_back({undo_.size(), undo_devices_.size(), stamps_before_.size()});
  return marks_.size();
}

void ClusterState::Close([[maybe_unused]] std::size_t depth, bool commit) {
  assert(depth == marks_.size() && "only the innermost open transaction may close");
  const Mark mark = marks_.back();
  marks_.pop_back();
  if (commit) return;  // the changes stay in the log, the enclosing transaction's now
  if (undo_.size() == mark.undo) return;  // nothing to undo (a trial that took nothing)
  restamp_ = false;
  for (std::size_t i = undo_.size(); i-- > mark.undo;) Redo(undo_[i], /*forward=*/false);
  restamp_ = true;
  // Newest first: a node changed several times gets the stamp it had before the first change.
  for (std::size_t i = stamps_before_.size(); i-- > mark.stamps;)
    node_stamp_[stamps_before_[i].first] = stamps_before_[i].second;
  undo_.resize(mark.undo);
  undo_devices_.resize(mark.devices);
  stamps_before_.resize(mark.stamps);
  if (check_discards_) {
    if (Status st = CheckInvariants(); !st.ok()) {
      std::fprintf(stderr, "arbiter: broken after a discarded transaction: %s\n",
                   st.message().c_str());
      std::abort();
    }
  }
}

Transaction::Transaction(ClusterState& state) : state_(state), depth_(0) {
  assert(!state.in_transaction() && "an outermost transaction opens on a state without one");
  depth_ = state_.Open();
}

Transaction::Transaction(Transaction& enclosing) : state_(enclosing.state_), depth_(0) {
  assert(enclosing.open_ && enclosing.depth_ == state_.marks_.size());
  depth_ = state_.Open();
}

Transaction::~Transaction() {
  if (open_) Discard();
}

void Transaction::Change(ClusterState::Op op, const TaskAllocation& task) {
  assert(open_ && depth_ == state_.marks_.size());
  state_.Log(op, task);
  const bool take = op == ClusterState::Op::kTake || op == ClusterState::Op::kHold;
  state_.AdjustTask(task.node, task.cpu, task.memory, task.devices, take);
}

void Transaction::Take(const TaskAllocation& task) { Change(ClusterState::Op::kTake, task); }
void Transaction::Give(const TaskAllocation& task) { Change(ClusterState::Op::kGive, task); }
void Transaction::Hold(const TaskAllocation& hold) { Change(ClusterState::Op::kHold, hold); }
void Transaction::Unhold(const TaskAllocation& hold) { Change(ClusterState::Op::kUnhold, hold); }

void Transaction::Charge(QueueId queue, GpuTypeId type, std::int64_t milli) {
  if (type == kNone || milli == 0) return;  // (charges nothing)
  Record({.op = ClusterState::Op::kCharge, .queue = queue, .type = type, .milli = milli});
}

void Transaction::Evict(const RunningJob& job) {
  Record({.op = ClusterState::Op::kEvict, .job = &job});
}

void Transaction::Readmit(const RunningJob& job) {
  Record({.op = ClusterState::Op::kReadmit, .job = &job});
}

void Transaction::Release(const RunningJob& job) {
  Record({.op = ClusterState::Op::kRelease, .job = &job});
}

void Transaction::Record(const ClusterState::Undo& u) {
  assert(open_ && depth_ == state_.marks_.size());
  state_.undo_.push_back(u);
  state_.Redo(u, /*forward=*/true);
}

void Transaction::Commit() {
  assert(open_ && depth_ > 1 && "the outermost transaction cannot commit");
  open_ = false;
  state_.Close(depth_, /*commit=*/true);
}

void Transaction::Discard() {
  assert(open_);
  open_ = false;
  state_.Close(depth_, /*commit=*/false);
}

void ClusterState::Charge(QueueId queue, GpuTypeId type, std::int64_t milli) {
  quota_.Charge(queue, type, milli);
}

// Checks one task against what is free now, given what earlier tasks of the same job took.
Status ClusterState::CheckFits(const Job& job, const Allocation& allocation) const {
  if (running_.count(job.id))
    return Status::Conflict("job " + std::to_string(job.id) + " is already running");
  if (job.queue >= queues_.size())
    return Status::InvalidArgument("job " + std::to_string(job.id) + ": unknown queue id");
  if (job.priority_class >= classes_.size())
    return Status::InvalidArgument("job " + std::to_string(job.id) + ": unknown priority class id");
  if (static_cast<std::int64_t>(allocation.tasks.size()) != job.task_count()) {
    return Status::InvalidArgument("job " + std::to_string(job.id) + ": allocation has " +
                                   std::to_string(allocation.tasks.size()) + " tasks, the job " +
                                   std::to_string(job.task_count()));
  }
  const bool uses_gpu = job.total_gpu().value() > 0;
  if (uses_gpu &&
      (allocation.gpu_type >= gpu_types_.size() || !job.gpu_types.Accepts(allocation.gpu_type))) {
    return Status::InvalidArgument("job " + std::to_string(job.id) +
                                   ": GPU type not accepted by the job");
  }
  // Each task once: a usual job's few tasks are compared with the earlier ones, a large gang's
  // looked up in a set.
  const std::span<const TaskAllocation> tasks = allocation.tasks;
  constexpr std::size_t kFewTasks = 16;
  std::set<std::pair<std::uint32_t, std::uint32_t>> seen;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    const TaskAllocation& t = tasks[i];
    // Built only for an error.
    auto where = [&] {
      return "job " + std::to_string(job.id) + " task " + std::to_string(t.group) + "/" +
             std::to_string(t.index);
    };
    const bool repeated =
        tasks.size() <= kFewTasks
            ? std::any_of(
                  tasks.begin(), tasks.begin() + static_cast<std::ptrdiff_t>(i),
                  [&](const TaskAllocation& e) { return e.group == t.group && e.index == t.index; })
            : !seen.emplace(t.group, t.index).second;
    if (t.group >= job.groups.size() ||
        t.index >= static_cast<std::uint32_t>(job.groups[t.group].count) || repeated) {
      return Status::InvalidArgument(where() + ": no such task, or placed twice");
    }
    const TaskRequest& req = job.groups[t.group].request;
    if (t.node >= nodes_.size()) return Status::InvalidArgument(where() + ": unknown node");
    if (t.cpu != req.cpu || t.memory != req.memory)
      return Status::InvalidArgument(where() + ": cpu or memory differs from the request");
    const std::int64_t want_devices = req.shared() ? 1 : req.whole_gpus();
    if (static_cast<std::int64_t>(t.devices.size()) != want_devices)
      return Status::InvalidArgument(where() + ": wrong number of devices");
    std::bitset<kMaxDevicesPerNode> devices;  // those of the task so far
    for (const DeviceShare& share : t.devices) {
      if (share.device >= nodes_[t.node].devices.size() || devices.test(share.device))
        return Status::InvalidArgument(where() + ": bad device index");
      devices.set(share.device);
      const DeviceState& dev = nodes_[t.node].devices[share.device];
      if (dev.type != allocation.gpu_type)
        return Status::InvalidArgument(where() + ": device of another GPU type");
      if (req.shared()) {
        if (share.gpu != req.gpu || share.memory != req.gpu_memory)
          return Status::InvalidArgument(where() + ": share differs from the request");
      } else if (share.gpu != kWholeGpu || share.memory != dev.memory ||
                 dev.memory < req.gpu_memory) {
        return Status::InvalidArgument(where() +
                                       ": a whole device must be taken whole, with enough memory");
      }
    }
  }
  return Status::Ok();
}

Status ClusterState::Bind(Job job, Allocation allocation, Millis now) {
  if (in_transaction()) return Status::Internal("Bind inside a transaction");
  if (Status st = CheckFits(job, allocation); !st.ok()) return st;
  // Take task by task, checking against what is left; undo on the first misfit.
  std::size_t taken = 0;
  Status result;
  for (const TaskAllocation& t : allocation.tasks) {
    const NodeState& node = nodes_[t.node];
    bool fits = node.cpu_free >= t.cpu && node.memory_free >= t.memory;
    for (const DeviceShare& share : t.devices) {
      const DeviceState& dev = node.devices[share.device];
      fits = fits && dev.free >= share.gpu && dev.memory_free >= share.memory;
    }
    if (!fits) {
      result =
          Status::Conflict("job " + std::to_string(job.id) + ": task " + std::to_string(t.group) +
                           "/" + std::to_string(t.index) + " does not fit on node " + node.name);
      break;
    }
    TakeTask(t);
    ++taken;
  }
  if (!result.ok()) {
    for (std::size_t i = taken; i-- > 0;) GiveTask(allocation.tasks[i]);
    return result;
  }
  Charge(job.queue, allocation.gpu_type, job.total_gpu().value());
  CountShapes(job, +1);
  const JobId id = job.id;
  RunningJob& running =
      running_.try_emplace(id, RunningJob{std::move(job), std::move(allocation), now, now, {}})
          .first->second;
  const Job& started = running.job;
  const Allocation& held = running.allocation;
  if (auto it = evictions_.find(id); it != evictions_.end()) running.evictions = it->second;
  for (const TaskAllocation& t : held.tasks) {
    std::vector<Resident>& residents = nodes_[t.node].residents;
    auto it = std::find_if(residents.begin(), residents.end(),
                           [&](const Resident& r) { return r.job == &running; });
    if (it == residents.end()) {
      residents.push_back({&running, started.queue, started.priority_class, held.gpu_type,
                           started.total_gpu().value(), 0, now, started.restart_overhead,
                           !running.evictions.empty()});
      it = residents.end() - 1;
    }
    for (const DeviceShare& d : t.devices) it->held += d.gpu.value();
  }
  for (const TaskAllocation& t : held.tasks) UpdateResidents(t.node);
  return Status::Ok();
}

namespace {

Status CheckBindOfPending(const Bind& bind, std::span<const Job> pending) {
  if (bind.pending_index >= pending.size() || pending[bind.pending_index].id != bind.job) {
    return Status::InvalidArgument("plan bind of job " + std::to_string(bind.job) +
                                   " does not match the pending list");
  }
  return Status::Ok();
}

}  // namespace

Status ClusterState::Apply(const Plan& plan, std::span<const Job> pending) {
  for (const Eviction& e : plan.evictions) {
    if (Status st = Evict(e.job, plan.now); !st.ok()) return st;
  }
  for (const struct Bind& b : plan.binds) {
    if (Status st = CheckBindOfPending(b, pending); !st.ok()) return st;
    if (Status st = Bind(pending[b.pending_index], b.allocation, std::max(plan.now, b.start_after));
        !st.ok())
      return st;
  }
  return Status::Ok();
}

Status ClusterState::Apply(Plan&& plan, std::span<Job> pending) {
  for (const Eviction& e : plan.evictions) {
    if (Status st = Evict(e.job, plan.now); !st.ok()) return st;
  }
  for (struct Bind& b : plan.binds) {
    if (Status st = CheckBindOfPending(b, pending); !st.ok()) return st;
    if (Status st = Bind(std::move(pending[b.pending_index]), std::move(b.allocation),
                         std::max(plan.now, b.start_after));
        !st.ok())
      return st;
  }
  return Status::Ok();
}

Status ClusterState::Evict(JobId id, Millis now) {
  if (Status st = Unbind(id, now); !st.ok()) return st;
  evictions_[id].push_back(now);
  return Status::Ok();
}

std::span<const Millis> ClusterState::EvictionTimes(JobId id) const {
  auto it = evictions_.find(id);
  if (it == evictions_.end()) return {};
  return it->second;
}

void ClusterState::RestoreEvictions(JobId id, std::vector<Millis> times) {
  if (times.empty()) {
    evictions_.erase(id);
  } else {
    evictions_[id] = std::move(times);
  }
}

Status ClusterState::Unbind(JobId id, Millis now) {
  if (in_transaction()) return Status::Internal("Unbind inside a transaction");
  AccrueUsage(now);
  auto it = running_.find(id);
  if (it == running_.end())
    return Status::NotFound("job " + std::to_string(id) + " is not running");
  for (const TaskAllocation& t : it->second.allocation.tasks) {
    GiveTask(t);
    std::erase_if(nodes_[t.node].residents,
                  [&](const Resident& r) { return r.job == &it->second; });
    UpdateResidents(t.node);
  }
  Charge(it->second.job.queue, it->second.allocation.gpu_type, -it->second.job.total_gpu().value());
  CountShapes(it->second.job, -1);
  running_.erase(it);
  return Status::Ok();
}

std::uint64_t ClusterState::NextStateId() {
  static std::atomic<std::uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

std::int64_t ClusterState::RoundedShapeCount(std::int64_t count) {
  if (count < 16) return count;
  const auto drop = static_cast<int>(std::bit_width(static_cast<std::uint64_t>(count))) - 4;
  return count >> drop << drop;
}

namespace {

// One shape with its rounded count, well mixed: the digest is the sum of these (a multiset hash,
// which a change of one count updates in place).
std::uint64_t ShapeDigest(const TaskShapeKey& key, std::int64_t count) {
  std::uint64_t x =
      static_cast<std::uint64_t>(key.gpu) * 0x9e3779b97f4a7c15ull +
      static_cast<std::uint64_t>(key.cpu) * 0xc2b2ae3d27d4eb4full +
      static_cast<std::uint64_t>(key.memory) * 0x165667b19e3779f9ull +
      key.gpu_types * 0xd6e8feb86659fd93ull +
      static_cast<std::uint64_t>(ClusterState::RoundedShapeCount(count)) * 0xff51afd7ed558ccdull;
  // SplitMix64's finaliser.
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

void ClusterState::CountShapes(const Job& job, int sign) {
  for (const TaskGroup& g : job.groups) {
    const TaskShapeKey key{g.request.gpu.value(), g.request.cpu.value(), g.request.memory.value(),
                           job.gpu_types.bits()};
    auto it = running_shapes_.try_emplace(key, 0).first;
    if (it->second != 0) running_shapes_digest_ -= ShapeDigest(key, it->second);
    it->second += sign * g.count;
    if (it->second == 0) {
      running_shapes_.erase(it);
    } else {
      running_shapes_digest_ += ShapeDigest(key, it->second);
    }
  }
}

void ClusterState::UpdateResidents(NodeId n) {
  Millis since = kNoSince;
  std::uint64_t queues = 0;
  for (const Resident& r : nodes_[n].residents) {
    since = std::max(since, r.since);
    queues |= std::uint64_t{1} << (r.queue % 64);
  }
  nodes_[n].resident_queues = queues;
  const Millis old = node_since_[n];
  if (since == old) return;
  for (GpuTypeId t = 0; t < gpu_types_.size(); ++t) {
    if (!nodes_[n].gpu_types.Contains(t)) continue;
    NodesBySinceSet& order = by_since_[t];
    NodesBySinceSet::iterator& entry = by_since_entry_[n * gpu_types_.size() + t];
    if (old == kNoSince) {
      entry = order.insert({since, n}).first;
    } else if (since == kNoSince) {
      order.erase(entry);
    } else {
      // The node moves: its entry is reused rather than freed and made again. A job that starts
      // usually makes its node the latest, the first of the order.
      NodesBySinceSet::node_type moved = order.extract(entry);
      moved.value().first = since;
      entry = since > old ? order.insert(order.begin(), std::move(moved))
                          : order.insert(std::move(moved)).position;
    }
  }
  node_since_[n] = since;
}

void ClusterState::UpdateUnusual(NodeId n) {
  const NodeState& node = nodes_[n];
  if (!node.healthy || node.cordoned || !node.taints.empty()) {
    unusual_.Insert(n);
  } else {
    unusual_.Erase(n);
  }
}

Status ClusterState::SetCordoned(NodeId node, bool cordoned) {
  if (node >= nodes_.size()) return Status::NotFound("unknown node id " + std::to_string(node));
  nodes_[node].cordoned = cordoned;
  UpdateUnusual(node);
  return Status::Ok();
}

std::string ClusterState::Describe(const TaskAllocation& task) const {
  std::string out = nodes_[task.node].name;
  if (task.devices.empty()) return out;
  out += "[";
  for (std::size_t i = 0; i < task.devices.size();) {
    std::size_t j = i;
    while (j + 1 < task.devices.size() &&
           task.devices[j + 1].device == task.devices[j].device + 1) {
      ++j;
    }
    if (i > 0) out += ",";
    out += std::to_string(task.devices[i].device);
    if (j > i) out += "-" + std::to_string(task.devices[j].device);
    i = j + 1;
  }
  out += "]";
  if (task.devices.size() == 1 && task.devices[0].gpu != kWholeGpu) {
    char share[32];
    std::snprintf(share, sizeof share, ":%.3g",
                  static_cast<double>(task.devices[0].gpu.value()) / kMilliPerGpu);
    out += share;
  }
  return out;
}

Status ClusterState::SetHealthy(NodeId node, bool healthy) {
  if (node >= nodes_.size()) return Status::NotFound("unknown node id " + std::to_string(node));
  nodes_[node].healthy = healthy;
  UpdateUnusual(node);
  return Status::Ok();
}

Status ClusterState::RecordCheckpoint(JobId job, Millis at) {
  auto it = running_.find(job);
  if (it == running_.end())
    return Status::NotFound("job " + std::to_string(job) + " is not running");
  RunningJob& r = it->second;
  r.last_checkpoint = std::max(r.last_checkpoint, at);
  for (const TaskAllocation& t : r.allocation.tasks) {
    for (Resident& res : nodes_[t.node].residents) {
      if (res.job == &r) res.since = std::max(r.start_time, r.last_checkpoint);
    }
    UpdateResidents(t.node);
  }
  return Status::Ok();
}

void ClusterState::AccrueUsage(Millis now) {
  if (!accrued_) {
    accrued_ = true;
    last_accrual_ = now;
    return;
  }
  if (now <= last_accrual_) return;
  auto fold = [&](Millis to) {
    const double dt = static_cast<double>(to - last_accrual_);
    const double decay = std::exp2(-dt / static_cast<double>(fair_share_half_life_));
    for (QueueId q = 0; q < queues_.size(); ++q) {
      recent_usage_[q] = recent_usage_[q] * decay + static_cast<double>(usage(q, 0)) * dt;
    }
    last_accrual_ = to;
  };
  if (fair_share_period_ > 0) {
    // The last boundary at or before now (times may be negative: floor, not truncation).
    Millis boundary = now / fair_share_period_ * fair_share_period_;
    if (boundary > now) boundary -= fair_share_period_;
    if (boundary > last_accrual_) {
      fold(boundary);
      period_usage_ = recent_usage_;
    }
  }
  if (now > last_accrual_) fold(now);
}

Millis ClusterState::NextFairShareRefresh(Millis now) const {
  if (fair_share_period_ <= 0) return -1;
  Millis boundary = now / fair_share_period_ * fair_share_period_;
  if (boundary > now) boundary -= fair_share_period_;
  return boundary + fair_share_period_;
}

void ClusterState::RestoreRecentUsage(QueueId q, double usage, Millis as_of) {
  recent_usage_[q] = usage;
  period_usage_[q] = usage;
  accrued_ = true;
  last_accrual_ = as_of;
}

void ClusterState::RecordFinishedService(Millis gpu_ms, std::size_t window) {
  if (window == 0) return;
  if (service_recorded_.size() > window) {  // a smaller window than before: keep the newest
    std::rotate(service_recorded_.begin(),
                service_recorded_.begin() + static_cast<std::ptrdiff_t>(service_oldest_),
                service_recorded_.end());
    service_recorded_.erase(service_recorded_.begin(),
                            service_recorded_.end() - static_cast<std::ptrdiff_t>(window));
    service_oldest_ = 0;
    service_sorted_ = service_recorded_;
    std::sort(service_sorted_.begin(), service_sorted_.end());
  }
  gpu_ms = std::max<Millis>(gpu_ms, 0);
  if (service_recorded_.size() < window) {
    service_recorded_.push_back(gpu_ms);
  } else {
    Millis& oldest = service_recorded_[service_oldest_];
    service_sorted_.erase(std::lower_bound(service_sorted_.begin(), service_sorted_.end(), oldest));
    oldest = gpu_ms;
    service_oldest_ = (service_oldest_ + 1) % window;
  }
  service_sorted_.insert(std::upper_bound(service_sorted_.begin(), service_sorted_.end(), gpu_ms),
                         gpu_ms);
  service_prefix_.assign(service_sorted_.size() + 1, 0);
  for (std::size_t i = 0; i < service_sorted_.size(); ++i)
    service_prefix_[i + 1] = service_prefix_[i] + static_cast<double>(service_sorted_[i]);
}

std::vector<Millis> ClusterState::finished_service() const {
  std::vector<Millis> out(service_recorded_.begin() + static_cast<std::ptrdiff_t>(service_oldest_),
                          service_recorded_.end());
  out.insert(out.end(), service_recorded_.begin(),
             service_recorded_.begin() + static_cast<std::ptrdiff_t>(service_oldest_));
  return out;
}

const double* ClusterState::ThroughputRowOf(const Job& job) const {
  if (throughput_rows_.empty()) return nullptr;
  auto label = job.labels.find(throughput_label_);
  if (label == job.labels.end()) return nullptr;
  auto row = throughput_rows_.find(label->second);
  if (row == throughput_rows_.end()) return nullptr;
  return throughput_.data() + static_cast<std::size_t>(row->second) * gpu_types_.size();
}

double ClusterState::Throughput(const Job& job, GpuTypeId type) const {
  const double* row = ThroughputRowOf(job);
  return row != nullptr && type != kNone ? row[type] : 1.0;
}

double ClusterState::NormalizedThroughput(const Job& job, GpuTypeId type) const {
  const double* row = ThroughputRowOf(job);
  if (row == nullptr || type == kNone) return 1.0;
  const auto index = static_cast<std::size_t>(row - throughput_.data()) / gpu_types_.size();
  return row[type] / throughput_equal_[index];
}

double ClusterState::GittinsIndex(Millis service, Millis quantum) const {
  const auto& s = service_sorted_;
  // The recorded jobs that ran longer than `service`: [first, s.size()); of them, those that
  // end within the quantum: [first, within).
  const auto first =
      static_cast<std::size_t>(std::upper_bound(s.begin(), s.end(), service) - s.begin());
  if (first == s.size() || quantum <= 0) return 0;
  const auto within =
      static_cast<std::size_t>(std::upper_bound(s.begin(), s.end(), service + quantum) - s.begin());
  // Both over the survivors' count, which cancels: the chance to end within the quantum over the
  // service expected to be spent in it.
  const double ended = static_cast<double>(within - first);
  const double spent = service_prefix_[within] - service_prefix_[first] -
                       static_cast<double>(service) * ended +
                       static_cast<double>(quantum) * static_cast<double>(s.size() - within);
  constexpr double kGpuHour = 3600.0 * kMillisPerSecond;
  return spent > 0 ? ended / spent * kGpuHour : 0;
}

// ---- Invariants ----

Status ClusterState::CheckInvariants() const {
  const std::size_t types = gpu_types_.size();
  std::vector<std::int64_t> used(device_count_, 0), used_mem(device_count_, 0);
  std::vector<std::int64_t> cpu(nodes_.size(), 0), mem(nodes_.size(), 0);
  std::vector<std::uint32_t> tasks(nodes_.size(), 0);
  // Every (node, job) of a running task, once each, by node. (The check allocates nothing per
  // node: the tests run it after every discard, under the sanitizers too.)
  std::vector<std::pair<NodeId, JobId>> node_jobs;
  std::vector<std::int64_t> usage(quota_.usage().size(), 0);
  const std::size_t resources = quota_resource_count();
  for (const auto& [id, r] : running_) {
    for (const TaskAllocation& t : r.allocation.tasks) {
      cpu[t.node] += t.cpu.value();
      mem[t.node] += t.memory.value();
      ++tasks[t.node];
      node_jobs.emplace_back(t.node, id);
      for (const DeviceShare& share : t.devices) {
        used[nodes_[t.node].first_device + share.device] += share.gpu.value();
        used_mem[nodes_[t.node].first_device + share.device] += share.memory.value();
      }
    }
    if (r.allocation.gpu_type != kNone) {
      for (QueueId q = r.job.queue; q != kNone; q = queues_[q].parent) {
        usage[q * resources] += r.job.total_gpu().value();
        usage[q * resources + 1 + r.allocation.gpu_type] += r.job.total_gpu().value();
      }
    }
  }
  // The open transactions' changes, in order.
  auto task = [&](NodeId n, MilliCpu c, MemMiB m, std::span<const DeviceShare> devices, int sign) {
    cpu[n] += sign * c.value();
    mem[n] += sign * m.value();
    tasks[n] = static_cast<std::uint32_t>(static_cast<std::int64_t>(tasks[n]) + sign);
    for (const DeviceShare& share : devices) {
      used[nodes_[n].first_device + share.device] += sign * share.gpu.value();
      used_mem[nodes_[n].first_device + share.device] += sign * share.memory.value();
    }
  };
  auto charge = [&](QueueId queue, GpuTypeId type, std::int64_t milli) {
    if (type == kNone) return;
    for (QueueId q = queue; q != kNone; q = queues_[q].parent) {
      usage[q * resources] += milli;
      usage[q * resources + 1 + type] += milli;
    }
  };
  for (const Undo& u : undo_) {
    const std::span<const DeviceShare> devices(undo_devices_.data() + u.first, u.count);
    switch (u.op) {
      case Op::kTake:
      case Op::kHold:
        task(u.node, u.cpu, u.memory, devices, +1);
        break;
      case Op::kGive:
      case Op::kUnhold:
        task(u.node, u.cpu, u.memory, devices, -1);
        break;
      case Op::kCharge:
        charge(u.queue, u.type, u.milli);
        break;
      case Op::kEvict:
      case Op::kReadmit:
      case Op::kRelease: {
        const int sign = u.op == Op::kReadmit ? +1 : -1;
        for (const TaskAllocation& t : u.job->allocation.tasks)
          task(t.node, t.cpu, t.memory, t.devices, sign);
        if (u.op != Op::kRelease) {
          charge(u.job->job.queue, u.job->allocation.gpu_type,
                 sign * u.job->job.total_gpu().value());
        }
        break;
      }
    }
  }
  if (!std::equal(usage.begin(), usage.end(), quota_.usage().begin(), quota_.usage().end()))
    return Status::Internal("invariant: queue usage does not match the running jobs");
  std::uint64_t digest = 0;
  for (const auto& [key, count] : running_shapes_) digest += ShapeDigest(key, count);
  if (digest != running_shapes_digest_)
    return Status::Internal("invariant: the digest of the running shapes does not match them");
  std::sort(node_jobs.begin(), node_jobs.end());
  node_jobs.erase(std::unique(node_jobs.begin(), node_jobs.end()), node_jobs.end());
  auto next_job = node_jobs.begin();
  std::vector<JobId> listed;
  std::vector<std::uint32_t> whole(types, 0);
  // How many devices (nodes) each share (free device) index should hold.
  std::vector<std::size_t> in_share(share_index_.size(), 0), in_whole(whole_index_.size(), 0);
  std::vector<std::int64_t> dom_devices(domains_.size() * types, 0),
      dom_milli(domains_.size() * types, 0);
  for (NodeId n = 0; n < nodes_.size(); ++n) {
    const NodeState& node = nodes_[n];
    auto broken = [&](const std::string& what) {
      return Status::Internal("invariant: node " + node.name + ": " + what);
    };
    if (node.cpu_free.value() != node.cpu.value() - cpu[n] || node.cpu_free.value() < 0)
      return broken("CPU over-allocated or miscounted");
    if (node.memory_free.value() != node.memory.value() - mem[n] || node.memory_free.value() < 0)
      return broken("memory over-allocated or miscounted");
    if (node.tasks != tasks[n]) return broken("task count");
    if (node_room_[n].cpu != node.cpu_free.value() ||
        node_room_[n].memory != node.memory_free.value())
      return broken("free CPU or memory array out of date");
    for (std::uint32_t d = 0; d < node.devices.size(); ++d) {
      if (device_free_[node.first_device + d] != node.devices[d].free.value())
        return broken("device free array out of date");
    }
    listed.clear();
    for (const Resident& r : node.residents) listed.push_back(r.job->job.id);
    std::sort(listed.begin(), listed.end());
    for (JobId id : listed) {
      if (next_job == node_jobs.end() || *next_job != std::make_pair(n, id))
        return broken("running job list out of date");
      ++next_job;
    }
    if (next_job != node_jobs.end() && next_job->first == n)
      return broken("running job list out of date");
    Millis since = kNoSince;
    std::uint64_t queues = 0;
    for (const Resident& r : node.residents) {
      since = std::max(since, r.since);
      queues |= std::uint64_t{1} << (r.queue % 64);
    }
    if (queues != node.resident_queues) return broken("resident queues out of date");
    if (since != node_since_[n]) return broken("latest checkpoint index out of date");
    for (GpuTypeId t = 0; t < types; ++t) {
      const bool listed_since = by_since_[t].count({since, n}) > 0;
      if (node.gpu_types.Contains(t) && since != kNoSince &&
          (!listed_since || *by_since_entry_[n * types + t] != std::make_pair(since, n)))
        return broken("not in the checkpoint order");
    }
    std::fill(whole.begin(), whole.end(), 0);
    for (std::uint32_t d = 0; d < node.devices.size(); ++d) {
      const DeviceState& dev = node.devices[d];
      const std::uint32_t g = node.first_device + d;
      if (used[g] > kMilliPerGpu || dev.free.value() != kMilliPerGpu - used[g])
        return broken("device " + std::to_string(d) + " over-allocated or miscounted");
      if (used_mem[g] > dev.memory.value() ||
          dev.memory_free.value() != dev.memory.value() - used_mem[g])
        return broken("device " + std::to_string(d) + " memory over-allocated or miscounted");
      if (dev.free.value() == kMilliPerGpu) ++whole[dev.type];
      if (dev.free.value() > 0 && dev.free.value() < kMilliPerGpu) {
        const std::size_t bucket = dev.type * kShareBuckets + ShareBucket(dev.free.value());
        if (!share_index_[bucket].Contains(g)) return broken("share index out of date");
        ++in_share[bucket];
      }
      for (DomainId dom : node.domains) {
        dom_devices[dom * types + dev.type] += dev.free.value() == kMilliPerGpu;
        dom_milli[dom * types + dev.type] += dev.free.value();
      }
    }
    std::int64_t node_free = 0;
    for (const DeviceState& dev : node.devices) node_free += dev.free.value();
    if (node_free != node_free_milli_[n] || no_free_gpu_.Contains(n) != (node_free == 0))
      return broken("free GPU total or its index out of date");
    for (GpuTypeId t = 0; t < types; ++t) {
      if (node_free_devices_[n * types + t] != whole[t])
        return broken("free device count out of date");
      if (whole[t] == 0) continue;
      const std::size_t at = t * (max_devices_ + 1) + whole[t];
      if (whole[t] > max_devices_ || !whole_index_[at].Contains(n))
        return broken("free device index out of date");
      ++in_whole[at];
    }
  }
  // Each index holds those found in it above and nothing else.
  for (std::size_t i = 0; i < share_index_.size(); ++i) {
    if (share_index_[i].size() != in_share[i])
      return Status::Internal("invariant: a share index holds a device it should not");
  }
  for (std::size_t i = 0; i < whole_index_.size(); ++i) {
    if (whole_index_[i].size() != in_whole[i])
      return Status::Internal("invariant: a free device index holds a node it should not");
  }
  if (dom_devices != domain_free_devices_ || dom_milli != domain_free_milli_)
    return Status::Internal("invariant: domain free capacity out of date");
  if (std::accumulate(node_free_milli_.begin(), node_free_milli_.end(), std::int64_t{0}) !=
      free_gpu_milli_)
    return Status::Internal("invariant: the cluster's free GPU total out of date");
  std::vector<std::int32_t> by_free(nodes_by_free_gpus_.size(), 0);
  for (std::int64_t free : node_free_milli_)
    ++by_free[static_cast<std::size_t>(free / kMilliPerGpu)];
  if (by_free != nodes_by_free_gpus_)
    return Status::Internal("invariant: the nodes by free GPUs out of date");
  return Status::Ok();
}

}  // namespace arbiter
