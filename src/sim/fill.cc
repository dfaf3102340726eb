// The fill experiment (include/sim/fill.h, docs/placement.md).
#include "sim/fill.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <tuple>

#include "core/state/cluster_state.h"

namespace arbiter::fill {
namespace {

// Uniform integer in [0, n) from the generator, without std::*_distribution (whose output differs
// between standard libraries). The modulo bias is below 2^-40 for the list sizes here.
std::size_t Below(std::mt19937_64& rng, std::size_t n) {
  return static_cast<std::size_t>(rng() % n);
}

// The items in a uniformly random order drawn from the generator (Fisher-Yates, with Below).
template <typename T>
void Shuffle(std::vector<T>& items, std::mt19937_64& rng) {
  for (std::size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[Below(rng, i)]);
}

// The pods in arrival order for one seed: the list shuffled, then uniform draws from the list
// appended until one more would take the GPU request past `target` milli-GPU.
std::vector<std::uint32_t> ArrivalOrder(std::span<const Pod> pods, std::uint64_t seed,
                                        std::int64_t target) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint32_t> order(pods.size());
  std::int64_t total = 0;
  for (std::uint32_t i = 0; i < order.size(); ++i) {
    order[i] = i;
    total += pods[i].total_gpu();
  }
  Shuffle(order, rng);
  while (total > 0) {  // (a list without GPU requests would never reach the target)
    const std::uint32_t i = static_cast<std::uint32_t>(Below(rng, pods.size()));
    if (total + pods[i].total_gpu() > target) break;
    total += pods[i].total_gpu();
    order.push_back(i);
  }
  return order;
}

// The GPU types a pod accepts; `never` when it names models of which the cluster has none.
GpuTypeSet AcceptedTypes(const ClusterState& state, const Pod& pod, bool& never) {
  GpuTypeSet types;
  never = false;
  if (pod.gpu == 0 || pod.models.empty()) return types;
  for (const std::string& m : pod.models) {
    if (std::optional<GpuTypeId> t = state.FindGpuType(m)) types.Add(*t);
  }
  never = types.empty();
  return types;
}

Job MakeJob(const Pod& pod, JobId id, GpuTypeSet types) {
  Job job;
  job.id = id;
  job.name = pod.name;
  TaskGroup g;
  g.name = "pod";
  g.count = pod.tasks;
  g.request.gpu = MilliGpu(pod.gpu);
  g.request.cpu = MilliCpu(pod.cpu);
  g.request.memory = MemMiB(pod.memory);
  job.groups.push_back(std::move(g));
  job.gpu_types = types;
  return job;
}

std::string Number(double v) {
  if (std::isnan(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

}  // namespace

ClusterSpec MakeCluster(std::span<const trace::TraceNode> nodes) {
  ClusterSpec spec;
  spec.priority_classes.push_back(PriorityClassSpec{"default", 0});
  QueueSpec queue;
  queue.name = "default";
  spec.queues.push_back(queue);
  for (const trace::TraceNode& n : nodes) {
    NodeSpec node;
    node.name = n.name;
    node.cpu = n.cpu;
    node.memory = n.memory;
    for (std::int32_t d = 0; d < n.gpus && !n.gpu_model.empty(); ++d)
      node.devices.push_back({n.gpu_model, GpuMemMiB(0), 0});
    spec.nodes.push_back(std::move(node));
  }
  return spec;
}

std::vector<Pod> PodsFromTrace(std::span<const trace::TraceJob> jobs) {
  std::vector<Pod> pods;
  pods.reserve(jobs.size());
  for (const trace::TraceJob& j : jobs) {
    Pod p;
    p.name = j.name;
    p.tasks = j.tasks;
    p.gpu = j.gpu_per_task.value();
    p.cpu = j.cpu_per_task.value();
    p.memory = j.memory_per_task.value();
    p.models = j.gpu_models;
    pods.push_back(std::move(p));
  }
  return pods;
}

Result<Variant> ParseVariant(std::string_view text) {
  const std::size_t eq = text.find('=');
  const std::string_view kind = text.substr(0, eq);
  Variant v;
  if (kind == "gpuspec") {
    v.kind = Variant::Kind::kGpuSpec;
  } else if (kind == "multigpu") {
    v.kind = Variant::Kind::kMultiGpu;
  } else if (kind == "gpushare") {
    v.kind = Variant::Kind::kGpuShare;
  } else {
    return Status::InvalidArgument("variant '" + std::string(text) +
                                   "': unknown kind (known: gpuspec, multigpu, gpushare)");
  }
  const std::string_view number = eq == std::string_view::npos ? "" : text.substr(eq + 1);
  int percent = -1;
  if (!number.empty() && number.size() <= 3 &&
      std::all_of(number.begin(), number.end(), [](char c) { return c >= '0' && c <= '9'; }))
    percent = std::stoi(std::string(number));
  if (percent < 0 || percent > 100) {
    return Status::InvalidArgument("variant '" + std::string(text) +
                                   "': the share must be a percentage from 0 to 100, e.g. " +
                                   std::string(kind) + "=33");
  }
  v.percent = percent;
  return v;
}

std::string VariantName(const Variant& variant) {
  const char* kind = variant.kind == Variant::Kind::kGpuSpec    ? "gpuspec"
                     : variant.kind == Variant::Kind::kMultiGpu ? "multigpu"
                                                                : "gpushare";
  return std::string(kind) + "=" + std::to_string(variant.percent);
}

Result<std::vector<Pod>> MakeVariant(std::span<const Pod> pods,
                                     std::span<const trace::TraceNode> nodes,
                                     const Variant& variant) {
  std::mt19937_64 rng(variant.seed);
  std::vector<const Pod*> donors;  // kMultiGpu, kGpuShare: the pods drawn from
  for (const Pod& p : pods) {
    const bool multi = p.total_gpu() >= 2 * kMilliPerGpu;
    const bool share = p.gpu > 0 && p.gpu < kMilliPerGpu;
    if ((variant.kind == Variant::Kind::kMultiGpu && multi) ||
        (variant.kind == Variant::Kind::kGpuShare && share))
      donors.push_back(&p);
  }
  if (variant.kind != Variant::Kind::kGpuSpec && donors.empty()) {
    return Status::InvalidArgument(
        "variant " + VariantName(variant) + ": the list has no " +
        (variant.kind == Variant::Kind::kMultiGpu ? "multi-GPU pods" : "pods sharing a GPU"));
  }
  std::vector<Pod> out;
  out.reserve(pods.size());
  std::vector<const trace::TraceNode*> hosts;
  std::vector<std::int64_t> cumulative;
  for (const Pod& p : pods) {
    out.push_back(p);
    if (p.gpu == 0 || Below(rng, 100) >= static_cast<std::size_t>(variant.percent)) continue;
    Pod& pod = out.back();
    if (variant.kind != Variant::Kind::kGpuSpec) {
      const std::string name = pod.name;
      pod = *donors[Below(rng, donors.size())];
      pod.name = name;
      continue;
    }
    // A GPU drawn uniformly among those of the nodes that could host the pod.
    hosts.clear();
    cumulative.clear();
    std::int64_t gpus = 0;
    const std::int64_t per_node = std::max<std::int64_t>(1, pod.gpu / kMilliPerGpu);
    for (const trace::TraceNode& n : nodes) {
      if (n.gpus < per_node || n.cpu.value() < pod.cpu || n.memory.value() < pod.memory) continue;
      if (!pod.models.empty() &&
          std::find(pod.models.begin(), pod.models.end(), n.gpu_model) == pod.models.end())
        continue;
      hosts.push_back(&n);
      gpus += n.gpus;
      cumulative.push_back(gpus);
    }
    if (gpus == 0) continue;  // fits nowhere anyway: left as it is
    const std::int64_t draw = static_cast<std::int64_t>(Below(rng, static_cast<std::size_t>(gpus)));
    const std::size_t host = static_cast<std::size_t>(
        std::upper_bound(cumulative.begin(), cumulative.end(), draw) - cumulative.begin());
    pod.models = {hosts[host]->gpu_model};
  }
  return out;
}

Result<std::vector<Pod>> MakeVariants(std::span<const Pod> pods,
                                      std::span<const trace::TraceNode> nodes,
                                      std::span<const Variant> chain) {
  std::vector<Pod> out(pods.begin(), pods.end());
  for (std::size_t k = 0; k < chain.size(); ++k) {
    Variant variant = chain[k];
    variant.seed += k;
    Result<std::vector<Pod>> varied = MakeVariant(out, nodes, variant);
    if (!varied.ok()) return varied.status();
    out = std::move(*varied);
  }
  return out;
}

std::vector<TaskShape> ShapesOf(const ClusterState& state, std::span<const Pod> pods) {
  std::map<std::tuple<std::int64_t, std::int64_t, std::int64_t, std::uint64_t>, double> counts;
  for (const Pod& p : pods) {
    bool never = false;
    const GpuTypeSet types = AcceptedTypes(state, p, never);
    if (never) continue;
    counts[{p.gpu, p.cpu, p.memory, types.bits()}] += p.tasks;
  }
  std::vector<TaskShape> shapes;
  for (const auto& [key, n] : counts) {
    const auto& [gpu, cpu, memory, bits] = key;
    shapes.push_back({gpu, cpu, memory, GpuTypeSet(bits), n});
  }
  return shapes;
}

std::int64_t FragmentedMilli(const ClusterState& state, std::span<const Pod> pods) {
  // Distinct GPU shapes; of shapes equal but for CPU and memory, only the undominated matter.
  struct Shape {
    std::int64_t gpu, cpu, memory;
    GpuTypeSet types;
  };
  std::vector<Shape> shapes;
  for (const TaskShape& s : ShapesOf(state, pods)) {
    if (s.gpu == 0) continue;
    const bool dominated = std::any_of(shapes.begin(), shapes.end(), [&](const Shape& o) {
      return o.gpu == s.gpu && o.types == s.gpu_types && o.cpu <= s.cpu && o.memory <= s.memory;
    });
    if (!dominated) shapes.push_back({s.gpu, s.cpu, s.memory, s.gpu_types});
  }
  std::int64_t fragmented = 0;
  for (NodeId n = 0; n < state.node_count(); ++n) {
    const NodeState& node = state.node(n);
    for (const DeviceState& dev : node.devices) {
      if (dev.free.value() == 0) continue;
      const std::int64_t whole_free = state.NodeFreeDevices(n, dev.type);
      const bool usable = std::any_of(shapes.begin(), shapes.end(), [&](const Shape& s) {
        if (!s.types.Accepts(dev.type) || s.cpu > node.cpu_free.value() ||
            s.memory > node.memory_free.value())
          return false;
        if (s.gpu < kMilliPerGpu) return dev.free.value() >= s.gpu;
        return dev.free == kWholeGpu && whole_free >= s.gpu / kMilliPerGpu;
      });
      if (!usable) fragmented += dev.free.value();
    }
  }
  return fragmented;
}

// With the list's order for every seed, the default's runs would share one order of ties, and
// its mean would carry that order's bias (docs/placement.md, "Across families of workloads").
ClusterSpec InSeededOrder(const ClusterSpec& spec, std::uint64_t seed) {
  std::mt19937_64 rng(seed ^ 0x6e6f6465732d6f72ull);  // ("nodes-or")
  ClusterSpec out = spec;
  Shuffle(out.nodes, rng);
  return out;
}

Result<RunResult> RunOnce(const ClusterSpec& spec, std::span<const Pod> pods,
                          PlacementPolicy policy, std::uint64_t seed, double inflate,
                          std::span<const int> steps) {
  Result<ClusterState> created = ClusterState::Create(InSeededOrder(spec, seed));
  if (!created.ok()) return created.status();
  ClusterState& state = *created;
  const std::int64_t capacity = static_cast<std::int64_t>(state.device_count()) * kMilliPerGpu;
  if (capacity == 0) return Status::InvalidArgument("the cluster has no GPUs", "nodes");

  EngineOptions options;
  options.preemption.enabled = false;
  options.backfill.reservations = 0;
  options.placement.policy = policy;
  options.placement.seed = seed;
  options.placement.shapes = ShapesOf(state, pods);
  const Engine engine(options);

  const std::vector<std::uint32_t> order =
      ArrivalOrder(pods, seed, static_cast<std::int64_t>(inflate * static_cast<double>(capacity)));
  // Allocation ratios recorded per arrived whole percent.
  std::int64_t demand = 0;
  for (std::uint32_t i : order) demand += pods[i].total_gpu();
  int max_pct = static_cast<int>(100 * demand / capacity) + 2;
  for (int step : steps) max_pct = std::max(max_pct, step + 2);
  std::vector<double> sum(static_cast<std::size_t>(max_pct) + 1, 0);
  std::vector<std::int64_t> count(sum.size(), 0);

  RunResult result;
  result.frag_pct = std::numeric_limits<double>::quiet_NaN();
  std::int64_t arrived = 0, allocated = 0;
  const auto start = std::chrono::steady_clock::now();
  std::vector<Job> pending(1);
  for (std::size_t i = 0; i < order.size(); ++i) {
    const Pod& pod = pods[order[i]];
    bool never = false;
    const GpuTypeSet types = AcceptedTypes(state, pod, never);
    arrived += pod.total_gpu();
    ++result.pods;
    bool placed = false;
    if (!never) {
      pending[0] = MakeJob(pod, static_cast<JobId>(i + 1), types);
      const Plan plan = engine.Schedule(state, pending, 0);
      if (!plan.binds.empty()) {
        if (Status st = state.Apply(plan, pending); !st.ok()) return st;
        allocated += pod.total_gpu();
        placed = true;
      }
    }
    if (!placed) ++result.failed_pods;
    const double arrived_pct = 100.0 * static_cast<double>(arrived) / static_cast<double>(capacity);
    const long bucket = std::lround(arrived_pct);
    if (bucket >= 0 && bucket < static_cast<long>(sum.size())) {
      sum[static_cast<std::size_t>(bucket)] +=
          100.0 * static_cast<double>(allocated) / static_cast<double>(capacity);
      ++count[static_cast<std::size_t>(bucket)];
    }
    if (std::isnan(result.frag_pct) && arrived_pct >= 100.0) {
      result.frag_pct =
          100.0 * static_cast<double>(FragmentedMilli(state, pods)) / static_cast<double>(capacity);
    }
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (int step : steps) {
    double s = 0;
    std::int64_t c = 0;
    if (step >= 0 && step < static_cast<int>(sum.size()) && count[static_cast<std::size_t>(step)]) {
      s = sum[static_cast<std::size_t>(step)];
      c = count[static_cast<std::size_t>(step)];
    } else {
      for (int b = step - 1; b <= step + 1; ++b) {
        if (b < 0 || b >= static_cast<int>(sum.size())) continue;
        s += sum[static_cast<std::size_t>(b)];
        c += count[static_cast<std::size_t>(b)];
      }
    }
    result.alloc_pct.push_back(c > 0 ? s / static_cast<double>(c)
                                     : std::numeric_limits<double>::quiet_NaN());
  }
  return result;
}

Result<FillOptions> MakeFillOptions(std::span<const std::string> policies, int seeds,
                                    std::uint64_t first_seed, double inflate, int threads) {
  FillOptions options;
  if (!policies.empty()) {
    options.policies.clear();
    for (const std::string& name : policies) {
      PlacementPolicy policy;
      if (!ParsePlacementPolicy(name, policy)) {
        std::string known;
        for (PlacementPolicy p : kAllPlacementPolicies)
          known += (known.empty() ? "" : ", ") + std::string(PlacementPolicyName(p));
        return Status::InvalidArgument("unknown policy '" + name + "' (known: " + known + ")",
                                       "policies");
      }
      options.policies.push_back(policy);
    }
  }
  if (seeds < 1) return Status::InvalidArgument("at least 1", "seeds");
  if (!(inflate > 0) || inflate > 100)
    return Status::InvalidArgument("a ratio above 0, e.g. 1.3", "inflate");
  options.seeds = seeds;
  options.first_seed = first_seed;
  options.inflate = inflate;
  options.threads =
      threads > 0 ? threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return options;
}

Result<FillReport> RunFill(
    std::span<const trace::TraceNode> nodes, std::span<const Pod> pods, const FillOptions& options,
    const std::function<void(PlacementPolicy, std::uint64_t, const RunResult&)>& progress) {
  if (options.seeds < 1) return Status::InvalidArgument("at least 1", "seeds");
  if (!(options.inflate > 0)) return Status::InvalidArgument("must be positive", "inflate");
  if (options.step_pct < 1) return Status::InvalidArgument("at least 1", "step");
  const ClusterSpec spec = MakeCluster(nodes);
  FillReport report;
  report.nodes = nodes.size();
  for (const trace::TraceNode& n : nodes) report.gpus += n.gpus;
  report.listed_pods = pods.size();
  for (int p = options.step_pct; p <= static_cast<int>(std::lround(options.inflate * 100));
       p += options.step_pct)
    report.steps.push_back(p);

  struct Work {
    std::size_t policy;
    int seed;
  };
  std::vector<Work> work;
  for (std::size_t p = 0; p < options.policies.size(); ++p) {
    report.policies.push_back({options.policies[p], {}, 0, 0, 0, {}});
    report.policies.back().runs.resize(static_cast<std::size_t>(options.seeds));
    for (int s = 0; s < options.seeds; ++s) work.push_back({p, s});
  }
  std::atomic<std::size_t> next{0};
  std::mutex mu;
  Status failure;
  auto worker = [&] {
    for (std::size_t w = next++; w < work.size(); w = next++) {
      const Work& item = work[w];
      const PlacementPolicy policy = options.policies[item.policy];
      const std::uint64_t seed = options.first_seed + static_cast<std::uint64_t>(item.seed);
      Result<RunResult> run = RunOnce(spec, pods, policy, seed, options.inflate, report.steps);
      std::lock_guard<std::mutex> lock(mu);
      if (!run.ok()) {
        if (failure.ok()) failure = run.status();
        continue;
      }
      report.policies[item.policy].runs[static_cast<std::size_t>(item.seed)] = *run;
      if (progress) progress(policy, seed, *run);
    }
  };
  const int threads = std::max(1, std::min<int>(options.threads, static_cast<int>(work.size())));
  std::vector<std::thread> pool;
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
  if (!failure.ok()) return failure;

  for (PolicyResult& r : report.policies) {
    const double n = static_cast<double>(r.runs.size());
    r.alloc_pct.assign(report.steps.size(), 0);
    for (const RunResult& run : r.runs) {
      for (std::size_t i = 0; i < report.steps.size(); ++i) r.alloc_pct[i] += run.alloc_pct[i] / n;
      r.failed_pods += static_cast<double>(run.failed_pods) / n;
      r.frag_pct += run.frag_pct / n;
      r.seconds += run.seconds / n;
    }
  }
  return report;
}

std::string ToJson(const FillReport& report) {
  std::string out = "{\"policies\": {";
  for (std::size_t p = 0; p < report.policies.size(); ++p) {
    const PolicyResult& r = report.policies[p];
    out += p ? ",\n  " : "\n  ";
    out += "\"" + std::string(PlacementPolicyName(r.policy)) + "\": {\"alloc_pct\": {";
    for (std::size_t i = 0; i < report.steps.size(); ++i) {
      out +=
          (i ? ", \"" : "\"") + std::to_string(report.steps[i]) + "\": " + Number(r.alloc_pct[i]);
    }
    out += "}, \"failed_pods\": " + Number(r.failed_pods) + "}";
  }
  out += "\n}}\n";
  return out;
}

}  // namespace arbiter::fill
