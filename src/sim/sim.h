// The simulator: a discrete-event loop over a virtual clock that drives the same Engine as the
// server. Jobs arrive, the engine plans, the simulator applies the plan to the ClusterState and
// plays the jobs forward: training makes progress only while it runs and checkpoints every so
// often; an eviction loses the progress since the last checkpoint (or none, when the grace period
// leaves time to save one); inference services scale replicas to a request-rate curve and their
// latency follows from the replicas actually serving (M/M/c). Deterministic: no clock, no
// unseeded randomness. Standard library only.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "arbiter/engine.h"
#include "arbiter/model.h"
#include "arbiter/status.h"

namespace arbiter::sim {

enum class WorkKind : std::uint8_t { kTraining, kInference, kBatch };
const char* WorkKindName(WorkKind kind);  // "training", "inference", "batch"

// One job the simulator submits: the engine's job and how it behaves while it runs. The engine's
// `job.checkpoint_interval` (progress between checkpoints) and `job.restart_overhead` (time after
// each restart before progress resumes) drive progress too.
struct SimJob {
  Job job;  // id is assigned by the simulator
  WorkKind kind = WorkKind::kBatch;
  std::string workload;        // the generator or trace it came from
  Millis work = 0;             // running time to complete, without checkpoints and restarts
  Millis checkpoint_cost = 0;  // time one checkpoint takes, without progress
  // When it was evicted before the simulation started (a scenario that starts from a snapshot),
  // oldest first: the engine's guards (eviction budget, cooldown) count them.
  std::vector<Millis> evictions;
};

// A job already running when the simulation starts (a scenario that starts from a snapshot). It
// is bound at time 0 on `allocation` through ClusterState::Bind, as started at `start_time` (at or
// before 0), and it continues from there: `job.work` is all of its work, the part done before 0
// included; its progress since its last checkpoint (`last_checkpoint`, else its start) is lost if
// it is evicted. Its record's first start is its start time, before 0: it counts in no wait
// statistic (it waited before the run).
struct InitialRun {
  SimJob job;
  Allocation allocation;
  Millis start_time = 0;
  std::optional<Millis> last_checkpoint;
};

// Request rate of an inference service in requests per second:
// base * (1 + diurnal * cos(2 pi (t - peak) / 1 day)) * (factor of every spike covering t).
struct RateSpike {
  Millis at = 0;
  Millis duration = 0;
  double factor = 1;
};
struct RateCurve {
  double base = 0;
  double diurnal = 0;                          // relative amplitude in [0, 1]
  Millis peak = 14 * 3600 * kMillisPerSecond;  // time of day of the daily peak
  std::vector<RateSpike> spikes;
  double At(Millis t) const;
};

// An inference service: an autoscaler asks for replicas from the request rate, and the simulator
// submits or stops replica jobs (copies of `replica`) to match.
struct InferenceService {
  std::string name;
  Job replica;  // queue, class, one task group, GPU types; the id is assigned per replica
  RateCurve rate;
  double replica_rate = 10;         // mu: requests per second one replica serves
  double target_utilization = 0.7;  // the autoscaler aims at rate / (replicas * mu) = this
  std::int32_t min_replicas = 1;
  std::int32_t max_replicas = 64;
  Millis scale_interval = 60 * kMillisPerSecond;
  Millis startup = 0;                      // a replica serves this long after it starts
  Millis slo = 200;                        // latency objective for the P99 of each scale interval
  Millis timeout = 30 * kMillisPerSecond;  // latency of requests the running replicas cannot take
};

// A node down from `at` for `duration` (its jobs are requeued, losing work since their last
// checkpoint).
struct NodeOutage {
  NodeId node = 0;
  Millis at = 0;
  Millis duration = 0;
};

struct Workload {
  std::vector<SimJob> jobs;  // in any order; each starts pending at job.submit_time
  std::vector<InferenceService> services;
  std::vector<NodeOutage> outages;
  // Running at time 0, before any event (a scenario that starts from a snapshot).
  std::vector<InitialRun> initial_running;
  // Each queue's decayed recent usage at time 0, by QueueId (the fair share's history); empty:
  // none.
  std::vector<double> initial_usage;
};

struct SimOptions {
  Millis horizon = 0;  // stop here; 0: when every job has completed (no services allowed)
  // A change (arrival, completion, node event) triggers a cycle no sooner than min_cycle_interval
  // after the last; while jobs wait, a cycle also runs every cycle_period.
  Millis min_cycle_interval = 1 * kMillisPerSecond;
  Millis cycle_period = 30 * kMillisPerSecond;
  Millis sample_interval = 5 * 60 * kMillisPerSecond;  // time series resolution
  // The window of the services' latency percentiles per window (ServiceMetrics), from time 0.
  Millis latency_window = 3600 * kMillisPerSecond;
  // A cycle that nothing has changed since the last one (no arrival, end, eviction, node or
  // autoscaler event, nor a checkpoint where the loss threshold reads it), before the last plan's
  // stable_until, decides as that plan did: it is skipped (the engine does not run; the time still
  // counts as a cycle for min_cycle_interval, and the usage still accrues). Ends and arrivals that
  // leave every waiting job short of capacity are no change (Plan::capacity), and while that
  // promise holds for every waiting job, neither is the time. A job that waits behind a job of its
  // strict-FIFO queue in every cycle (Engine::StaysBehind) is parked: the engine is not given it
  // until that job starts; and, unless on_cycle is set, a cycle stops once none of the rest of
  // the order can start (EngineOptions::explain_every_job). Decisions are the same either way;
  // off, every cycle runs on every waiting job (`arbiter explain --scenario` sees each).
  bool skip_unchanged_cycles = true;
  // Checks every cycle's plan against what no cycle may decide (CheckPlan: a device given twice,
  // non-preemptible work evicted, a job started beyond its quota); a violation ends the run with
  // an error naming each one and the cycle's time. The tests run with it; `arbiter sim
  // --check-invariants`.
  bool check_invariants = false;
  // Called now and then with the simulated time (for a progress bar).
  std::function<void(Millis now)> progress;
  // Called with every cycle's plan (made at `plan.now`), the pending jobs it was made for
  // (indices of the plan's binds and unplaced entries point into `pending`) and the state it was
  // made on, before the plan is applied: the property tests and `arbiter explain --scenario` read
  // the decisions the run really made. A cycle with no job pending makes no plan and is not seen.
  // With skip_unchanged_cycles, jobs parked behind a job of their strict-FIFO queue
  // (RunResult::jobs_parked) are in neither `pending` nor the plan: each waits behind its head.
  std::function<void(const Plan& plan, std::span<const Job> pending, const ClusterState& state)>
      on_cycle;
};

// Quantiles and means of a set of durations, in seconds.
struct Distribution {
  std::int64_t count = 0;
  double mean = 0;
  double p50 = 0;
  double p95 = 0;
  double p99 = 0;
  double max = 0;
};

// Metrics of a group of jobs: all of them, one queue, one priority class or one workload.
struct GroupMetrics {
  std::int64_t jobs_submitted = 0;
  std::int64_t jobs_completed = 0;
  std::int64_t jobs_pending_at_end = 0;
  std::int64_t jobs_running_at_end = 0;
  Distribution jct;   // completion - submit, completed jobs
  Distribution wait;  // first start - submit, jobs that started
  // Training only: completion - submit, jobs still unfinished counted until the horizon.
  Distribution training_completion;
  double longest_wait_s = 0;  // including jobs still waiting at the end (starvation)
  std::int64_t evictions = 0;
  std::int64_t failures = 0;  // runs ended by a node outage
  double gpu_hours_lost = 0;  // work since the last checkpoint plus restart overhead
  double gpu_hours_allocated = 0;
  double gpu_hours_useful = 0;  // allocated, minus lost work, restarts and waits for victims
  // Queues only: the guarantee (nominal GPUs, all types) and the mean GPUs held.
  double guarantee_gpus = 0;
  double mean_gpus = 0;
  double below_guarantee_hours = 0;  // time with jobs pending while holding < guarantee
};

struct ServiceMetrics {
  std::string name;
  std::string queue;
  double requests = 0;
  double latency_p50_ms = 0;  // over all requests of the run
  double latency_p99_ms = 0;
  // The P99 of the requests of each latency window (SimOptions::latency_window, from time 0; the
  // last one ends at the horizon); NaN for a window without requests. The worst of them (0 when
  // none), and how many exceeded the SLO.
  std::vector<double> latency_p99_by_window_ms;
  double latency_p99_worst_window_ms = 0;
  std::int64_t windows_over_slo = 0;
  Millis latency_window = 0;
  double slo_ms = 0;            // the service's latency objective
  double slo_miss_minutes = 0;  // scale intervals whose P99 exceeded the SLO
  double timeout_fraction = 0;  // requests beyond what the running replicas can serve
  double mean_replicas_wanted = 0;
  double mean_replicas_serving = 0;
};

// One point of the time series (values at `t`, or over the sample interval ending at `t`).
struct Sample {
  Millis t = 0;
  double allocated_gpus = 0;  // mean over the interval
  // Of those, the GPUs at work: not waiting for victims to stop, not restarting or starting up
  // (work later lost to an eviction counts here; the run totals subtract it).
  double busy_gpus = 0;
  double healthy_gpus = 0;
  std::int64_t pending_jobs = 0;
  std::int64_t running_jobs = 0;
  std::vector<double> queue_allocated_gpus;    // by RunResult::queue_names
  std::vector<double> type_allocated_gpus;     // mean over the interval, by RunResult::gpu_types
  std::vector<std::int64_t> queue_pending;     // by RunResult::queue_names
  std::vector<double> service_latency_p99_ms;  // by RunResult::services, worst interval
  std::vector<double> service_replicas;        // serving, by RunResult::services
};

// What happened to one job (for CSV and the JCT distributions of the report).
struct JobRecord {
  JobId id = 0;
  std::string name;
  std::string queue;
  std::string priority_class;
  std::string workload;
  WorkKind kind = WorkKind::kBatch;
  double gpus = 0;
  Millis submit = 0;
  Millis first_start = -1;  // -1: never started
  Millis end = -1;          // completion; -1: not completed
  std::int32_t evictions = 0;
  std::int32_t failures = 0;
  double gpu_hours_lost = 0;
};

struct RunResult {
  std::string name;
  Millis horizon = 0;  // simulated time
  double total_gpus = 0;
  GroupMetrics overall;
  std::map<std::string, GroupMetrics> queues;   // leaf queues
  std::map<std::string, GroupMetrics> classes;  // priority classes
  std::map<std::string, GroupMetrics> workloads;
  std::vector<ServiceMetrics> services;
  double gpu_allocation = 0;             // allocated GPU-time / capacity
  double gpu_utilization = 0;            // useful GPU-time / capacity
  std::vector<std::string> queue_names;  // leaf queues, the order of Sample vectors
  std::vector<std::string> gpu_types;    // GPU models, the order of Sample::type_allocated_gpus
  std::vector<double> gpu_type_totals;   // GPUs of each model in the cluster
  std::vector<Sample> series;
  std::vector<JobRecord> jobs;
  std::int64_t events = 0;
  std::int64_t cycles = 0;          // cycles the engine ran
  std::int64_t cycles_skipped = 0;  // cycles skipped: nothing had changed (skip_unchanged_cycles)
  // Jobs parked on becoming pending: left out of the engine's pending list behind a job of their
  // strict-FIFO queue they wait behind in every cycle (skip_unchanged_cycles, Engine::StaysBehind);
  // and the engine runs again within a cycle whose plan placed the job a chain waited behind.
  std::int64_t jobs_parked = 0;
  std::int64_t cycles_rerun = 0;
  // Cycles that stopped before the end of the order, none of the rest able to start
  // (EngineOptions::explain_every_job false, with skip_unchanged_cycles).
  std::int64_t cycles_stopped_early = 0;
};

// What one job of a simulation is doing at a moment (`arbiter explain --scenario`): its state
// after every event at `at`, and for a job pending then, what the run's next cycle decides for it.
struct JobStatusAt {
  enum class State : std::uint8_t {
    kNotSubmitted,
    kPending,
    kStarting,  // its devices are given; it waits for its victims to stop
    kRunning,
    kDraining,  // evicted: signalled, stops at `until`
    kCompleted,
    kStopped,  // an inference replica the autoscaler stopped
  };
  State state = State::kPending;
  Millis at = 0;
  JobRecord record;   // as of `at`
  Millis since = -1;  // when it entered this state
  // Not submitted: its submit time; starting: when its victims are stopped; running: its expected
  // end (by its work); draining: when it stops; pending and placed by the cycle at `cycle_at`: its
  // start (that cycle's time, or when its last victim has stopped).
  Millis until = -1;
  Millis work = 0;                   // running time it needs in all
  Millis progress = -1;              // running: work done
  Millis checkpointed = -1;          // running: work its last checkpoint kept
  std::vector<std::string> nodes;    // starting, running, or placed: "node[devices]" per task
  std::vector<std::string> victims;  // starting, or placed: the jobs evicted for it
  std::string preemptor;             // draining: the job it was evicted for
  // Pending: the time of the first cycle the run makes at or after `at` (the cycle at `at` itself
  // when one ran then), with the run's own cycle times, eviction budget and caps; -1 when none
  // runs before the horizon or before the job stops pending otherwise (`stopped_at`).
  Millis cycle_at = -1;
  // Pending: when the job stopped pending before that cycle (an inference replica its autoscaler
  // stopped); -1 otherwise.
  Millis stopped_at = -1;
  bool placed = false;           // pending: the cycle at `cycle_at` places it
  std::optional<Reason> reason;  // pending and not placed: that cycle's reason
};

// Runs the simulation up to `at` (the events at `at`, its cycle included), then reports on the
// job named `job`; for a job pending then, the run goes on to its first cycle at or after `at`
// (its cycle at `at`, when it ran one) and reports that cycle's decision for the job. Fails when
// `at` is past the horizon.
Result<JobStatusAt> Inspect(const ClusterSpec& cluster, const EngineOptions& engine,
                            const Workload& workload, const SimOptions& options,
                            const std::string& job, Millis at);

// Runs one configuration over a workload. Fails on a workload that does not fit the cluster's
// names (queue or class ids out of range) or when the engine's plan does not apply.
Result<RunResult> Simulate(const ClusterSpec& cluster, const EngineOptions& engine,
                           const Workload& workload, const SimOptions& options,
                           const std::string& name);

}  // namespace arbiter::sim
