// The simulator benchmark: wall time and events per second of a trace replay. The trace is
// Philly-shaped: each job's GPU count and duration are drawn together from a row of the shipped
// Philly sample, arrivals are Poisson at the rate that offers 80% of the cluster's GPU-hours.
#include "sim_bench.h"

#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "sim/sim.h"
#include "sim/workload.h"
#include "trace/trace.h"
#include "workload.h"

namespace arbiter::bench {

namespace {

// `jobs` jobs drawn from the rows of the Philly sample (GPU count and duration of one row each),
// Poisson arrivals at the rate that offers `load` times the GPU-hours of `gpus` GPUs, dealt round
// robin to the queues 1..`queues`; batch work, runtime estimates exact.
sim::Workload PhillyWorkload(const std::string& sample, std::int64_t jobs, double load,
                             std::int64_t gpus, int queues, std::uint64_t seed) {
  Result<trace::Trace> philly = trace::ReadTraceFile(sample, "philly");
  if (!philly.ok()) Fail(philly.status().message());
  if (philly->jobs.empty()) Fail(sample + ": no jobs");
  double gpu_hours = 0;  // mean per row
  for (const trace::TraceJob& j : philly->jobs) {
    gpu_hours += static_cast<double>(j.tasks) * static_cast<double>(j.gpu_per_task.value()) /
                 kMilliPerGpu * static_cast<double>(j.duration) / 3.6e6;
  }
  gpu_hours /= static_cast<double>(philly->jobs.size());
  const double per_hour = load * static_cast<double>(gpus) / gpu_hours;
  sim::Workload workload;
  sim::Rng rng(seed);
  double t = 0;
  workload.jobs.reserve(static_cast<std::size_t>(jobs));
  for (std::int64_t k = 0; k < jobs; ++k) {
    t += rng.Exponential(3.6e6 / per_hour);
    const trace::TraceJob& row = philly->jobs[static_cast<std::size_t>(
        rng.Uniform() * static_cast<double>(philly->jobs.size()))];
    sim::SimJob j;
    j.job.name = "philly-" + std::to_string(k);
    j.job.queue = static_cast<QueueId>(1 + k % queues);
    j.job.submit_time = static_cast<Millis>(t);
    TaskGroup g;
    g.name = "main";
    g.count = row.tasks;
    g.request.gpu = row.gpu_per_task;
    g.request.cpu = MilliCpu(4000);
    g.request.memory = MemMiB(32 * 1024);
    j.job.groups.push_back(g);
    j.kind = sim::WorkKind::kBatch;
    j.workload = "philly";
    j.work = std::max<Millis>(1000, row.duration);
    j.job.runtime_estimate = j.work;
    workload.jobs.push_back(std::move(j));
  }
  return workload;
}

// `nodes` nodes of 8 V100 (two NVLink groups of 4) in racks of 16.
void AddV100Nodes(ClusterSpec& cluster, std::int64_t nodes) {
  for (std::int64_t n = 0; n < nodes; ++n) {
    NodeSpec node;
    node.name = "n" + std::to_string(n);
    node.cpu = MilliCpu(64'000);
    node.memory = MemMiB(512 * 1024);
    for (int d = 0; d < 8; ++d) {
      node.devices.push_back(
          DeviceSpec{"V100", GpuMemMiB(32 * 1024), static_cast<std::uint32_t>(d / 4)});
    }
    node.domains = {"rack-" + std::to_string(n / 16)};
    cluster.nodes.push_back(std::move(node));
  }
}

}  // namespace

void RunSimBench(const std::string& sample, std::int64_t jobs, std::int64_t gpus,
                 std::uint64_t seed, const std::string& label) {
  ClusterSpec cluster;
  cluster.topology.levels = {"rack"};
  cluster.priority_classes = {{"normal", 0, true}};
  for (const char* q : {"root", "vc"}) {
    QueueSpec spec;
    spec.name = q;
    if (std::string(q) == "vc") spec.parent = "root";
    cluster.queues.push_back(spec);
  }
  AddV100Nodes(cluster, (gpus + 7) / 8);

  const sim::Workload workload = PhillyWorkload(sample, jobs, 0.8, gpus, 1, seed);

  sim::SimOptions options;
  options.sample_interval = 3600 * kMillisPerSecond;
  const auto start = std::chrono::steady_clock::now();
  Result<sim::RunResult> run = sim::Simulate(cluster, EngineOptions{}, workload, options, "philly");
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!run.ok()) Fail(run.status().message());
  std::printf(
      "# sim: %lld Philly-shaped jobs on %lld GPUs: %lld events, %lld cycles, %.1f simulated "
      "days, %lld completed, utilisation %.3f\n",
      static_cast<long long>(jobs), static_cast<long long>(gpus),
      static_cast<long long>(run->events), static_cast<long long>(run->cycles),
      static_cast<double>(run->horizon) / 8.64e7,
      static_cast<long long>(run->overall.jobs_completed), run->gpu_allocation);
  const std::string events_name =
      label == "100k" ? "sim_events_per_s" : "sim_events_per_s_" + label;
  std::printf("BENCH %s %.6g events/s\n", events_name.c_str(),
              static_cast<double>(run->events) / seconds);
  std::printf("BENCH sim_philly%s_s %.6g s\n", label.c_str(), seconds);
}

namespace {

// The backlog benchmark's cluster: 64 nodes x 8 V100 in four racks of 16, and four queues (a
// trace's virtual clusters) with equal weights under one root. The fair-share factor is refreshed
// every 5 minutes (Slurm's default PriorityCalcPeriod).
ClusterSpec BacklogCluster(bool strict_fifo) {
  ClusterSpec cluster;
  cluster.fair_share_period = 5 * 60 * kMillisPerSecond;
  cluster.topology.levels = {"rack"};
  cluster.priority_classes = {{"normal", 0, true}};
  QueueSpec root;
  root.name = "root";
  cluster.queues.push_back(root);
  for (int q = 0; q < 4; ++q) {
    QueueSpec vc;
    vc.name = "vc" + std::to_string(q);
    vc.parent = "root";
    vc.strict_fifo = strict_fifo;
    cluster.queues.push_back(vc);
  }
  AddV100Nodes(cluster, 64);
  return cluster;
}

}  // namespace

void WriteBacklogTrace(const std::string& sample, std::int64_t jobs, std::uint64_t seed,
                       const std::string& path) {
  const sim::Workload workload = PhillyWorkload(sample, jobs, 3.0, 64 * 8, 4, seed);
  std::FILE* out = std::fopen(path.c_str(), "w");
  if (!out) Fail(path + ": cannot write");
  std::fprintf(out, "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n");
  for (std::size_t i = 0; i < workload.jobs.size(); ++i) {
    const sim::SimJob& j = workload.jobs[i];
    // Whole seconds, as Tiresias's simulator counts: arrivals down, durations up.
    std::fprintf(out, "%zu,%lld,%lld,1,philly,%lld,1\n", i,
                 static_cast<long long>(j.job.total_gpu().value() / kMilliPerGpu),
                 static_cast<long long>(j.job.submit_time / kMillisPerSecond),
                 static_cast<long long>((j.work + kMillisPerSecond - 1) / kMillisPerSecond));
  }
  if (std::fclose(out) != 0) Fail(path + ": cannot write");
  std::printf("# wrote %zu jobs to %s\n", workload.jobs.size(), path.c_str());
}

void RunBacklogBench(const std::string& sample, std::int64_t jobs, std::uint64_t seed,
                     const std::string& policy, bool skip) {
  constexpr std::int64_t kGpus = 64 * 8;
  // Arrivals compressed so that the offered load is three times the cluster's GPU-hours.
  const sim::Workload workload = PhillyWorkload(sample, jobs, 3.0, kGpus, 4, seed);
  struct Policy {
    const char* name;
    bool strict_fifo;
    EngineOptions engine;
  };
  // Strict FIFO: each queue's head blocks it, no backfill, no preemption, no fair share.
  EngineOptions fifo;
  fifo.backfill.reservations = 0;
  fifo.preemption.enabled = false;
  fifo.ordering.fair_share = 0;
  fifo.ordering.age = 0;
  // The default order (class, queue priority, fair share, age) with backfill.
  EngineOptions defaults;
  // Fair share between the four queues first: the other factors are small beside it.
  EngineOptions fair;
  fair.ordering.fair_share = 100'000;
  const Policy policies[] = {
      {"fifo", true, fifo}, {"default", false, defaults}, {"fairshare", false, fair}};
  for (const Policy& p : policies) {
    if (!policy.empty() && policy != p.name) continue;
    sim::SimOptions options;
    options.sample_interval = 3600 * kMillisPerSecond;
    options.skip_unchanged_cycles = skip;
    const auto start = std::chrono::steady_clock::now();
    Result<sim::RunResult> run =
        sim::Simulate(BacklogCluster(p.strict_fifo), p.engine, workload, options, p.name);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (!run.ok()) Fail(run.status().message());
    std::printf(
        "# sim backlog (%s): %lld jobs on %lld GPUs at 3x load: %lld events, %lld cycles (%lld "
        "rerun), %lld jobs parked, %.1f simulated days, %lld completed, mean wait %.1f h, mean "
        "JCT %.1f h\n",
        p.name, static_cast<long long>(jobs), static_cast<long long>(kGpus),
        static_cast<long long>(run->events), static_cast<long long>(run->cycles),
        static_cast<long long>(run->cycles_rerun), static_cast<long long>(run->jobs_parked),
        static_cast<double>(run->horizon) / 8.64e7,
        static_cast<long long>(run->overall.jobs_completed), run->overall.wait.mean / 3600,
        run->overall.jct.mean / 3600);
    std::printf("BENCH sim_backlog20k_%s_s %.6g s\n", p.name, seconds);
    std::fflush(stdout);
  }
}

}  // namespace arbiter::bench
