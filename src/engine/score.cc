// How a placement policy scores one node for one task and which devices of it the task gets. The
// default (kArbiter) and kFrag score by the growth of expected fragmentation (FragModel,
// docs/design/placement.md); kArbiter scores only the candidates place.cc draws from the indexes.
// The baselines and FGD follow the published simulator of Weng et al., "Beware of Fragmentation"
// (ATC 2023): integer scores in [0, 100] (negated here: smaller is better), equal scores going to
// the first node of a seeded order, so that Arbiter's numbers for them compare with the published
// ones (docs/placement.md).
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <map>
#include <string_view>
#include <tuple>

#include "engine/stages.h"

namespace arbiter {

const char* PlacementPolicyName(PlacementPolicy policy) {
  switch (policy) {
    case PlacementPolicy::kArbiter:
      return "arbiter";
    case PlacementPolicy::kRandom:
      return "random";
    case PlacementPolicy::kBestFit:
      return "best-fit";
    case PlacementPolicy::kPacking:
      return "packing";
    case PlacementPolicy::kDotProduct:
      return "dot-product";
    case PlacementPolicy::kClustering:
      return "clustering";
    case PlacementPolicy::kFrag:
      return "frag";
    case PlacementPolicy::kFgd:
      return "fgd";
  }
  return "?";
}

bool ParsePlacementPolicy(std::string_view name, PlacementPolicy& policy) {
  for (PlacementPolicy p : kAllPlacementPolicies) {
    if (name == PlacementPolicyName(p)) {
      policy = p;
      return true;
    }
  }
  return false;
}

namespace engine {
namespace {

// The published simulator normalises by the largest node it knows: 128 cores, 8 GPUs.
constexpr double kMaxSpecCpu = 128000;
constexpr double kMaxSpecGpu = 8000;
constexpr std::int64_t kMaxScore = 100;

std::uint64_t Mix(std::uint64_t x) {  // SplitMix64's finaliser
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

bool Usable(const DeviceState& dev, const TaskRequest& req, GpuTypeId type) {
  return dev.type == type && dev.memory >= req.gpu_memory;
}

// Free milli-GPU of the task's type on the node (every device for a task without GPUs), and the
// node's devices of that type.
struct NodeGpu {
  std::int64_t free = 0;
  std::int64_t devices = 0;
  std::int64_t whole_free = 0;
};
NodeGpu CountGpu(const NodeState& node, GpuTypeId type) {
  NodeGpu g;
  for (const DeviceState& dev : node.devices) {
    if (type != kNone && dev.type != type) continue;
    g.free += dev.free.value();
    ++g.devices;
    g.whole_free += dev.free == kWholeGpu;
  }
  return g;
}

// A share: the device with the least free share that holds it (a whole free device counts with
// 1000), the first such in index order ("best" GPU selection of the published simulator).
std::uint32_t BestShareDevice(const NodeState& node, const TaskRequest& req, GpuTypeId type) {
  std::uint32_t best = kNone;
  for (std::uint32_t d = 0; d < node.devices.size(); ++d) {
    const DeviceState& dev = node.devices[d];
    if (!Usable(dev, req, type) || dev.free < req.gpu || dev.memory_free < req.gpu_memory) continue;
    if (best == kNone || dev.free < node.devices[best].free) best = d;
  }
  return best;
}

// A share on a device drawn uniformly (by hash) among those that hold it.
std::uint32_t RandomShareDevice(const NodeState& node, const TaskRequest& req, GpuTypeId type,
                                std::uint64_t tie) {
  std::uint32_t best = kNone;
  std::uint64_t best_hash = 0;
  for (std::uint32_t d = 0; d < node.devices.size(); ++d) {
    const DeviceState& dev = node.devices[d];
    if (!Usable(dev, req, type) || dev.free < req.gpu || dev.memory_free < req.gpu_memory) continue;
    const std::uint64_t h = Mix(tie ^ Mix(d + 0x51ed2701ull));
    if (best == kNone || h < best_hash) {
      best = d;
      best_hash = h;
    }
  }
  return best;
}

// Whole devices: the first free ones in index order, inside one NVLink group when one holds them
// (the group with the fewest free devices that does), else, when allowed, across groups.
bool WholeDevices(const NodeState& node, const TaskRequest& req, GpuTypeId type, bool allow_span,
                  std::vector<DeviceShare>& out) {
  const std::int64_t want = req.whole_gpus();
  std::array<std::uint32_t, kMaxDevicesPerNode> free_in_group;  // groups number at most devices
  std::fill_n(free_in_group.begin(), node.nvlink_groups, 0u);
  for (const DeviceState& dev : node.devices) {
    if (Usable(dev, req, type) && dev.free == kWholeGpu) ++free_in_group[dev.nvlink_group];
  }
  std::uint32_t group = kNone;
  for (std::uint32_t g = 0; g < node.nvlink_groups; ++g) {
    if (free_in_group[g] >= want && (group == kNone || free_in_group[g] < free_in_group[group]))
      group = g;
  }
  if (group == kNone && !allow_span) return false;
  std::int64_t n = want;
  for (std::uint32_t d = 0; d < node.devices.size() && n > 0; ++d) {
    const DeviceState& dev = node.devices[d];
    if (!Usable(dev, req, type) || dev.free != kWholeGpu) continue;
    if (group != kNone && dev.nvlink_group != group) continue;
    out.push_back({d, kWholeGpu, dev.memory});
    --n;
  }
  return n == 0;
}

// ---- The published scores, higher is better, in [0, 100] ----

std::int64_t BestFitScore(const NodeState& node, const TaskRequest& req, const NodeGpu& gpu) {
  double score = 0;
  score += static_cast<double>(node.cpu_free.value() - req.cpu.value()) / kMaxSpecCpu * 0.5;
  score += static_cast<double>(gpu.free - req.gpu.value()) / kMaxSpecGpu * 0.5;
  return static_cast<std::int64_t>((1.0 - score) * static_cast<double>(kMaxScore));
}

std::int64_t DotProductScore(const NodeState& node, const TaskRequest& req, const NodeGpu& gpu) {
  const double dot = static_cast<double>(node.cpu_free.value()) / kMaxSpecCpu *
                         (static_cast<double>(req.cpu.value()) / kMaxSpecCpu) +
                     static_cast<double>(gpu.free) / kMaxSpecGpu *
                         (static_cast<double>(req.gpu.value()) / kMaxSpecGpu);
  return static_cast<std::int64_t>(static_cast<double>(kMaxScore) * (1.0 - dot / 2));
}

// Partly used GPUs first (the fuller the better), then free GPUs of partly used nodes, then free
// nodes (the fewer their GPUs the better).
std::int64_t PackingScore(const NodeState& node, const TaskRequest& req, GpuTypeId type,
                          const NodeGpu& gpu) {
  if (req.gpu.value() == 0) return 0;
  if (gpu.whole_free == gpu.devices) {
    return std::max<std::int64_t>(kMaxScore / 3 - gpu.whole_free, gpu.whole_free);
  }
  // The devices the task would use, least free first: used ones when they hold it.
  const std::int64_t per_device = req.shared() ? req.gpu.value() : kMilliPerGpu;
  std::int64_t need = req.shared() ? 1 : req.whole_gpus();
  std::vector<std::int64_t> frees;
  for (const DeviceState& dev : node.devices) {
    if (Usable(dev, req, type)) frees.push_back(dev.free.value());
  }
  std::stable_sort(frees.begin(), frees.end());
  std::int64_t whole_used = 0, used_free_pct = 0;
  for (std::int64_t f : frees) {
    if (need == 0) break;
    if (f < per_device) continue;
    --need;
    if (f == kMilliPerGpu) {
      ++whole_used;
    } else {
      used_free_pct += f * 100 / kMilliPerGpu;
    }
  }
  if (whole_used > 0) return std::max<std::int64_t>(kMaxScore / 2 - whole_used, kMaxScore / 3);
  return std::max<std::int64_t>(kMaxScore - used_free_pct / 10, kMaxScore / 2);
}

// The GPU-request class of a task: 0 none, 1 a share, 1 + k for k whole GPUs.
std::int64_t RequestClass(const TaskRequest& req) {
  if (req.gpu.value() == 0) return 0;
  return req.shared() ? 1 : 1 + req.whole_gpus();
}

// Nodes already running tasks of the same class first (only that class: best), then nodes without
// GPU tasks, then the others; within each band, the fuller node first.
std::int64_t ClusteringScore(const NodeState& node, const TaskRequest& req, const NodeGpu& gpu) {
  const std::int64_t cls = RequestClass(req);
  if (cls == 0) return 0;
  bool same = false, other = false;
  for (const Resident& r : node.residents) {
    for (const TaskGroup& g : r.job->job.groups) {
      const std::int64_t c = RequestClass(g.request);
      if (c == 0) continue;
      same = same || c == cls;
      other = other || c != cls;
    }
  }
  const std::int64_t fill = kMaxScore / 4 * (static_cast<std::int64_t>(kMaxSpecGpu) - gpu.free) /
                            static_cast<std::int64_t>(kMaxSpecGpu);
  if (same) return fill + (other ? kMaxScore * 2 / 4 : kMaxScore * 3 / 4);
  return fill + (other ? 0 : kMaxScore / 4);
}

}  // namespace

// ---- Fragmentation (kFgd, kFrag) ----

namespace {

// At most about `limit` shapes for `shapes` (distinct): shapes of one GPU request and type set
// form a group, which keeps representatives in proportion to its weight (at least one); within a
// group, sorted by CPU, consecutive shapes of about equal total weight become one with their
// weighted mean CPU.
std::vector<TaskShape> Compress(std::vector<TaskShape> shapes, std::size_t limit) {
  if (limit == 0 || shapes.size() <= limit) return shapes;
  std::stable_sort(shapes.begin(), shapes.end(), [](const TaskShape& a, const TaskShape& b) {
    return std::make_tuple(a.gpu, a.gpu_types.bits(), a.cpu) <
           std::make_tuple(b.gpu, b.gpu_types.bits(), b.cpu);
  });
  double sum = 0;
  for (const TaskShape& s : shapes) sum += s.weight;
  std::vector<TaskShape> out;
  for (std::size_t begin = 0, end = 0; begin < shapes.size(); begin = end) {
    double group = 0;
    for (end = begin; end < shapes.size() && shapes[end].gpu == shapes[begin].gpu &&
                      shapes[end].gpu_types == shapes[begin].gpu_types;
         ++end)
      group += shapes[end].weight;
    const double keep = std::max(1.0, std::floor(static_cast<double>(limit) * group / sum));
    const double chunk = group / keep;
    double cumulative = 0, weight = 0, cpu = 0, made = 0;
    for (std::size_t i = begin; i < end; ++i) {
      const TaskShape& s = shapes[i];
      weight += s.weight;
      cpu += s.weight * static_cast<double>(s.cpu);
      cumulative += s.weight;
      if (i + 1 < end && cumulative < chunk * (made + 1) * (1 - 1e-12)) continue;
      if (weight > 0) {
        out.push_back({s.gpu, std::llround(cpu / weight), 0, s.gpu_types, weight});
      }
      made = std::max(made + 1, std::floor(cumulative / chunk));
      weight = cpu = 0;
    }
  }
  return out;
}

// How strongly the scarcity of a shape's hosts weighs (docs/design/placement.md): its say is
// multiplied by (accepted capacity / reachable capacity)^kScarcityExponent. With 1, the cluster's
// 39 nodes that alone host openb's 120-core 8-GPU pods are still given away to 60-core 4-GPU pods
// (which pack two to such a node): 96.86% at 100% with 50% multi-GPU pods, against 96.91 with 2.
constexpr double kScarcityExponent = 2;

// What each kept shape could take of the empty cluster, against what it may use: the scarcity
// factor of FragModel. `pool`: the GPUs of the types the shape accepts; `reach`: the GPUs that
// tasks of the shape alone could occupy, node by node, as devices and CPU allow.
struct NodeClass {
  std::int64_t cpu = 0;
  GpuTypeId type = kNone;
  std::int64_t devices = 0;
  double nodes = 0;
};
std::vector<NodeClass> NodeClasses(const ClusterState& cluster) {
  std::map<std::tuple<std::int64_t, GpuTypeId, std::int64_t>, double> classes;
  for (NodeId n = 0; n < cluster.node_count(); ++n) {
    const NodeState& node = cluster.node(n);
    // (A node may mix types.)
    for (GpuTypeId type = 0; type < cluster.gpu_type_count(); ++type) {
      if (!node.gpu_types.Contains(type)) continue;
      classes[{node.cpu.value(), type, cluster.NodeDevices(n, type)}] += 1;
    }
  }
  std::vector<NodeClass> out;
  for (const auto& [key, nodes] : classes) {
    const auto& [cpu, type, devices] = key;
    out.push_back({cpu, type, devices, nodes});
  }
  return out;
}

}  // namespace

FragModel::FragModel(std::span<const TaskShape> shapes, bool fgd, std::size_t max_shapes,
                     const ClusterState* cluster)
    : fgd_(fgd) {
  static const TaskShape kOneGpu{kMilliPerGpu, 0, 0, {}, 1};
  if (shapes.empty()) shapes = std::span<const TaskShape>(&kOneGpu, 1);
  // Memory is not part of the measure (a filter only): with it, a node's used memory counts its
  // free GPU as lost for the shapes that ask much memory, which draws other tasks there, and on
  // openb with many multi-GPU pods it strands the few nodes that can host the large ones (0.7
  // points lost at 100%). FGD keeps the most frequent shapes that cover 95% of the tasks
  // ("typical pods"), and so do the others: the rare shapes are noise in the measure (with all
  // of them, 0.6 points are lost at 100% on openb with 30% multi-GPU pods).
  std::map<std::tuple<std::int64_t, std::int64_t, std::uint64_t>, double> merged;
  double sum = 0;
  for (const TaskShape& s : shapes) {
    merged[{s.gpu, s.cpu, s.gpu_types.bits()}] += s.weight;
    sum += s.weight;
  }
  std::vector<TaskShape> kept;
  for (const auto& [key, w] : merged) {
    const auto& [gpu, cpu, types] = key;
    kept.push_back({gpu, cpu, 0, GpuTypeSet(types), w});
  }
  std::stable_sort(kept.begin(), kept.end(),
                   [](const TaskShape& a, const TaskShape& b) { return a.weight > b.weight; });
  double cumulative = 0;
  std::size_t n = 0;
  while (n < kept.size() && cumulative < 0.95 * sum) cumulative += kept[n++].weight;
  kept.resize(n);
  kept = Compress(std::move(kept), max_shapes);
  for (const TaskShape& s : kept) {
    if (s.gpu > 0) thresholds_.push_back(std::min<std::int64_t>(s.gpu, kMilliPerGpu));
  }
  std::sort(thresholds_.begin(), thresholds_.end());
  thresholds_.erase(std::unique(thresholds_.begin(), thresholds_.end()), thresholds_.end());
  double total = 0;
  for (const TaskShape& s : kept) total += std::max(0.0, s.weight);
  std::vector<Shape> built;
  for (const TaskShape& s : kept) {
    if (s.weight <= 0 || total <= 0) continue;
    Shape shape;
    shape.weight = s.weight / total;
    if (s.gpu == 0) {
      always_ += shape.weight;
      continue;
    }
    const std::int64_t per_device = std::min<std::int64_t>(s.gpu, kMilliPerGpu);
    shape.threshold = static_cast<std::uint32_t>(
        std::lower_bound(thresholds_.begin(), thresholds_.end(), per_device) - thresholds_.begin());
    shape.whole = s.gpu >= kMilliPerGpu;
    shape.count = shape.whole ? static_cast<double>(s.gpu / kMilliPerGpu) : 1;
    shape.per_device = static_cast<double>(per_device);
    shape.cpu = s.cpu;
    shape.types = s.gpu_types;
    built.push_back(shape);
  }
  if (cluster && !fgd_) WeighByScarcity(built, *cluster);
  for (std::int64_t t : thresholds_) {
    inverse_.push_back(1.0 / static_cast<double>(t));
    per_device_.push_back(static_cast<double>(t));
    // (Computed as Expected computes a partly used device's slots.)
    whole_slots_.push_back(static_cast<std::int64_t>(
        static_cast<double>(kMilliPerGpu) * inverse_.back() + 1e-9));
  }
  if (!thresholds_.empty() && thresholds_.back() == kMilliPerGpu)
    whole_threshold_ = static_cast<std::uint32_t>(thresholds_.size() - 1);
  std::uint64_t named = 0;  // the types some shape names
  for (const Shape& shape : built) {
    if (shape.types.empty()) {
      any_type_.push_back(MakeTerm(shape));
    } else {
      typed_.push_back(MakeTerm(shape));
      typed_types_.push_back(shape.types);
      named |= shape.types.bits();
    }
  }
  if (!fgd_) {
    typed_accepting_.resize(static_cast<std::size_t>(std::bit_width(named)));
    for (GpuTypeId t = 0; t < typed_accepting_.size(); ++t) {
      for (std::size_t i = 0; i < typed_.size(); ++i) {
        if (typed_types_[i].Accepts(t)) typed_accepting_[t].push_back(typed_[i]);
      }
    }
  }
  fit_.resize(thresholds_.size());
  small_.resize(thresholds_.size());
  slots_.resize(thresholds_.size());
}

// A shape whose tasks could take only a small part of the GPUs it may use (too few devices or
// too little CPU on most nodes) loses a larger part of its room with each of its hosts that
// another task breaks into, so its say grows, there as everywhere: the other tasks are drawn to
// the nodes it cannot use. Scaled back so that the GPU shapes keep their total weight (the
// shapes without GPUs, which weigh every node alike, keep theirs).
void FragModel::WeighByScarcity(std::vector<Shape>& shapes, const ClusterState& cluster) {
  const std::vector<NodeClass> classes = NodeClasses(cluster);
  double before = 0, after = 0;
  // (Those that accept every type first, then the others: the order of the sums is kept.)
  for (const bool any_type : {true, false}) {
    for (Shape& s : shapes) {
      if (s.types.empty() != any_type) continue;
      double pool = 0, reach = 0;
      for (const NodeClass& c : classes) {
        if (!s.types.empty() && !s.types.Accepts(c.type)) continue;
        const double devices = static_cast<double>(c.devices);
        pool += c.nodes * devices;
        const double milli = static_cast<double>(kMilliPerGpu);
        double tasks =
            s.whole ? std::floor(devices / s.count) : std::floor(devices * milli / s.per_device);
        if (s.cpu > 0)
          tasks =
              std::min(tasks, std::floor(static_cast<double>(c.cpu) / static_cast<double>(s.cpu)));
        reach += c.nodes * tasks * s.count * std::min(1.0, s.per_device / milli);
      }
      before += s.weight;
      if (reach > 0) s.weight *= std::pow(pool / reach, kScarcityExponent);
      after += s.weight;
    }
  }
  if (after <= 0) return;
  for (Shape& s : shapes) s.weight *= before / after;
}

FragModel::Term FragModel::MakeTerm(const Shape& shape) {
  Term term;
  term.weight = shape.weight;
  term.cpu = shape.cpu;
  term.cpu_inverse = shape.cpu > 0 ? 1.0 / static_cast<double>(shape.cpu) : 0;
  term.threshold = shape.threshold;
  auto it = std::find(counts_.begin(), counts_.end(), shape.count);
  if (it == counts_.end()) {
    counts_.push_back(shape.count);
    inverse_counts_.push_back(1 / shape.count);
    it = counts_.end() - 1;
  }
  term.count = static_cast<std::uint32_t>(it - counts_.begin());
  return term;
}

double FragModel::Expected(std::span<const std::int64_t> frees, std::int64_t cpu,
                           GpuTypeId type) const {
  // Devices with nothing free count for no threshold, and fully free ones for every threshold
  // alike: only the partly used ones are looked at per threshold.
  std::int64_t total = 0, whole = 0;
  std::array<std::int64_t, kMaxDevicesPerNode> partial;
  std::size_t partials = 0;
  bool shares = true;  // every free share a device can have (the memory's key holds no other)
  for (std::int64_t f : frees) {
    total += f;
    shares = shares && f >= 0 && f <= kMilliPerGpu;
    if (f == kMilliPerGpu) {
      ++whole;
    } else if (f > 0) {
      partial[partials++] = f;
    }
  }
  if (total == 0) return 0;
  // The memory of this capacity's value, when it can hold it.
  Measured* slot = nullptr;
  Capacity capacity;
  if (shares && partials <= capacity.partial.size() && whole <= 0xffff) {
    capacity.cpu = cpu;
    capacity.type = type;
    capacity.whole = static_cast<std::uint16_t>(whole);
    capacity.partials = static_cast<std::uint16_t>(partials);
    for (std::size_t k = 0; k < partials; ++k) {
      // (Insertion: a node has few partly used devices.)
      auto f = static_cast<std::int16_t>(partial[k]);
      std::size_t at = k;
      for (; at > 0 && capacity.partial[at - 1] > f; --at)
        capacity.partial[at] = capacity.partial[at - 1];
      capacity.partial[at] = f;
    }
    std::uint64_t h = static_cast<std::uint64_t>(cpu) ^ (std::uint64_t{type} << 48) ^
                      (static_cast<std::uint64_t>(whole) << 32);
    for (std::size_t k = 0; k < partials; ++k)
      h = (h ^ static_cast<std::uint64_t>(capacity.partial[k])) * 0x100000001b3ull;
    if (measured_.empty()) measured_.resize(kMeasuredSlots);
    slot = &measured_[Mix(h) & (kMeasuredSlots - 1)];
    if (slot->capacity == capacity) return slot->value;  // (an empty slot has no free GPU)
  }
  const double value = Measure(whole, std::span<const std::int64_t>(partial.data(), partials),
                               total, cpu, type);
  if (slot) *slot = {capacity, value};
  return value;
}

double FragModel::Measure(std::int64_t whole, std::span<const std::int64_t> partial,
                          std::int64_t total, std::int64_t cpu, GpuTypeId type) const {
  const std::size_t partials = partial.size();
  for (std::size_t j = 0; j < thresholds_.size(); ++j) {
    const std::int64_t t = thresholds_[j];
    const double inverse = inverse_[j];
    std::int64_t fit = whole, small = 0, slots = fgd_ ? 0 : whole * whole_slots_[j];
    for (std::size_t k = 0; k < partials; ++k) {
      const std::int64_t f = partial[k];
      if (f >= t) {
        ++fit;
        // f / t without a division: exact, as f / t is an integer or at least 1 / t from one.
        if (!fgd_) slots += static_cast<std::int64_t>(static_cast<double>(f) * inverse + 1e-9);
      } else {
        small += f;
      }
    }
    fit_[j] = static_cast<double>(fit);
    small_[j] = static_cast<double>(small);
    slots_[j] = static_cast<double>(slots);
  }
  const double all = static_cast<double>(total);
  if (fgd_ || type == kNone) {
    return always_ * all + AddShapes(any_type_, {}, type, all, cpu) +
           AddShapes(typed_, typed_types_, type, all, cpu);
  }
  std::span<const Term> typed;
  if (type < typed_accepting_.size()) typed = typed_accepting_[type];
  return always_ * all + AddShapes(any_type_, {}, type, all, cpu) +
         AddShapes(typed, {}, type, all, cpu);
}

double FragModel::ExpectedNow(const ClusterState& state, NodeId n,
                              std::span<const std::int64_t> frees, std::int64_t cpu,
                              GpuTypeId type) const {
  if (remembered_.size() <= n) remembered_.resize(state.node_count());
  Remembered& r = remembered_[n];
  if (r.state != state.id() || r.stamp != state.NodeStamp(n) || r.type != type) {
    r = {state.id(), state.NodeStamp(n), type, Expected(frees, cpu, type)};
  }
  return r.value;
}

const FragModel::Scored* FragModel::Recall(const ClusterState& state, NodeId n,
                                           const ScoreRequest& request) const {
  if (kept_.size() <= n) return nullptr;
  const Kept& k = kept_[n];
  if (k.state != state.id() || k.stamp != state.NodeStamp(n) || !(k.request == request))
    return nullptr;
  return &k.scored;
}

void FragModel::Keep(const ClusterState& state, NodeId n, const ScoreRequest& request,
                     const Scored& scored) const {
  if (kept_.size() <= n) kept_.resize(state.node_count());
  kept_[n] = {state.id(), state.NodeStamp(n), request, scored};
}

namespace {
// The integer part of a non-negative quotient computed with an inverse (+1e-9: exact when the
// quotient is an integer).
double Truncate(double x) { return static_cast<double>(static_cast<std::int64_t>(x + 1e-9)); }
}  // namespace

// `types`: the types each term accepts, for the terms that not every type may use (empty: every
// term counts). Under kFgd a term whose types exclude `type` counts its whole free GPU as lost.
double FragModel::AddShapes(std::span<const Term> terms, std::span<const GpuTypeSet> types,
                            GpuTypeId type, double total, std::int64_t cpu) const {
  const double cpu_free = static_cast<double>(cpu);
  double frag = 0;
  for (std::size_t i = 0; i < terms.size(); ++i) {
    const Term& s = terms[i];
    if (!types.empty() && type != kNone && !types[i].Accepts(type)) {
      if (fgd_) frag += s.weight * total;
      continue;
    }
    const double fit = fit_[s.threshold];
    const double count = counts_[s.count];
    // One task of the shape: does it land, and which free shares are too small for it?
    const bool lands = s.cpu <= cpu && fit >= count;
    double lost = lands ? small_[s.threshold] : total;
    if (!fgd_) {
      // Tasks of the shape arriving one after another: how much of the free GPU can they take
      // before the devices or the CPU run out?
      // (Truncation is the floor of these non-negative quotients, and cheaper than std::floor.)
      double n = s.threshold == whole_threshold_ ? Truncate(fit * inverse_counts_[s.count])
                                                 : slots_[s.threshold];
      if (s.cpu > 0) n = std::min(n, Truncate(cpu_free * s.cpu_inverse));
      lost += total - std::clamp(n * count * per_device_[s.threshold], 0.0, total);
    }
    frag += s.weight * lost;
  }
  return frag;
}

std::uint64_t TieBreak(std::uint64_t seed, NodeId node) {
  return Mix(seed ^ Mix(0x6a09e667f3bcc909ull + node));
}

std::uint64_t RandomDraw(std::uint64_t seed, JobId job, std::uint64_t what) {
  return Mix(seed ^ Mix(job ^ Mix(0xbb67ae8584caa73bull + what)));
}

NodeScorer::NodeScorer(const ClusterState& state, const Job& job, const TaskRequest& req,
                       GpuTypeId type, const PlacementOptions& options)
    : state_(state), job_(job), req_(req), type_(type), options_(options) {
  if (options.policy == PlacementPolicy::kArbiter || options.policy == PlacementPolicy::kFrag ||
      options.policy == PlacementPolicy::kFgd)
    frag_ = options.model.get();
  request_ = {req.gpu.value(), req.cpu.value(), req.gpu_memory.value(), type, options.policy,
              false};
}

bool NodeScorer::Score(NodeId n, bool allow_span, std::vector<DeviceShare>& devices,
                       double& score) {
  devices.clear();
  score = 0;
  const NodeState& node = state_.node(n);
  if (frag_) return ScoreFrag(n, node, allow_span, devices, score);
  // Devices.
  if (req_.gpu.value() > 0) {
    if (req_.shared()) {
      const std::uint32_t d =
          options_.policy == PlacementPolicy::kRandom
              ? RandomShareDevice(node, req_, type_, RandomDraw(options_.seed, job_.id, ~n))
              : BestShareDevice(node, req_, type_);
      if (d == kNone) return false;
      devices.push_back({d, req_.gpu, req_.gpu_memory});
    } else if (!WholeDevices(node, req_, type_, allow_span, devices)) {
      return false;
    }
  }
  const NodeGpu gpu = CountGpu(node, req_.gpu.value() > 0 ? type_ : kNone);
  std::int64_t published = 0;
  switch (options_.policy) {
    case PlacementPolicy::kRandom:  // a uniform draw per job and node: a uniform node
      score = static_cast<double>(RandomDraw(options_.seed, job_.id, n) >> 11);
      return true;
    case PlacementPolicy::kArbiter:
    case PlacementPolicy::kFrag:
    case PlacementPolicy::kFgd:
      break;
    case PlacementPolicy::kBestFit:
      published = BestFitScore(node, req_, gpu);
      break;
    case PlacementPolicy::kPacking:
      published = PackingScore(node, req_, type_, gpu);
      break;
    case PlacementPolicy::kDotProduct:
      published = DotProductScore(node, req_, gpu);
      break;
    case PlacementPolicy::kClustering:
      published = ClusteringScore(node, req_, gpu);
      break;
  }
  score = -static_cast<double>(published);
  return true;
}

namespace {

// The score of a growth of expected fragmentation (milli-GPU; smaller is better). FGD: its
// published score, the integer part of 100 x sigmoid(-growth / 1000), negated. kFrag: the growth
// in steps of kFragStep, so that nodes within a step tie and go to the first node of the seeded
// order (which keeps filling the same nodes).
constexpr double kFragStep = 80;
double FragRank(PlacementPolicy policy, double growth) {
  if (policy == PlacementPolicy::kFgd) {
    const double sigmoid = 1.0 / (1.0 + std::exp(growth / 1000));
    return -static_cast<double>(
        static_cast<std::int64_t>(sigmoid * static_cast<double>(kMaxScore)));
  }
  return std::floor(growth / kFragStep + 0.5);
}

}  // namespace

// MeasureFrag's answer, kept by the model until the node changes (nodes of at most 64 devices).
bool NodeScorer::ScoreFrag(NodeId n, const NodeState& node, bool allow_span,
                           std::vector<DeviceShare>& devices, double& score) {
  if (node.devices.size() > 64) return MeasureFrag(n, node, allow_span, devices, score);
  request_.allow_span = allow_span;
  if (const FragModel::Scored* kept = frag_->Recall(state_, n, request_)) {
    if (!kept->fits) return false;
    score = kept->score;
    for (std::uint64_t bits = kept->devices; bits != 0; bits &= bits - 1) {
      const auto d = static_cast<std::uint32_t>(std::countr_zero(bits));
      if (req_.shared()) {
        devices.push_back({d, req_.gpu, req_.gpu_memory});
      } else {
        devices.push_back({d, kWholeGpu, node.devices[d].memory});
      }
    }
    return true;
  }
  FragModel::Scored scored;
  scored.fits = MeasureFrag(n, node, allow_span, devices, score);
  if (scored.fits) {
    scored.score = score;
    for (const DeviceShare& d : devices) scored.devices |= std::uint64_t{1} << d.device;
  }
  frag_->Keep(state_, n, request_, scored);
  return scored.fits;
}

// The devices that least increase the node's expected fragmentation, and the node's score.
bool NodeScorer::MeasureFrag(NodeId n, const NodeState& node, bool allow_span,
                             std::vector<DeviceShare>& devices, double& score) {
  count_ = 0;
  for (std::uint32_t d = 0; d < node.devices.size(); ++d) {
    const DeviceState& dev = node.devices[d];
    if (type_ != kNone && dev.type != type_) continue;
    frees_[count_] = dev.free.value();
    index_[count_] = d;
    ++count_;
  }
  const std::span<const std::int64_t> frees(frees_.data(), count_);
  const GpuTypeId node_type = type_ != kNone         ? type_
                              : node.devices.empty() ? kNone
                                                     : node.devices.front().type;
  const std::int64_t cpu = node.cpu_free.value();
  const double before = frag_->ExpectedNow(state_, n, frees, cpu, node_type);
  const std::int64_t cpu_after = cpu - req_.cpu.value();
  const PlacementPolicy policy = options_.policy;
  if (req_.gpu.value() == 0) {
    score = FragRank(policy, frag_->Expected(frees, cpu_after, node_type) - before);
    return true;
  }
  if (!req_.shared()) {
    if (!WholeDevices(node, req_, type_, allow_span, devices)) return false;
    for (const DeviceShare& d : devices) {
      for (std::size_t i = 0; i < count_; ++i) {
        if (index_[i] == d.device) frees_[i] = 0;
      }
    }
    score = FragRank(policy, frag_->Expected(frees, cpu_after, node_type) - before);
    return true;
  }
  // A share: each device that holds it (devices with equal free shares give the same result:
  // only the first is tried). FGD keeps the first device of the best score; kFrag the smallest
  // growth, then the least free device.
  bool found = false;
  double best = 0;
  std::uint32_t best_device = kNone;
  for (std::size_t i = 0; i < count_; ++i) {
    const DeviceState& dev = node.devices[index_[i]];
    if (!Usable(dev, req_, type_) || dev.free < req_.gpu || dev.memory_free < req_.gpu_memory)
      continue;
    bool seen = false;
    for (std::size_t k = 0; k < i && !seen; ++k) {
      const DeviceState& other = node.devices[index_[k]];
      seen = frees_[k] == frees_[i] && Usable(other, req_, type_) &&
             other.memory_free >= req_.gpu_memory;
    }
    if (seen) continue;
    const std::int64_t keep = frees_[i];
    frees_[i] -= req_.gpu.value();
    double growth = frag_->Expected(frees, cpu_after, node_type) - before;
    frees_[i] = keep;
    if (policy == PlacementPolicy::kFgd) growth = FragRank(policy, growth);
    if (!found || growth < best - 1e-9 ||
        (policy != PlacementPolicy::kFgd && growth <= best + 1e-9 &&
         dev.free < node.devices[best_device].free)) {
      found = true;
      best = growth;
      best_device = index_[i];
    }
  }
  if (!found) return false;
  devices.push_back({best_device, req_.gpu, req_.gpu_memory});
  score = policy == PlacementPolicy::kFgd ? best : FragRank(policy, best);
  return true;
}

}  // namespace engine
}  // namespace arbiter
