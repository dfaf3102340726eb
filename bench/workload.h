// Synthetic clusters and pending-job lists for the benchmarks. Everything is generated from an
// explicit seed with std::mt19937_64 and our own integer mapping (no std::*_distribution, whose
// output differs between standard libraries), so a seed names the same workload everywhere.
//
// The shapes follow the public traces in shared/data/traces (see PROVENANCE.md there), without
// reading them at run time:
//  - openb (Alibaba PAI 2023): many fractional-GPU pods (gpu_milli 50..900, peaks near 320, 470,
//    650, 810), 1-GPU pods asking 4..16 cores and 16..64 GiB, a few 2/4/8-GPU pods, CPU-only pods;
//  - Philly (Microsoft 2017): mostly 1-GPU jobs and a heavy tail of multi-node gangs.
#pragma once

#include <stdlib.h>  // mkdtemp

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "arbiter/model.h"
#include "arbiter/state.h"

namespace arbiter::bench {

[[noreturn]] inline void Fail(const std::string& what) {
  std::fprintf(stderr, "arbiter_bench: %s\n", what.c_str());
  std::exit(1);
}

inline constexpr std::int64_t kGiB = 1024;  // MiB per GiB

// The p-quantile (0..1) of `v` (reordered).
inline double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const auto k = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1));
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(k), v.end());
  return v[k];
}

// Closed-loop load: `threads` threads, each with its own worker `make(thread)` (made in the thread
// before the clock starts), call `worker(i)` for i = 0, 1, ... until `seconds` have passed. Every
// call is timed; the latencies (microseconds) of all threads and the wall seconds come back.
struct TimedRun {
  std::vector<double> latencies_us;
  double wall_seconds = 0;
};
template <typename MakeWorker>
TimedRun RunClosedLoop(int threads, double seconds, MakeWorker make) {
  using Clock = std::chrono::steady_clock;
  std::vector<std::vector<double>> latencies(static_cast<std::size_t>(threads));
  std::atomic<bool> go{false};
  const auto duration =
      std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  Clock::time_point start;
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      auto worker = make(t);
      while (!go.load()) std::this_thread::yield();
      std::vector<double>& lat = latencies[static_cast<std::size_t>(t)];
      const Clock::time_point end = start + duration;
      for (std::int64_t i = 0;; ++i) {
        const Clock::time_point t0 = Clock::now();
        if (t0 >= end) break;
        worker(i);
        lat.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      }
    });
  }
  start = Clock::now();
  go = true;
  for (std::thread& w : workers) w.join();
  TimedRun run;
  run.wall_seconds = std::chrono::duration<double>(Clock::now() - start).count();
  for (const std::vector<double>& l : latencies)
    run.latencies_us.insert(run.latencies_us.end(), l.begin(), l.end());
  return run;
}

// A fresh temporary directory (TMPDIR or /tmp), removed with everything in it.
class TempDir {
 public:
  explicit TempDir(const std::string& prefix = "arbiter-bench") {
    std::string pattern = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) == nullptr) Fail("cannot create a temporary directory");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// ---------------------------------------------------------------------------------------------
// Seeded draws.

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : engine_(seed) {}

  // Uniform in [0, n), n > 0. The modulo bias (n / 2^64) is irrelevant here.
  std::uint64_t Below(std::uint64_t n) { return engine_() % n; }
  // Uniform in [lo, hi].
  std::int64_t Between(std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(Below(static_cast<std::uint64_t>(hi - lo + 1)));
  }
  // True with probability percent / 100.
  bool Percent(std::uint64_t percent) { return Below(100) < percent; }
  // An index drawn with the given integer weights.
  std::size_t Weighted(const std::vector<std::uint32_t>& weights) {
    std::uint64_t total = 0;
    for (std::uint32_t w : weights) total += w;
    std::uint64_t x = Below(total);
    for (std::size_t i = 0; i < weights.size(); ++i) {
      if (x < weights[i]) return i;
      x -= weights[i];
    }
    return weights.size() - 1;
  }
  template <typename T>
  T Pick(const std::vector<T>& values) {
    return values[static_cast<std::size_t>(Below(values.size()))];
  }

 private:
  std::mt19937_64 engine_;
};

// ---------------------------------------------------------------------------------------------
// The cluster.

struct GpuModel {
  std::string name;
  std::int64_t memory_gib = 0;
  std::uint32_t percent = 0;        // share of the cluster's nodes
  std::uint32_t nvlink_groups = 1;  // equal groups of the node's 8 devices
};

// H800 and A100 nodes have one NVLink domain of 8 (NVSwitch); V100 (hybrid cube mesh, modelled as
// two quads) and L40S (PCIe, two switches) have two groups of 4.
inline std::vector<GpuModel> DefaultGpuModels() {
  return {{"H800", 80, 40, 1}, {"A100-80G", 80, 30, 1}, {"L40S", 48, 20, 2}, {"V100", 32, 10, 2}};
}

struct ClusterShape {
  std::uint32_t nodes = 10'000;
  std::uint32_t gpus_per_node = 8;
  std::uint32_t nodes_per_leaf = 32;
  std::uint32_t leaves_per_spine = 16;
  std::vector<GpuModel> models = DefaultGpuModels();
  std::uint64_t seed = 1;
};

inline constexpr int kSpineLevel = 0;  // index into Topology::levels
inline constexpr int kLeafLevel = 1;

// Queues: org > {train, infer, batch}; the leaf queues' nominal GPU quota adds up to the cluster,
// with unlimited borrowing, so quota orders work (borrowers go after the guaranteed) but only
// refuses what the cluster could not hold anyway.
struct QueueMix {
  const char* name;
  std::uint32_t quota_percent;  // nominal share of the cluster's GPUs
};
inline const std::vector<QueueMix>& LeafQueues() {
  static const std::vector<QueueMix> kQueues = {{"train", 50}, {"infer", 20}, {"batch", 30}};
  return kQueues;
}

// Leaves are homogeneous (one GPU model each, as racks are bought), models in contiguous runs of
// leaves in the order of `models`. Node cores and memory vary per node.
inline ClusterSpec MakeCluster(const ClusterShape& shape) {
  Rng rng(shape.seed);
  ClusterSpec spec;
  spec.topology.levels = {"spine", "leaf"};
  spec.priority_classes = {{"P0", 1000, false}, {"P1", 500, true}, {"P2", 100, true}};

  const std::uint32_t leaves = (shape.nodes + shape.nodes_per_leaf - 1) / shape.nodes_per_leaf;
  std::vector<std::uint32_t> cumulative;  // cumulative percent per model
  std::uint32_t sum = 0;
  for (const GpuModel& m : shape.models) cumulative.push_back(sum += m.percent);
  spec.nodes.reserve(shape.nodes);
  for (std::uint32_t i = 0; i < shape.nodes; ++i) {
    const std::uint32_t leaf = i / shape.nodes_per_leaf;
    const std::uint32_t spine = leaf / shape.leaves_per_spine;
    // The model whose cumulative share first exceeds the leaf's position.
    const std::uint64_t position = std::uint64_t{leaf} * sum / leaves;
    std::size_t m = 0;
    while (m + 1 < cumulative.size() && position >= cumulative[m]) ++m;
    const GpuModel& model = shape.models[m];

    NodeSpec node;
    node.name = "node-" + std::to_string(i);
    node.domains = {"spine-" + std::to_string(spine), "leaf-" + std::to_string(leaf)};
    node.cpu = MilliCpu(1000 * rng.Pick(std::vector<std::int64_t>{96, 112, 128}));
    node.memory = MemMiB(kGiB * rng.Pick(std::vector<std::int64_t>{1024, 1536, 2048}));
    node.labels = {{"gpu-model", model.name}};
    const std::uint32_t per_group = shape.gpus_per_node / model.nvlink_groups;
    for (std::uint32_t d = 0; d < shape.gpus_per_node; ++d) {
      node.devices.push_back({model.name, GpuMemMiB(model.memory_gib * kGiB), d / per_group});
    }
    spec.nodes.push_back(std::move(node));
  }

  const std::int64_t total_milli = std::int64_t{shape.nodes} * shape.gpus_per_node * kMilliPerGpu;
  spec.queues.push_back({"org", "", {}, 1, 0, true});
  for (const QueueMix& q : LeafQueues()) {
    QueueSpec leaf{q.name, "org", {}, 1, 0, true};
    leaf.quota[kAllGpusResource] = QuotaSpec{MilliGpu(total_milli * q.quota_percent / 100),
                                             std::nullopt, std::nullopt, std::nullopt};
    spec.queues.push_back(std::move(leaf));
  }
  return spec;
}

// The cluster of MakeCluster(shape); fails the bench when it cannot be built.
inline Cluster BuildCluster(const ClusterShape& shape) {
  Result<Cluster> created = Cluster::Create(MakeCluster(shape));
  if (!created.ok()) Fail("cluster: " + created.status().message());
  return std::move(created).value();
}

// ---------------------------------------------------------------------------------------------
// The pending jobs.

// Shares of the job count, in percent (they add up to 100).
struct JobMix {
  std::uint32_t fractional = 30;  // one task, 100..900 milli-GPU
  std::uint32_t one_gpu = 45;     // one task, 1 GPU
  std::uint32_t few_gpus = 10;    // one task, 2..4 GPUs
  std::uint32_t eight_gpus = 8;   // one task of 8 GPUs, or 8 tasks of 1
  std::uint32_t gang = 5;         // 2..8 tasks of 8 GPUs (16..64), leaf required or preferred
  std::uint32_t cpu_only = 2;     // one task, no GPU
};

struct WorkloadShape {
  std::uint32_t jobs = 100'000;
  JobMix mix;
  Millis now = 30LL * 24 * 3600 * kMillisPerSecond;
  // Submit times lie in [now - max_wait, now].
  Millis max_wait = 7LL * 24 * 3600 * kMillisPerSecond;
  std::uint64_t seed = 2;
};

// `models` are the cluster's GPU models (the job's acceptable types are drawn among them, with the
// cluster's proportions); queue and priority-class ids follow MakeCluster's order.
inline std::vector<Job> MakeJobs(const WorkloadShape& shape, const std::vector<GpuModel>& models) {
  Rng rng(shape.seed);
  const JobMix& mix = shape.mix;
  const std::vector<std::uint32_t> kind_weights = {mix.fractional, mix.one_gpu, mix.few_gpus,
                                                   mix.eight_gpus, mix.gang,    mix.cpu_only};
  std::vector<std::uint32_t> model_weights;
  for (const GpuModel& m : models) model_weights.push_back(m.percent);

  // openb-like requests. Fractions cluster on a few values; CPU and memory come from small sets,
  // so equal shapes recur as they do in real queues.
  const std::vector<std::int64_t> kShares = {100, 150, 200, 250, 300, 320, 400, 470,
                                             500, 550, 600, 650, 700, 810, 900};
  const std::vector<std::uint32_t> kShareWeights = {3, 2, 4, 6, 4, 10, 5, 14, 8, 3, 5, 9, 4, 16, 7};
  auto cpu = [](std::int64_t cores) { return MilliCpu(cores * 1000); };
  auto mem = [](std::int64_t gib) { return MemMiB(gib * kGiB); };

  std::vector<Job> jobs;
  jobs.reserve(shape.jobs);
  for (std::uint32_t i = 0; i < shape.jobs; ++i) {
    Job job;
    job.id = i + 1;
    job.name = "job-" + std::to_string(job.id);
    job.user = "user-" + std::to_string(rng.Below(200));
    job.submit_time =
        shape.now - static_cast<Millis>(rng.Below(static_cast<std::uint64_t>(shape.max_wait)));
    job.priority_class = static_cast<PriorityClassId>(rng.Weighted({10, 30, 60}));  // P0, P1, P2
    // Queue ids: 0 is org, 1 train, 2 infer, 3 batch.
    QueueId queue = static_cast<QueueId>(1 + rng.Weighted({45, 20, 35}));

    // Acceptable GPU types: mostly one model, some two, some any.
    const std::uint64_t breadth = rng.Below(100);
    if (breadth < 70) {
      job.gpu_types = GpuTypeSet::Of(static_cast<GpuTypeId>(rng.Weighted(model_weights)));
    } else if (breadth < 90) {
      const GpuTypeId a = static_cast<GpuTypeId>(rng.Weighted(model_weights));
      GpuTypeId b = static_cast<GpuTypeId>(rng.Weighted(model_weights));
      if (b == a) b = static_cast<GpuTypeId>((a + 1) % models.size());
      job.gpu_types = GpuTypeSet::Of(a);
      job.gpu_types.Add(b);
    }  // else: any type

    TaskGroup group;
    group.name = "worker";
    TaskRequest& r = group.request;
    switch (rng.Weighted(kind_weights)) {
      case 0: {  // fractional, mostly inference
        const std::int64_t share = kShares[rng.Weighted(kShareWeights)];
        r.gpu = MilliGpu(share);
        r.gpu_memory = GpuMemMiB(share * 24);  // ~24 GiB per whole GPU's worth, fits a V100
        r.cpu = cpu(rng.Pick(std::vector<std::int64_t>{1, 2, 4, 4, 6, 8}));
        r.memory = mem(rng.Pick(std::vector<std::int64_t>{4, 8, 16, 16, 32}));
        if (rng.Percent(60)) queue = 2;
        break;
      }
      case 1:  // one GPU
        r.gpu = kWholeGpu;
        r.cpu = cpu(rng.Pick(std::vector<std::int64_t>{4, 8, 8, 12, 16}));
        r.memory = mem(rng.Pick(std::vector<std::int64_t>{32, 48, 64, 64, 96, 128}));
        break;
      case 2: {  // 2..4 GPUs on one node
        const std::int64_t gpus = rng.Pick(std::vector<std::int64_t>{2, 2, 2, 3, 4, 4});
        r.gpu = MilliGpu(gpus * kMilliPerGpu);
        r.cpu = cpu(gpus * rng.Pick(std::vector<std::int64_t>{8, 10, 12}));
        r.memory = mem(gpus * rng.Pick(std::vector<std::int64_t>{64, 96, 128}));
        if (rng.Percent(20)) r.gpu_memory = GpuMemMiB(40 * kGiB);  // rules out V100
        break;
      }
      case 3:  // 8 GPUs: one task of 8 or 8 tasks of 1
        if (rng.Percent(50)) {
          r.gpu = MilliGpu(8 * kMilliPerGpu);
          r.cpu = cpu(rng.Pick(std::vector<std::int64_t>{64, 80, 96}));
          r.memory = mem(rng.Pick(std::vector<std::int64_t>{512, 768, 1024}));
        } else {
          group.count = 8;
          r.gpu = kWholeGpu;
          r.cpu = cpu(rng.Pick(std::vector<std::int64_t>{8, 10, 12}));
          r.memory = mem(rng.Pick(std::vector<std::int64_t>{64, 96, 128}));
        }
        queue = rng.Percent(80) ? 1 : queue;
        break;
      case 4: {  // gang of 8-GPU tasks, 16..64 GPUs, heavy tail; kept inside a leaf
        group.count = static_cast<std::int32_t>(
            std::vector<std::int64_t>{2, 3, 4, 6, 8}[rng.Weighted({40, 15, 25, 8, 12})]);
        r.gpu = MilliGpu(8 * kMilliPerGpu);
        r.cpu = cpu(rng.Pick(std::vector<std::int64_t>{64, 80, 96}));
        r.memory = mem(rng.Pick(std::vector<std::int64_t>{512, 768, 960}));
        job.topology = {kLeafLevel,
                        rng.Percent(50) ? ConstraintMode::kRequired : ConstraintMode::kPreferred};
        // Large training runs name one or both of the fast models (ids 0 and 1).
        job.gpu_types = GpuTypeSet::Of(static_cast<GpuTypeId>(rng.Weighted({60, 40})));
        if (rng.Percent(25)) job.gpu_types = GpuTypeSet(0b11);
        queue = 1;
        break;
      }
      default:  // CPU only
        r.cpu = cpu(rng.Pick(std::vector<std::int64_t>{2, 4, 8, 16, 32}));
        r.memory = mem(rng.Pick(std::vector<std::int64_t>{8, 16, 32, 64, 128}));
        job.gpu_types = GpuTypeSet();
        queue = 3;
        break;
    }
    job.queue = queue;
    job.groups.push_back(std::move(group));
    jobs.push_back(std::move(job));
  }
  return jobs;
}

// Milli-GPU the jobs ask for in total.
inline std::int64_t TotalGpuDemand(const std::vector<Job>& jobs) {
  std::int64_t total = 0;
  for (const Job& j : jobs) total += j.total_gpu().value();
  return total;
}

}  // namespace arbiter::bench
