// FragModel: the expected fragmentation of a node under a distribution of task shapes
// (docs/design/placement.md), for the fragmentation-aware policies.
#include <algorithm>
#include <bit>
#include <cmath>
#include <map>
#include <tuple>
#include <vector>

#include "core/engine/score/score.h"

namespace arbiter::engine {

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

// How many times a shape that cannot land on a node at all counts the node's free GPU as lost
// (docs/design/placement.md). Where a task of the shape lands, the measure counts at most twice
// what it loses (the free shares too small for one task, and the free GPU that tasks arriving one
// after another leave); a node that cannot host it has lost its whole room for the shape, and
// counts twice more. With 2 (each term's whole free GPU, as before), 10% multi-GPU pods trail
// FGD by 0.2 to 0.3 points: small tasks broke into hosts of the multi-GPU shapes that a node
// already unable to host them would have taken. A tuned constant: with 4 the default is behind
// FGD on no family of workloads; with 3 the case study's chat service missed its SLO on a seed;
// from 5, the rows with a fifth of the pods sharing GPUs lose a point.
constexpr double kUnhostedLoss = 4;

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
  if (cluster && !fgd_) {
    BindDemand(built, *cluster);  // (by the shapes' own weights)
    WeighByScarcity(built, *cluster);
  }
  for (std::int64_t t : thresholds_) {
    inverse_.push_back(1.0 / static_cast<double>(t));
    per_device_.push_back(static_cast<double>(t));
    // (Computed as Expected computes a partly used device's slots.)
    whole_slots_.push_back(
        static_cast<std::int64_t>(static_cast<double>(kMilliPerGpu) * inverse_.back() + 1e-9));
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

void FragModel::BindDemand(std::span<const Shape> shapes, const ClusterState& cluster) {
  type_gpus_.assign(std::min<std::size_t>(cluster.gpu_type_count(), 64), 0);
  for (NodeId n = 0; n < cluster.node_count(); ++n) {
    for (GpuTypeId type = 0; type < type_gpus_.size(); ++type)
      type_gpus_[type] += static_cast<double>(cluster.NodeDevices(n, type));
  }
  for (GpuTypeId type = 0; type < type_gpus_.size(); ++type) {
    if (type_gpus_[type] > 0) cluster_types_ |= std::uint64_t{1} << type;
  }
  // The GPUs a shape's tasks take, by its share of the tasks.
  auto gpus_of = [](const Shape& s) {
    return s.weight * s.count * std::min(1.0, s.per_device / static_cast<double>(kMilliPerGpu));
  };
  double demand = 0;
  for (const Shape& s : shapes) demand += gpus_of(s);
  if (demand <= 0) return;
  for (const Shape& s : shapes) {
    const std::uint64_t types = s.types.bits() & cluster_types_;
    if (types != 0) bound_.push_back({types, gpus_of(s) / demand, GpusOf(types)});
  }
}

double FragModel::GpusOf(std::uint64_t types) const {
  double gpus = 0;
  for (GpuTypeId type = 0; type < type_gpus_.size(); ++type) {
    if ((types >> type) & 1) gpus += type_gpus_[type];
  }
  return gpus;
}

double FragModel::TypeCost(GpuTypeSet accepted, GpuTypeId type) const {
  if (bound_.empty() || type >= 64) return 0;
  const std::uint64_t choices =
      accepted.empty() ? cluster_types_ : accepted.bits() & cluster_types_;
  const double cluster = GpusOf(cluster_types_), choice = GpusOf(choices);
  if (choice <= 0) return 0;
  // Were the shapes' whole demand the cluster's GPUs: the share of this type's GPUs, and of the
  // GPUs of the task's types, that the shapes bound to fewer of them would take.
  double here = 0, mean = 0;
  for (const Bound& b : bound_) {
    if ((b.types & ~choices) != 0 || b.types == choices) continue;
    mean += b.share * cluster / choice;
    if ((b.types >> type) & 1) here += b.share * cluster / b.gpus;
  }
  return std::clamp(here - mean, 0.0, 1.0);
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
  const double value =
      Measure(whole, std::span<const std::int64_t>(partial.data(), partials), total, cpu, type);
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
    if (s.cpu > cpu || fit < count) {
      frag += s.weight * total * (fgd_ ? 1 : kUnhostedLoss);
      continue;
    }
    double lost = small_[s.threshold];
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

}  // namespace arbiter::engine
