// The discrete-event loop. Events are ordered by (time, kind, sequence), so that everything that
// happens at one instant is applied before the cycle of that instant, and ties break in the order
// the events were made: the same inputs replay the same run. The workload's arrivals, all known at
// the start, wait in one sorted list; the events made as the run goes (ends of runs, cycles,
// samples...) in a binary heap, which stays about as small as the number of running jobs. The loop
// takes the earlier of the two heads: the order is that of a single heap holding both.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <queue>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "arbiter/attained_service.h"
#include "arbiter/engine.h"
#include "core/state/cluster_state.h"
#include "sim/latency.h"
#include "sim/sim.h"

namespace arbiter::sim {
namespace {

constexpr double kMillisPerHour = 3600.0 * kMillisPerSecond;
constexpr Millis kNever = std::numeric_limits<Millis>::max();

// Within one instant: node events, then ends of runs, then arrivals, then the autoscaler, then
// the cycle that sees all of them, then the sample that records the result.
enum class EventKind : std::uint8_t {
  kNodeDown,
  kNodeUp,
  kBusy,  // a run's restart or startup is over: it works from now on
  kFinish,
  kCheckpoint,
  kRequeue,
  kArrival,
  kScale,
  kCycle,
  kSample,
};

struct Event {
  Millis t = 0;
  EventKind kind = EventKind::kCycle;
  std::uint64_t seq = 0;
  std::uint32_t subject = 0;     // run, node, outage or service index
  std::uint32_t generation = 0;  // a run's events are stale once its generation moved on

  bool operator>(const Event& o) const {
    if (t != o.t) return t > o.t;
    if (kind != o.kind) return kind > o.kind;
    return seq > o.seq;
  }
};

enum class Phase : std::uint8_t { kFuture, kPending, kRunning, kDraining, kDone, kStopped };

// A job through its life: pending, running (possibly several times), done.
struct Run {
  // What it runs: a job of the workload, or a replica of a service (Simulation::replicas_). Its
  // job's id is not used: the run's own is.
  const SimJob* spec = nullptr;
  JobId id = 0;
  QueueId queue = 0;          // spec->job.queue, at hand for the accounting of every start and stop
  std::int32_t service = -1;  // the service of an inference replica
  GpuTypeId gpu_type = kNone;  // of its current allocation (per-model allocation)
  // The work it does per millisecond run on that model (ClusterSpec::throughput; 1 without).
  double speed = 1;
  Phase phase = Phase::kFuture;
  std::uint32_t generation = 0;
  double gpus = 0;
  Millis saved = 0;           // progress kept by the last checkpoint
  Millis bound_at = 0;        // when the current run's devices were given
  Millis run_start = 0;       // when it may start (after its victims stop)
  Millis progress_start = 0;  // run_start plus restart overhead or startup
  bool ran_before = false;
  bool busy = false;  // running past its restart or startup (counted in busy GPUs)
  Millis pending_since = 0;
  // Least attained service (Job::attained, starved, service_time), kept across its runs.
  Millis attained = 0;
  Millis starved = 0;
  Millis ran = 0;  // the time it has run, over all its runs (a Gittins order learns job sizes)
  std::vector<Millis> time_on_model;  // Job::time_on_model (Gavel's rounds)
  Millis longest_pending = 0;
  Millis first_start = -1;
  Millis end = -1;
  std::int32_t evictions = 0;
  std::int32_t failures = 0;
  JobId evicted_by = 0;  // the preemptor of the last eviction
  Millis evicted_at = -1;
  Millis stop_at = -1;  // draining: when it stops
  double lost_gpu_ms = 0;
  double allocated_gpu_ms = 0;
  double waste_gpu_ms = 0;  // waiting for victims, restarting
};

// Where a run's progress stands at time t: progress made and the last checkpoint completed.
struct Progress {
  Millis done = 0;
  Millis checkpointed = 0;
  Millis checkpoint_time = -1;  // when the last checkpoint of this run completed; -1: none
};

// Runs are numbered from 0, job ids from 1.
std::uint32_t RunOf(JobId id) { return static_cast<std::uint32_t>(id - 1); }

// A run's time for `work` at its speed, and its work in `time` (a run at speed 1 does a
// millisecond of work per millisecond).
Millis TimeFor(const Run& r, Millis work) {
  return r.speed == 1 ? work : static_cast<Millis>(std::ceil(static_cast<double>(work) / r.speed));
}
Millis WorkIn(const Run& r, Millis time) {
  return r.speed == 1 ? time : static_cast<Millis>(static_cast<double>(time) * r.speed);
}
// The time its remaining work (from its last checkpoint) takes, checkpoints not counted.
Millis RemainingTime(const Run& r) { return TimeFor(r, r.spec->work - r.saved); }

// (A checkpoint interval is time run between checkpoints, whatever the speed.)
Progress ProgressAt(const Run& r, Millis t) {
  Progress p{r.saved, r.saved, -1};
  if (t <= r.progress_start) return p;
  const Millis work_left = r.spec->work - r.saved;
  const Millis remaining = RemainingTime(r);
  const Millis elapsed = t - r.progress_start;
  // The work of `time` run since progress_start: all that is left once the time is.
  auto work = [&](Millis time) {
    return time >= remaining ? work_left : std::min(work_left, WorkIn(r, time));
  };
  const Millis interval = r.spec->job.checkpoint_interval;
  if (interval <= 0 || r.spec->kind != WorkKind::kTraining) {
    p.done = r.saved + work(elapsed);
    return p;
  }
  const Millis period = interval + r.spec->checkpoint_cost;
  const Millis k = elapsed / period;
  const Millis rest = elapsed % period;
  p.done = r.saved + work(k * interval + std::min(rest, interval));
  const Millis full = std::min(k, (remaining - 1) / interval);  // checkpoints before the end
  if (full > 0) {
    p.checkpointed = r.saved + work(full * interval);
    p.checkpoint_time = r.progress_start + full * period;
  }
  return p;
}

// When a run started at progress_start finishes its remaining work.
Millis FinishTime(const Run& r) {
  const Millis remaining = RemainingTime(r);
  if (remaining <= 0) return r.progress_start;
  const Millis interval = r.spec->job.checkpoint_interval;
  Millis checkpoints = 0;
  if (interval > 0 && r.spec->kind == WorkKind::kTraining) checkpoints = (remaining - 1) / interval;
  return r.progress_start + remaining + checkpoints * r.spec->checkpoint_cost;
}

// A piecewise-constant value integrated over time.
struct Integral {
  double value = 0;
  Millis last = 0;
  double area = 0;  // value x ms

  void Set(Millis now, double v) {
    area += value * static_cast<double>(now - last);
    last = now;
    value = v;
  }
  void Add(Millis now, double delta) { Set(now, value + delta); }
  // The area up to `now`, without changing the value.
  double AreaAt(Millis now) const { return area + value * static_cast<double>(now - last); }
};

struct ServiceRun {
  const InferenceService* spec = nullptr;
  std::vector<std::uint32_t> replicas;  // runs alive: pending or running
  std::uint32_t next_replica = 0;
  std::int32_t wanted = 0;
  Millis interval_start = 0;
  double served_ms = 0;  // replica-ms of serving in the current interval by stopped replicas
  std::vector<LatencyInterval> intervals;
  double wanted_ms = 0;   // replica-ms wanted
  double serving_ms = 0;  // replica-ms serving
  double slo_miss_ms = 0;
  double worst_p99_ms = 0;  // since the last sample
  double serving_now = 0;
};

// The engine of a run: with skipping, it reads no job past the point where none of the rest can
// start (EngineOptions::explain_every_job), unless the run's plans are watched (on_cycle).
EngineOptions EngineFor(EngineOptions engine, const SimOptions& options) {
  engine.explain_every_job = !options.skip_unchanged_cycles || options.on_cycle != nullptr;
  return engine;
}

class Simulation {
 public:
  Simulation(ClusterState state, const EngineOptions& engine, const Workload& workload,
             const SimOptions& options)
      : state_(std::move(state)),
        engine_(EngineFor(engine, options)),
        workload_(workload),
        options_(options) {}

  Result<RunResult> Run(const std::string& name);
  // Runs up to `at` and says what the job named `job` is doing then.
  Result<JobStatusAt> Inspect(const std::string& job, Millis at);

 private:
  Status Start();  // the events of the workload
  // Runs events up to `until` (or until `stop_`, or until the run `watch_` stops pending);
  // returns the time reached.
  Result<Millis> Loop(Millis until);
  JobRecord Record(const struct Run& r) const;
  void Push(Millis t, EventKind kind, std::uint32_t subject = 0, std::uint32_t generation = 0) {
    events_.push(Event{t, kind, seq_++, subject, generation});
  }
  void RequestCycle(Millis at) {
    at = std::max(at, last_cycle_ + options_.min_cycle_interval);
    if (next_cycle_ != kNever && next_cycle_ <= at) return;
    next_cycle_ = at;
    Push(at, EventKind::kCycle);
  }
  std::uint32_t AddRun(const SimJob* spec, std::int32_t service);
  void MakePending(std::uint32_t r, Millis now);
  Status Cycle(Millis now);
  void StartRun(std::uint32_t r, Millis now, Millis start_after);
  Status StartInitialRun(const InitialRun& initial);
  // Adds the run's job to the pending list; removes the job at index i, the list's last taking
  // its place (the list's order is not the engine's: the last plan's is kept apart, order_runs_).
  void AddPending(std::uint32_t r, Job job);
  void RemovePending(std::uint32_t i);
  // Drops from the pending list the runs that are no longer pending.
  void CompactPending();
  // Parks the run's job (a copy of it pending since `now`) behind the last job of its queue's
  // chain when the engine says it waits behind it (Engine::StaysBehind); false: it goes to the
  // pending list (and anchors its queue's chain if the queue has none).
  bool Park(std::uint32_t r, Job& job, Millis now);
  // Moves up to `n` parked jobs of the queue into the pending list (the last becomes the anchor).
  void Unpark(QueueId queue, std::size_t n);
  // After jobs left the pending list: a chain whose anchor left moves its first job in.
  void ReanchorChains();
  // The jobs waiting, parked ones included.
  std::int64_t Waiting() const { return static_cast<std::int64_t>(pending_.size()) + parked_; }
  // The node's GPUs in milli-GPU.
  double NodeMilli(NodeId n) const {
    return static_cast<double>(state_.node(n).devices.size()) * kMilliPerGpu;
  }
  // Ends the current run of r at `stop`, keeping progress `saved`. A run that is `requeued`
  // (evicted or failed) loses the progress made by `stop` beyond `saved` and the overhead of its
  // next restart. An evicted run ends at its signal: its devices are the preemptor's from then on.
  void EndRun(std::uint32_t r, Millis stop, Millis saved, bool requeued);
  Status Fail(std::uint32_t r, Millis now);
  Status NodeDown(NodeId node, Millis now);
  Status Scale(std::uint32_t s, Millis now);
  void CloseInterval(ServiceRun& s, Millis now);
  void SetServing(ServiceRun& s, Millis now);
  void TakeSample(Millis now);
  void Release(std::uint32_t r, Millis now);
  RunResult Collect(const std::string& name, Millis end);
  bool Busy() const;

  ClusterState state_;
  Engine engine_;
  const Workload& workload_;
  SimOptions options_;

  std::priority_queue<Event, std::vector<Event>, std::greater<>> events_;
  std::vector<Event> arrivals_;  // the workload's arrivals, in event order
  std::size_t next_arrival_ = 0;
  std::uint64_t seq_ = 0;
  std::vector<struct Run> runs_;
  std::deque<SimJob> replicas_;  // the jobs of the replicas started so far (they do not move)
  std::vector<ServiceRun> services_;
  std::vector<Job> pending_;
  std::vector<std::uint32_t> pending_runs_;  // parallel to pending_
  // Each run's index in the pending list (kNoRun: not in it).
  std::vector<std::uint32_t> index_of_run_;
  // The last plan's order (Plan::order), as runs, and the next cycle's hint made of it: the next
  // cycle then merges the jobs that arrived since into it, without a sort.
  std::vector<std::uint32_t> order_runs_;
  std::vector<std::uint32_t> order_hint_;
  // Parked jobs (skip_unchanged_cycles): per strict-FIFO queue, the jobs that wait behind the
  // queue's anchor (a run of the pending list) in every cycle that leaves the anchor unplaced
  // (Engine::StaysBehind), in order, each behind the one before. The engine is not given them: a
  // cycle that places an anchor runs again with the next of its chain moved in, so that every
  // plan is the one of the whole list less their entries (each "waits behind its queue's head").
  struct Parked {
    Job job;
    std::uint32_t run = 0;
  };
  struct Chain {
    std::uint32_t anchor = kNoRun;  // a run of the pending list, kNoRun: none
    Job anchor_job;                 // its job
    std::deque<Parked> parked;
  };
  static constexpr std::uint32_t kNoRun = std::numeric_limits<std::uint32_t>::max();
  std::vector<Chain> chains_;    // by queue
  std::int64_t parked_ = 0;      // jobs parked in all chains
  std::int64_t running_ = 0;     // runs bound or draining
  std::int64_t future_ = 0;      // arrivals and requeues still to come
  std::int64_t nodes_down_ = 0;  // outages still to end
  Millis last_cycle_ = std::numeric_limits<Millis>::min() / 2;
  Millis next_cycle_ = kNever;
  Millis last_sample_ = 0;
  bool changed_ = false;     // something happened since the last cycle
  Millis stable_until_ = 0;  // the last plan's stable_until
  // The last plan's capacity promise, with the needs of the jobs that arrived since: while
  // nothing changed, it holds.
  CapacityHold capacity_;
  // Inspect: the loop stops after the event that set `stop_`, or once the run `watch_` (an index
  // of runs_) is no longer pending.
  bool stop_ = false;
  std::uint32_t watch_ = std::numeric_limits<std::uint32_t>::max();

  Integral allocated_;  // milli-GPU held
  Integral busy_;       // milli-GPU held by runs past their restart or startup
  Integral healthy_;    // milli-GPU on healthy nodes
  std::vector<Integral> queue_allocated_;
  std::vector<double> sample_queue_area_;
  std::vector<Integral> type_allocated_;  // milli-GPU held, by GPU type
  std::vector<double> sample_type_area_;
  double sample_allocated_area_ = 0;
  double sample_busy_area_ = 0;
  double sample_healthy_area_ = 0;
  std::vector<double> below_guarantee_ms_;
  std::vector<double> guarantee_;  // milli-GPU per queue
  std::vector<struct Sample> series_;
  std::int64_t events_done_ = 0;
  std::int64_t cycles_ = 0;
  std::int64_t cycles_skipped_ = 0;
  std::int64_t jobs_parked_ = 0;
  std::int64_t cycles_rerun_ = 0;
  std::int64_t cycles_stopped_early_ = 0;
};

std::uint32_t Simulation::AddRun(const SimJob* spec, std::int32_t service) {
  const auto index = static_cast<std::uint32_t>(runs_.size());
  struct Run r;
  r.spec = spec;
  r.id = index + 1;
  r.queue = spec->job.queue;
  r.service = service;
  r.gpus = static_cast<double>(r.spec->job.total_gpu().value()) / kMilliPerGpu;
  runs_.push_back(std::move(r));
  return index;
}

void Simulation::MakePending(std::uint32_t r, Millis now) {
  struct Run& run = runs_[r];
  run.phase = Phase::kPending;
  run.pending_since = now;
  Job job = run.spec->job;
  job.id = run.id;
  job.attained = run.attained;
  job.starved = run.starved;
  job.service_time = now;
  job.time_on_model = run.time_on_model;
  // A parked job changes no plan (it is not in the engine's pending list); the cycles keep their
  // times all the same.
  if (Park(r, job, now)) {
    RequestCycle(now);
    return;
  }
  AddPending(r, std::move(job));
  // A job short of capacity, or behind a blocked head, changes nothing until capacity frees
  // (Plan::capacity), unless it may evict.
  if (!engine_.ArrivalChangesNothing(capacity_, state_, pending_.back(), now)) changed_ = true;
  RequestCycle(now);
}

bool Simulation::Park(std::uint32_t r, Job& job, Millis now) {
  if (!options_.skip_unchanged_cycles || job.queue >= state_.queue_count() ||
      !state_.queue(job.queue).spec.strict_fifo)
    return false;
  if (chains_.size() < state_.queue_count()) chains_.resize(state_.queue_count());
  Chain& chain = chains_[job.queue];
  if (chain.anchor == kNoRun) {
    chain.anchor = r;
    chain.anchor_job = job;
    return false;
  }
  const Job& last = chain.parked.empty() ? chain.anchor_job : chain.parked.back().job;
  if (!engine_.StaysBehind(state_, last, job, now)) return false;
  chain.parked.push_back({std::move(job), r});
  ++parked_;
  ++jobs_parked_;
  return true;
}

void Simulation::Unpark(QueueId queue, std::size_t n) {
  Chain& chain = chains_[queue];
  for (; n > 0 && !chain.parked.empty(); --n) {
    Parked& p = chain.parked.front();
    chain.anchor = p.run;
    chain.anchor_job = p.job;
    AddPending(p.run, std::move(p.job));
    chain.parked.pop_front();
    --parked_;
    changed_ = true;
  }
}

void Simulation::ReanchorChains() {
  for (QueueId q = 0; q < chains_.size(); ++q) {
    Chain& chain = chains_[q];
    if (chain.anchor == kNoRun || runs_[chain.anchor].phase == Phase::kPending) continue;
    chain.anchor = kNoRun;
    Unpark(q, 1);
  }
}

void Simulation::AddPending(std::uint32_t r, Job job) {
  if (index_of_run_.size() < runs_.size()) index_of_run_.resize(runs_.size(), kNoRun);
  index_of_run_[r] = static_cast<std::uint32_t>(pending_.size());
  pending_.push_back(std::move(job));
  pending_runs_.push_back(r);
}

void Simulation::RemovePending(std::uint32_t i) {
  index_of_run_[pending_runs_[i]] = kNoRun;
  if (i + 1 != pending_.size()) {
    pending_[i] = std::move(pending_.back());
    pending_runs_[i] = pending_runs_.back();
    index_of_run_[pending_runs_[i]] = i;
  }
  pending_.pop_back();
  pending_runs_.pop_back();
}

void Simulation::CompactPending() {
  for (std::size_t i = pending_.size(); i-- > 0;) {
    if (runs_[pending_runs_[i]].phase != Phase::kPending)
      RemovePending(static_cast<std::uint32_t>(i));
  }
}

void Simulation::StartRun(std::uint32_t r, Millis now, Millis start_after) {
  struct Run& run = runs_[r];
  run.phase = Phase::kRunning;
  ++run.generation;
  ++running_;
  run.longest_pending = std::max(run.longest_pending, now - run.pending_since);
  run.bound_at = now;
  run.run_start = std::max(now, start_after);
  Millis setup = 0;
  if (run.spec->kind == WorkKind::kInference) {
    // A replica started at time 0 serves at once: its service was up before the simulated time.
    if (run.run_start > 0) setup = workload_.services[run.service].startup;
  } else if (run.ran_before) {
    setup = run.spec->job.restart_overhead;
  }
  run.progress_start = run.run_start + setup;
  if (!run.ran_before) run.first_start = run.run_start;  // (a run at time 0 started before it)
  run.ran_before = true;
  const double milli = run.gpus * kMilliPerGpu;
  allocated_.Add(now, milli);
  queue_allocated_[run.queue].Add(now, milli);
  if (run.gpu_type != kNone) type_allocated_[run.gpu_type].Add(now, milli);
  if (run.progress_start <= now) {
    busy_.Add(now, milli);
    run.busy = true;
  } else {
    Push(run.progress_start, EventKind::kBusy, r, run.generation);
  }
  if (run.spec->kind != WorkKind::kInference) {
    Push(FinishTime(run), EventKind::kFinish, r, run.generation);
    if (run.spec->kind == WorkKind::kTraining && run.spec->job.checkpoint_interval > 0 &&
        RemainingTime(run) > run.spec->job.checkpoint_interval) {
      const Millis first =
          run.progress_start + run.spec->job.checkpoint_interval + run.spec->checkpoint_cost;
      Push(first, EventKind::kCheckpoint, r, run.generation);
    }
  }
}

// A job running at time 0 (Workload::initial_running): bound through the state's Bind as started
// at its start time; its progress runs from its last checkpoint (its start without one), when the
// progress before it was saved.
Status Simulation::StartInitialRun(const InitialRun& initial) {
  const std::uint32_t r = AddRun(&initial.job, -1);
  struct Run& run = runs_[r];
  Job job = initial.job.job;
  job.id = run.id;
  if (!initial.job.evictions.empty()) state_.RestoreEvictions(run.id, initial.job.evictions);
  if (Status st = state_.Bind(std::move(job), initial.allocation, initial.start_time); !st.ok())
    return Status::InvalidArgument("running job " + initial.job.job.name + ": " + st.message());
  const bool checkpoints =
      initial.job.kind == WorkKind::kTraining && initial.job.job.checkpoint_interval > 0;
  Millis resumed = initial.start_time;
  if (initial.last_checkpoint && *initial.last_checkpoint > initial.start_time) {
    if (Status st = state_.RecordCheckpoint(run.id, *initial.last_checkpoint); !st.ok()) return st;
    if (checkpoints) resumed = std::min<Millis>(*initial.last_checkpoint, 0);
  }
  run.phase = Phase::kRunning;
  ++run.generation;
  ++running_;
  run.ran_before = true;
  run.first_start = initial.start_time;
  run.longest_pending = std::max<Millis>(0, initial.start_time - initial.job.job.submit_time);
  run.bound_at = 0;
  run.run_start = std::max<Millis>(0, initial.start_time);  // a preemptor may wait for its victims
  run.gpu_type = initial.allocation.gpu_type;
  run.speed = state_.Throughput(run.spec->job, run.gpu_type);
  run.saved = std::clamp<Millis>(WorkIn(run, resumed - initial.start_time), 0,
                                 std::max<Millis>(0, run.spec->work - 1));
  run.progress_start = resumed;
  const double milli = run.gpus * kMilliPerGpu;
  allocated_.Add(0, milli);
  queue_allocated_[run.queue].Add(0, milli);
  if (run.gpu_type != kNone) type_allocated_[run.gpu_type].Add(0, milli);
  if (run.progress_start <= 0) {
    busy_.Add(0, milli);
    run.busy = true;
  } else {
    Push(run.progress_start, EventKind::kBusy, r, run.generation);
  }
  const Millis finish = FinishTime(run);
  Push(std::max<Millis>(0, finish), EventKind::kFinish, r, run.generation);
  if (checkpoints && RemainingTime(run) > run.spec->job.checkpoint_interval) {
    const Millis period = run.spec->job.checkpoint_interval + run.spec->checkpoint_cost;
    Millis next = run.progress_start + period;
    if (next < 0) next += (-next + period - 1) / period * period;  // the first due from 0 on
    if (next < finish) Push(next, EventKind::kCheckpoint, r, run.generation);
  }
  return Status::Ok();
}

// Gives back a run's devices in the accounting (the state is changed by the caller).
void Simulation::Release(std::uint32_t r, Millis now) {
  struct Run& run = runs_[r];
  const double milli = run.gpus * kMilliPerGpu;
  allocated_.Add(now, -milli);
  queue_allocated_[run.queue].Add(now, -milli);
  if (run.gpu_type != kNone) type_allocated_[run.gpu_type].Add(now, -milli);
  if (run.busy) busy_.Add(now, -milli);
  run.busy = false;
  run.allocated_gpu_ms += run.gpus * static_cast<double>(now - run.bound_at);
  run.waste_gpu_ms += run.gpus * static_cast<double>(std::min(now, run.run_start) - run.bound_at);
  --running_;
}

void Simulation::EndRun(std::uint32_t r, Millis stop, Millis saved, bool requeued) {
  struct Run& run = runs_[r];
  if (run.service >= 0) {
    ServiceRun& s = services_[run.service];
    const Millis from = std::max(run.progress_start, s.interval_start);
    if (stop > from) s.served_ms += static_cast<double>(stop - from);
  }
  const Progress p = ProgressAt(run, stop);
  run.ran += std::max<Millis>(0, stop - run.run_start);
  AddTimeOnModel(run.time_on_model, run.gpu_type, stop - run.run_start);
  if (requeued) {
    run.attained +=
        ServiceOfRun(state_, run.spec->job, run.gpu_type, std::max<Millis>(0, stop - run.run_start),
                     engine_.options().ordering);
  }
  if (requeued && run.spec->kind != WorkKind::kInference) {
    // The time of the work since the checkpoint kept, and the overhead the restart will take.
    run.lost_gpu_ms +=
        run.gpus * static_cast<double>(TimeFor(run, std::max<Millis>(0, p.done - saved)) +
                                       run.spec->job.restart_overhead);
  }
  run.saved = saved;
  ++run.generation;
}

Status Simulation::Fail(std::uint32_t r, Millis now) {
  struct Run& run = runs_[r];
  const Progress p = ProgressAt(run, now);
  if (Status st = state_.Unbind(run.id, now); !st.ok()) return st;
  Release(r, now);
  EndRun(r, now, run.spec->kind == WorkKind::kBatch ? 0 : p.checkpointed, true);
  ++run.failures;
  if (run.service >= 0) SetServing(services_[run.service], now);
  MakePending(r, now);
  return Status::Ok();
}

Status Simulation::NodeDown(NodeId node, Millis now) {
  if (Status st = state_.SetHealthy(node, false); !st.ok()) return st;
  std::vector<std::uint32_t> victims;
  for (const Resident& res : state_.node(node).residents) victims.push_back(RunOf(res.job->job.id));
  std::sort(victims.begin(), victims.end());
  for (std::uint32_t r : victims) {
    if (Status st = Fail(r, now); !st.ok()) return st;
  }
  return Status::Ok();
}

void Simulation::SetServing(ServiceRun& s, Millis now) {
  double serving = 0;
  for (std::uint32_t r : s.replicas) {
    const struct Run& run = runs_[r];
    if (run.phase == Phase::kRunning && run.progress_start <= now) serving += 1;
  }
  s.serving_now = serving;
}

// Closes the service's current scale interval at `now`: its latency follows from the request
// rate at the interval's middle and the replicas that served on average.
void Simulation::CloseInterval(ServiceRun& s, Millis now) {
  const Millis length = now - s.interval_start;
  if (length <= 0) return;
  double served = s.served_ms;
  for (std::uint32_t r : s.replicas) {
    const struct Run& run = runs_[r];
    if (run.phase != Phase::kRunning) continue;
    const Millis from = std::max(run.progress_start, s.interval_start);
    if (now > from) served += static_cast<double>(now - from);
  }
  const double replicas = served / static_cast<double>(length);
  const double rate = s.spec->rate.At(s.interval_start + length / 2);
  LatencyInterval interval = MakeInterval(rate, s.spec->replica_rate, replicas,
                                          static_cast<double>(length) / kMillisPerSecond,
                                          static_cast<double>(s.spec->timeout));
  interval.start_ms = s.interval_start;
  interval.end_ms = now;
  const double p99 = IntervalQuantile(interval, 0.99, static_cast<double>(s.spec->timeout));
  if (p99 > static_cast<double>(s.spec->slo)) s.slo_miss_ms += static_cast<double>(length);
  s.worst_p99_ms = std::max(s.worst_p99_ms, p99);
  s.intervals.push_back(interval);
  s.serving_ms += served;
  s.wanted_ms += static_cast<double>(s.wanted) * static_cast<double>(length);
  s.served_ms = 0;
  s.interval_start = now;
}

Status Simulation::Scale(std::uint32_t index, Millis now) {
  ServiceRun& s = services_[index];
  CloseInterval(s, now);
  const InferenceService& spec = *s.spec;
  const double rate = spec.rate.At(now);
  const double per_replica = spec.replica_rate * spec.target_utilization;
  auto wanted = static_cast<std::int64_t>(std::ceil(rate / per_replica - 1e-9));
  wanted = std::clamp<std::int64_t>(wanted, spec.min_replicas, spec.max_replicas);
  s.wanted = static_cast<std::int32_t>(wanted);
  auto alive = static_cast<std::int64_t>(s.replicas.size());
  while (alive < wanted) {
    SimJob job;
    job.job = spec.replica;
    job.job.name = spec.name + "-" + std::to_string(s.next_replica++);
    job.job.submit_time = now;
    job.kind = WorkKind::kInference;
    job.workload = spec.name;
    job.work = kNever / 4;
    replicas_.push_back(std::move(job));
    const std::uint32_t r = AddRun(&replicas_.back(), static_cast<std::int32_t>(index));
    services_[index].replicas.push_back(r);
    MakePending(r, now);
    ++alive;
  }
  if (alive > wanted) {
    // Scale down: pending replicas first, then the ones that started last.
    std::vector<std::uint32_t> order = s.replicas;
    std::stable_sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
      const bool pa = runs_[a].phase == Phase::kPending;
      const bool pb = runs_[b].phase == Phase::kPending;
      if (pa != pb) return pa;
      return runs_[a].run_start > runs_[b].run_start;
    });
    std::vector<std::uint32_t> stop(order.begin(), order.begin() + (alive - wanted));
    std::vector<std::uint32_t> stopped_pending;
    for (std::uint32_t r : stop) {
      struct Run& run = runs_[r];
      if (run.phase == Phase::kPending) {
        stopped_pending.push_back(r);
      } else if (run.phase == Phase::kDraining) {
        --running_;  // its requeue is dropped
      } else {
        if (Status st = state_.Unbind(run.id, now); !st.ok()) return st;
        Release(r, now);
        EndRun(r, now, 0, false);
      }
      run.longest_pending =
          std::max(run.longest_pending, run.phase == Phase::kPending ? now - run.pending_since : 0);
      run.phase = Phase::kStopped;
      run.end = now;
    }
    if (!stopped_pending.empty()) {
      CompactPending();
      // A parked replica stopped leaves its chain (the others still wait behind the one before).
      for (Chain& chain : chains_) {
        const std::size_t before = chain.parked.size();
        std::erase_if(chain.parked,
                      [&](const Parked& p) { return runs_[p.run].phase != Phase::kPending; });
        parked_ -= static_cast<std::int64_t>(before - chain.parked.size());
      }
      ReanchorChains();
    }
    std::erase_if(s.replicas, [&](std::uint32_t r) { return runs_[r].phase == Phase::kStopped; });
    changed_ = true;
    RequestCycle(now);
  }
  SetServing(s, now);
  Push(now + spec.scale_interval, EventKind::kScale, index);
  return Status::Ok();
}

Status Simulation::Cycle(Millis now) {
  last_cycle_ = now;
  next_cycle_ = kNever;
  const bool unchanged = !changed_;
  changed_ = false;
  if (pending_.empty()) {
    ++cycles_;
    capacity_ = {};
    return Status::Ok();
  }
  state_.AccrueUsage(now);
  // (While no waiting job's need is met, the time changes nothing either, unless it may reorder
  // the jobs behind a blocked head: Plan::capacity.)
  if (options_.skip_unchanged_cycles && unchanged &&
      (now < stable_until_ ||
       (capacity_.timeless && capacity_.Holds(state_.FreeGpuMilli(), state_.MaxNodeFreeGpus())))) {
    ++cycles_skipped_;
    RequestCycle(now + options_.cycle_period);
    return Status::Ok();
  }
  ++cycles_;
  order_hint_.clear();
  for (std::uint32_t r : order_runs_) {
    if (r < index_of_run_.size() && index_of_run_[r] != kNoRun)
      order_hint_.push_back(index_of_run_[r]);
  }
  Plan plan = engine_.Schedule(state_, pending_, now, order_hint_);
  // A plan that places the anchor of a chain is not the whole list's: its parked jobs might have
  // been placed after it. Again with more of them moved in, until every anchor waits.
  for (std::size_t more = 1; parked_ > 0; more *= 2) {
    bool again = false;
    for (const Bind& b : plan.binds) {
      const std::uint32_t r = pending_runs_[b.pending_index];
      const QueueId q = runs_[r].queue;
      if (q < chains_.size() && chains_[q].anchor == r && !chains_[q].parked.empty()) {
        Unpark(q, more);
        again = true;
      }
    }
    if (!again) break;
    ++cycles_rerun_;
    plan = engine_.Schedule(state_, pending_, now, order_hint_);
  }
  stable_until_ = plan.stable_until;
  capacity_ = plan.capacity;
  if (plan.unexplained > 0) ++cycles_stopped_early_;
  if (options_.on_cycle) options_.on_cycle(plan, pending_, state_);
  if (options_.check_invariants) {
    if (Status st = CheckPlan(state_, pending_, plan); !st.ok()) return st;
  }
  for (const Eviction& e : plan.evictions) {
    const std::uint32_t r = RunOf(e.job);
    struct Run& run = runs_[r];
    // A victim that can save a checkpoint within its grace period does so on the signal;
    // otherwise it keeps the last checkpoint it completed before it is stopped.
    const Progress at_signal = ProgressAt(run, e.signal_at);
    const Progress at_stop = ProgressAt(run, e.stop_at);
    Millis saved = at_stop.checkpointed;
    if (run.spec->kind == WorkKind::kTraining && run.spec->job.checkpoint_interval > 0 &&
        run.spec->checkpoint_cost <= e.stop_at - e.signal_at && e.signal_at >= run.progress_start) {
      saved = std::max(saved, at_signal.done);
    }
    if (run.spec->kind == WorkKind::kBatch) saved = 0;
    Release(r, now);
    EndRun(r, e.signal_at, saved, true);
    ++run.evictions;
    run.evicted_by = e.preemptor;
    run.evicted_at = e.signal_at;
    run.stop_at = e.stop_at;
    run.phase = Phase::kDraining;
    ++running_;  // draining until stop_at
    ++future_;
    Push(e.stop_at, EventKind::kRequeue, r, run.generation);
    if (run.service >= 0) SetServing(services_[run.service], now);
  }
  const bool bound = !plan.binds.empty();
  order_runs_.clear();
  for (std::uint32_t i : plan.order) order_runs_.push_back(pending_runs_[i]);
  // The pending indices of the jobs bound, last first (each removal moves the list's last job).
  std::vector<std::uint32_t> bound_at;
  bound_at.reserve(plan.binds.size());
  for (const Bind& b : plan.binds) bound_at.push_back(b.pending_index);
  std::sort(bound_at.begin(), bound_at.end(), std::greater<>());
  for (const Bind& b : plan.binds) {
    // The service a least-attained-service order counts from this start on (a starvation
    // promotion applied), at the time it starts to run, as the server does: the engine adds the
    // running time itself.
    Job& job = pending_[b.pending_index];
    BeginService(job, std::max(now, b.start_after), engine_.options().ordering);
    runs_[pending_runs_[b.pending_index]].attained = job.attained;
    runs_[pending_runs_[b.pending_index]].starved = job.starved;
    runs_[pending_runs_[b.pending_index]].gpu_type = b.allocation.gpu_type;
    runs_[pending_runs_[b.pending_index]].speed = state_.Throughput(job, b.allocation.gpu_type);
    StartRun(pending_runs_[b.pending_index], now, b.start_after);
  }
  // The jobs bound and their allocations move to the state; the pending list drops the jobs next.
  if (Status st = state_.Apply(std::move(plan), pending_); !st.ok()) return st;
  for (std::uint32_t i : bound_at) RemovePending(i);
  if (bound) {
    ReanchorChains();
    for (ServiceRun& s : services_) SetServing(s, now);
  }
  if (!pending_.empty()) RequestCycle(now + options_.cycle_period);
  return Status::Ok();
}

void Simulation::TakeSample(Millis now) {
  const Millis length = now - last_sample_;
  if (length <= 0) return;
  struct Sample s;
  s.t = now;
  const double area = allocated_.AreaAt(now);
  const double healthy = healthy_.AreaAt(now);
  s.allocated_gpus = (area - sample_allocated_area_) / static_cast<double>(length) / kMilliPerGpu;
  const double busy = busy_.AreaAt(now);
  s.busy_gpus = (busy - sample_busy_area_) / static_cast<double>(length) / kMilliPerGpu;
  sample_busy_area_ = busy;
  s.healthy_gpus = (healthy - sample_healthy_area_) / static_cast<double>(length) / kMilliPerGpu;
  sample_allocated_area_ = area;
  sample_healthy_area_ = healthy;
  s.pending_jobs = Waiting();
  s.running_jobs = static_cast<std::int64_t>(state_.running().size());
  const std::size_t queues = queue_allocated_.size();
  std::vector<std::int64_t> pending_by_queue(queues, 0);
  for (const Job& j : pending_) ++pending_by_queue[j.queue];
  for (QueueId q = 0; q < chains_.size(); ++q)
    pending_by_queue[q] += static_cast<std::int64_t>(chains_[q].parked.size());
  for (QueueId q = 0; q < queues; ++q) {
    if (!state_.queue(q).children.empty()) continue;
    const double qa = queue_allocated_[q].AreaAt(now);
    const double mean = (qa - sample_queue_area_[q]) / static_cast<double>(length);
    sample_queue_area_[q] = qa;
    s.queue_allocated_gpus.push_back(mean / kMilliPerGpu);
    s.queue_pending.push_back(pending_by_queue[q]);
    if (pending_by_queue[q] > 0 && mean < guarantee_[q]) {
      below_guarantee_ms_[q] += static_cast<double>(length);
    }
  }
  for (std::size_t t = 0; t < type_allocated_.size(); ++t) {
    const double ta = type_allocated_[t].AreaAt(now);
    s.type_allocated_gpus.push_back((ta - sample_type_area_[t]) / static_cast<double>(length) /
                                    kMilliPerGpu);
    sample_type_area_[t] = ta;
  }
  for (ServiceRun& sr : services_) {
    s.service_latency_p99_ms.push_back(sr.worst_p99_ms);
    s.service_replicas.push_back(sr.serving_now);
    sr.worst_p99_ms = 0;
  }
  series_.push_back(std::move(s));
  last_sample_ = now;
}

// Whether anything may still happen to the jobs: a node coming back matters only to jobs that
// wait, and a node going down to none once nothing runs.
bool Simulation::Busy() const {
  return running_ > 0 || future_ > 0 || (nodes_down_ > 0 && !pending_.empty());
}

Result<RunResult> Simulation::Run(const std::string& name) {
  if (Status st = Start(); !st.ok()) return st;
  Result<Millis> now = Loop(options_.horizon > 0 ? options_.horizon : kNever);
  if (!now.ok()) return now.status();
  const Millis end = options_.horizon > 0 ? options_.horizon : *now;
  for (ServiceRun& s : services_) CloseInterval(s, end);
  if (options_.sample_interval > 0 && end > last_sample_) TakeSample(end);
  return Collect(name, end);
}

Status Simulation::Start() {
  const std::size_t queues = state_.queue_count();
  queue_allocated_.assign(queues, Integral{});
  sample_queue_area_.assign(queues, 0);
  type_allocated_.assign(state_.gpu_type_count(), Integral{});
  sample_type_area_.assign(state_.gpu_type_count(), 0);
  below_guarantee_ms_.assign(queues, 0);
  guarantee_.assign(queues, 0);
  for (QueueId q = 0; q < queues; ++q) {
    guarantee_[q] = static_cast<double>(state_.quota_tree().Guarantee(q));
  }
  double total_milli = 0;
  for (NodeId n = 0; n < state_.node_count(); ++n) total_milli += NodeMilli(n);
  healthy_.Set(0, total_milli);

  runs_.reserve(workload_.jobs.size());
  arrivals_.reserve(workload_.jobs.size());
  for (const SimJob& job : workload_.jobs) {
    if (job.job.queue >= queues) {
      return Status::InvalidArgument("job " + job.job.name + ": unknown queue id", "queue");
    }
    if (job.job.priority_class >= state_.priority_class_count()) {
      return Status::InvalidArgument("job " + job.job.name + ": unknown priority class id",
                                     "priority_class");
    }
    const std::uint32_t r = AddRun(&job, -1);
    ++future_;
    if (!job.evictions.empty()) state_.RestoreEvictions(runs_[r].id, job.evictions);
    arrivals_.push_back(
        Event{std::max<Millis>(0, job.job.submit_time), EventKind::kArrival, seq_++, r, 0});
  }
  for (const InitialRun& initial : workload_.initial_running) {
    if (Status st = StartInitialRun(initial); !st.ok()) return st;
  }
  for (QueueId q = 0; q < workload_.initial_usage.size() && q < queues; ++q)
    state_.RestoreRecentUsage(q, workload_.initial_usage[q], 0);
  // Every event has its own sequence number: the order is total. Workloads usually list their
  // jobs by submit time, and their arrivals are then in order already.
  auto earlier = [](const Event& a, const Event& b) { return b > a; };
  if (!std::is_sorted(arrivals_.begin(), arrivals_.end(), earlier))
    std::sort(arrivals_.begin(), arrivals_.end(), earlier);
  services_.resize(workload_.services.size());
  for (std::uint32_t s = 0; s < workload_.services.size(); ++s) {
    services_[s].spec = &workload_.services[s];
    Push(0, EventKind::kScale, s);
  }
  if (!services_.empty() && options_.horizon <= 0) {
    return Status::InvalidArgument("a workload with inference services needs a horizon", "horizon");
  }
  for (std::uint32_t o = 0; o < workload_.outages.size(); ++o) {
    const NodeOutage& outage = workload_.outages[o];
    if (outage.node >= state_.node_count()) {
      return Status::InvalidArgument("outage of an unknown node", "outages");
    }
    Push(outage.at, EventKind::kNodeDown, o);
  }
  if (options_.sample_interval > 0) Push(options_.sample_interval, EventKind::kSample);
  return Status::Ok();
}

Result<Millis> Simulation::Loop(Millis until) {
  Millis now = 0;
  Millis last_progress = 0;
  while (true) {
    // The earlier of the next arrival and the heap's first event.
    const bool arrival = next_arrival_ < arrivals_.size() &&
                         (events_.empty() || events_.top() > arrivals_[next_arrival_]);
    if (!arrival && events_.empty()) break;
    const Event e = arrival ? arrivals_[next_arrival_] : events_.top();
    if (e.t > until) break;
    if (arrival) {
      ++next_arrival_;
    } else {
      events_.pop();
    }
    now = e.t;
    ++events_done_;
    switch (e.kind) {
      case EventKind::kArrival:
        --future_;
        MakePending(e.subject, now);
        break;
      case EventKind::kRequeue: {
        --future_;
        struct Run& run = runs_[e.subject];
        if (run.generation != e.generation || run.phase != Phase::kDraining) break;
        --running_;
        MakePending(e.subject, now);
        break;
      }
      case EventKind::kBusy: {
        struct Run& run = runs_[e.subject];
        if (run.generation != e.generation || run.phase != Phase::kRunning || run.busy) break;
        busy_.Add(now, run.gpus * kMilliPerGpu);
        run.busy = true;
        break;
      }
      case EventKind::kFinish: {
        struct Run& run = runs_[e.subject];
        if (run.generation != e.generation || run.phase != Phase::kRunning) break;
        if (Status st = state_.Unbind(run.id, now); !st.ok()) return st;
        Release(e.subject, now);
        run.saved = run.spec->work;
        run.phase = Phase::kDone;
        run.end = now;
        run.ran += std::max<Millis>(0, now - run.run_start);
        RecordCompletion(state_, engine_.options().ordering, run.ran,
                         run.spec->job.total_gpu().value());
        // (What it frees matters only once it meets a waiting job's need: Plan::capacity.)
        if (!capacity_.Holds(state_.FreeGpuMilli(), state_.MaxNodeFreeGpus())) changed_ = true;
        RequestCycle(now);
        break;
      }
      case EventKind::kCheckpoint: {
        struct Run& run = runs_[e.subject];
        if (run.generation != e.generation || run.phase != Phase::kRunning) break;
        if (Status st = state_.RecordCheckpoint(run.id, now); !st.ok()) return st;
        // Less work to lose: a victim the loss threshold refused may be taken now.
        if (engine_.options().preemption.enabled &&
            engine_.options().preemption.max_loss_per_gpu >= 0)
          changed_ = true;
        const Millis next = now + run.spec->job.checkpoint_interval + run.spec->checkpoint_cost;
        if (next < FinishTime(run)) Push(next, EventKind::kCheckpoint, e.subject, e.generation);
        break;
      }
      case EventKind::kNodeDown: {
        const NodeOutage& outage = workload_.outages[e.subject];
        if (state_.node(outage.node).healthy) healthy_.Add(now, -NodeMilli(outage.node));
        if (Status st = NodeDown(outage.node, now); !st.ok()) return st;
        ++nodes_down_;
        Push(now + outage.duration, EventKind::kNodeUp, e.subject);
        changed_ = true;
        RequestCycle(now);
        break;
      }
      case EventKind::kNodeUp: {
        --nodes_down_;
        const NodeOutage& outage = workload_.outages[e.subject];
        // Overlapping outages of one node: it comes back when the last one ends.
        bool still_down = false;
        for (const NodeOutage& o : workload_.outages) {
          if (&o != &outage && o.node == outage.node && o.at <= now && now < o.at + o.duration) {
            still_down = true;
          }
        }
        if (still_down || state_.node(outage.node).healthy) break;
        healthy_.Add(now, NodeMilli(outage.node));
        if (Status st = state_.SetHealthy(outage.node, true); !st.ok()) return st;
        changed_ = true;
        RequestCycle(now);
        break;
      }
      case EventKind::kScale:
        if (Status st = Scale(e.subject, now); !st.ok()) return st;
        break;
      case EventKind::kCycle:
        if (now != next_cycle_) break;
        if (Status st = Cycle(now); !st.ok()) return st;
        break;
      case EventKind::kSample:
        TakeSample(now);
        if (options_.horizon > 0 || Busy() || !pending_.empty()) {
          Push(now + options_.sample_interval, EventKind::kSample);
        }
        break;
    }
    if (options_.progress && now - last_progress >= 3600 * kMillisPerSecond) {
      options_.progress(now);
      last_progress = now;
    }
    // Without a horizon the run ends when nothing runs and nothing more will arrive: what is
    // still pending then can never start.
    if (options_.horizon <= 0 && !Busy() && services_.empty() && next_cycle_ == kNever) break;
    if (options_.horizon <= 0 && !Busy() && !changed_ && e.kind == EventKind::kCycle) break;
    if (stop_ || (watch_ < runs_.size() && runs_[watch_].phase != Phase::kPending)) break;
  }
  return now;
}

JobRecord Simulation::Record(const struct Run& r) const {
  JobRecord rec;
  rec.id = r.id;
  rec.name = r.spec->job.name;
  rec.queue = state_.queue(r.spec->job.queue).spec.name;
  rec.priority_class = state_.priority_class(r.spec->job.priority_class).name;
  rec.workload = r.spec->workload;
  rec.kind = r.spec->kind;
  rec.gpus = r.gpus;
  rec.submit = r.spec->job.submit_time;
  rec.first_start = r.first_start;
  rec.end = r.phase == Phase::kDone ? r.end : -1;
  rec.evictions = r.evictions;
  rec.failures = r.failures;
  rec.gpu_hours_lost = r.lost_gpu_ms / kMillisPerHour;
  return rec;
}

std::vector<std::string> DescribeAllocation(const ClusterState& state, const Allocation& a) {
  std::vector<std::string> out;
  for (const TaskAllocation& t : a.tasks) out.push_back(state.Describe(t));
  return out;
}

Result<JobStatusAt> Simulation::Inspect(const std::string& job, Millis at) {
  std::uint32_t index = 0;
  for (; index < workload_.jobs.size(); ++index) {
    if (workload_.jobs[index].job.name == job) break;
  }
  if (Status st = Start(); !st.ok()) return st;
  // The run's decisions for the job: its last cycle at `at` (within the loop up to `at`), else its
  // first cycle after `at` (the loop goes on to it). A replica has no run yet: it is known by its
  // name until the loop up to `at` has made it.
  JobId target = index < workload_.jobs.size() ? runs_[index].id : 0;
  struct Decision {
    Millis at = -1;
    bool placed = false;
    Millis start = -1;
    std::vector<std::string> nodes;
    std::vector<std::string> victims;
    std::optional<Reason> reason;
  };
  std::optional<Decision> decision;
  // Every cycle runs, so that the one at or after `at` is seen (a skipped one decides as the last),
  // and explains every job.
  options_.skip_unchanged_cycles = false;
  engine_ = Engine(EngineFor(engine_.options(), options_));
  const auto hook = options_.on_cycle;
  options_.on_cycle = [&](const Plan& plan, std::span<const Job> pending,
                          const ClusterState& state) {
    if (hook) hook(plan, pending, state);
    if (plan.now < at || (decision && decision->at > at)) return;
    std::size_t i = 0;
    while (i < pending.size() && (target != 0 ? pending[i].id != target : pending[i].name != job))
      ++i;
    if (i == pending.size()) return;
    Decision d;
    d.at = plan.now;
    for (const Unplaced& u : plan.unplaced) {
      if (u.pending_index == i) d.reason = u.reason;
    }
    for (const Bind& b : plan.binds) {
      if (b.pending_index != i) continue;
      d.placed = true;
      d.nodes = DescribeAllocation(state, b.allocation);
      d.start = std::max(plan.now, b.start_after);
      for (const Eviction& e : plan.evictions) {
        if (e.preemptor == pending[i].id) d.victims.push_back(runs_[RunOf(e.job)].spec->job.name);
      }
    }
    decision = std::move(d);
    if (plan.now > at) stop_ = true;
  };
  Result<Millis> reached = Loop(at);
  if (!reached.ok()) return reached.status();
  // Replicas are created as the run goes; look the name up among all runs.
  if (index == workload_.jobs.size()) {
    index = 0;
    while (index < runs_.size() && runs_[index].spec->job.name != job) ++index;
    if (index == runs_.size()) {
      return Status::NotFound("no job named '" + job + "' by " +
                              FormatTime(at, TimeStyle::kElapsed));
    }
    target = runs_[index].id;
  }
  const struct Run& r = runs_[index];
  JobStatusAt out;
  out.at = at;
  out.record = Record(r);
  switch (r.phase) {
    case Phase::kFuture:
      out.state = JobStatusAt::State::kNotSubmitted;
      out.until = r.spec->job.submit_time;
      break;
    case Phase::kPending: {
      out.state = JobStatusAt::State::kPending;
      out.since = r.pending_since;
      if (!decision) {
        watch_ = index;
        reached = Loop(options_.horizon > 0 ? options_.horizon : kNever);
        watch_ = std::numeric_limits<std::uint32_t>::max();
        if (!reached.ok()) return reached.status();
      }
      if (decision) {
        out.cycle_at = decision->at;
        out.placed = decision->placed;
        out.reason = std::move(decision->reason);
        out.nodes = std::move(decision->nodes);
        out.victims = std::move(decision->victims);
        if (decision->placed) out.until = decision->start;
      } else if (runs_[index].phase == Phase::kStopped) {
        out.stopped_at = runs_[index].end;  // runs_ may have grown: `r` is stale here
      }
      break;
    }
    case Phase::kRunning: {
      out.state = r.run_start > at ? JobStatusAt::State::kStarting : JobStatusAt::State::kRunning;
      out.since = r.run_start > at ? r.bound_at : r.run_start;
      if (const RunningJob* running = state_.FindRunning(r.id)) {
        out.nodes = DescribeAllocation(state_, running->allocation);
      }
      if (r.run_start > at) {
        out.until = r.run_start;
        for (const struct Run& v : runs_) {
          if (v.phase == Phase::kDraining && v.evicted_by == r.id) {
            out.victims.push_back(v.spec->job.name);
          }
        }
      } else if (r.spec->kind != WorkKind::kInference) {
        out.until = FinishTime(r);
        out.progress = ProgressAt(r, at).done;
        out.checkpointed = ProgressAt(r, at).checkpointed;
      }
      break;
    }
    case Phase::kDraining:
      out.state = JobStatusAt::State::kDraining;
      out.since = r.evicted_at;
      out.until = r.stop_at;
      if (r.evicted_by > 0) out.preemptor = runs_[RunOf(r.evicted_by)].spec->job.name;
      break;
    case Phase::kDone:
      out.state = JobStatusAt::State::kCompleted;
      out.since = r.end;
      break;
    case Phase::kStopped:
      out.state = JobStatusAt::State::kStopped;
      out.since = r.end;
      break;
  }
  out.work = runs_[index].spec->work;
  return out;
}

// Metrics of a group of runs.
class GroupBuilder {
 public:
  bool empty() const { return m_.jobs_submitted == 0; }  // no run added
  // A group that will hold every run takes its distributions from the group of all runs
  // (Build): it need not keep the values.
  void HoldsEveryRun() { values_ = false; }

  void Add(const struct Run& r, Millis end) {
    ++m_.jobs_submitted;
    if (r.end >= 0 && r.phase == Phase::kDone) {
      ++m_.jobs_completed;
      if (values_)
        jct_.push_back(static_cast<double>(r.end - r.spec->job.submit_time) / kMillisPerSecond);
    }
    if (r.phase == Phase::kPending) ++m_.jobs_pending_at_end;
    if (r.phase == Phase::kRunning || r.phase == Phase::kDraining) ++m_.jobs_running_at_end;
    if (r.first_start >= 0 && values_) {
      wait_.push_back(static_cast<double>(r.first_start - r.spec->job.submit_time) /
                      kMillisPerSecond);
    }
    if (r.spec->kind == WorkKind::kTraining && values_) {
      const Millis done = r.phase == Phase::kDone ? r.end : end;
      completion_.push_back(static_cast<double>(done - r.spec->job.submit_time) / kMillisPerSecond);
    }
    Millis longest = r.longest_pending;
    if (r.phase == Phase::kPending) longest = std::max(longest, end - r.pending_since);
    m_.longest_wait_s =
        std::max(m_.longest_wait_s, static_cast<double>(longest) / kMillisPerSecond);
    m_.evictions += r.evictions;
    m_.failures += r.failures;
    double allocated = r.allocated_gpu_ms;
    double waste = r.waste_gpu_ms;
    if (r.phase == Phase::kRunning) {
      allocated += r.gpus * static_cast<double>(end - r.bound_at);
      waste += r.gpus * static_cast<double>(std::min(end, r.run_start) - r.bound_at);
    }
    m_.gpu_hours_lost += r.lost_gpu_ms / kMillisPerHour;
    m_.gpu_hours_allocated += allocated / kMillisPerHour;
    m_.gpu_hours_useful += std::max(0.0, allocated - waste - r.lost_gpu_ms) / kMillisPerHour;
  }

  // `all`: the metrics of every run, when built already. A group that holds every run (each run
  // belongs to one queue, one class and one workload) added them in the same order: its
  // distributions are those, without sorting the same values again.
  GroupMetrics Build(const GroupMetrics* all = nullptr) {
    if (all && m_.jobs_submitted == all->jobs_submitted) {
      m_.jct = all->jct;
      m_.wait = all->wait;
      m_.training_completion = all->training_completion;
      return m_;
    }
    m_.jct = Summarise(jct_);
    m_.wait = Summarise(wait_);
    m_.training_completion = Summarise(completion_);
    return m_;
  }

 private:
  static Distribution Summarise(std::vector<double>& values) {
    Distribution d;
    if (values.empty()) return d;
    std::sort(values.begin(), values.end());
    d.count = static_cast<std::int64_t>(values.size());
    double sum = 0;
    for (double v : values) sum += v;
    d.mean = sum / static_cast<double>(values.size());
    auto at = [&](double q) {
      const auto i = static_cast<std::size_t>(std::ceil(q * static_cast<double>(values.size())));
      return values[std::min(values.size() - 1, i == 0 ? 0 : i - 1)];
    };
    d.p50 = at(0.5);
    d.p95 = at(0.95);
    d.p99 = at(0.99);
    d.max = values.back();
    return d;
  }

  GroupMetrics m_;
  bool values_ = true;
  std::vector<double> jct_, wait_, completion_;
};

RunResult Simulation::Collect(const std::string& name, Millis end) {
  RunResult out;
  out.name = name;
  out.horizon = end;
  out.events = events_done_;
  out.cycles = cycles_;
  out.cycles_skipped = cycles_skipped_;
  out.jobs_parked = jobs_parked_;
  out.cycles_rerun = cycles_rerun_;
  out.cycles_stopped_early = cycles_stopped_early_;
  double total_milli = 0;
  for (NodeId n = 0; n < state_.node_count(); ++n) {
    total_milli += NodeMilli(n);
  }
  out.total_gpus = total_milli / kMilliPerGpu;
  for (GpuTypeId t = 0; t < state_.gpu_type_count(); ++t) {
    out.gpu_types.push_back(state_.gpu_type_name(t));
    double gpus = 0;
    for (NodeId n = 0; n < state_.node_count(); ++n) {
      gpus += static_cast<double>(state_.NodeDevices(n, t));
    }
    out.gpu_type_totals.push_back(gpus);
  }

  GroupBuilder overall;
  // Queues and classes by id (their names are unique); workloads by name, the last one at hand
  // (runs of one workload usually follow each other).
  std::vector<GroupBuilder> queues(state_.queue_count()), classes(state_.priority_class_count());
  std::map<std::string, GroupBuilder> workloads;
  // The groups that hold every run (one queue, one class or one workload for all): they need not
  // keep the values of the distributions.
  {
    std::vector<std::int64_t> in_queue(queues.size()), in_class(classes.size());
    std::int64_t runs = 0, in_workload = 0;
    const std::string* first_workload = nullptr;
    for (const struct Run& r : runs_) {
      if (r.phase == Phase::kFuture) continue;
      ++runs;
      ++in_queue[r.spec->job.queue];
      ++in_class[r.spec->job.priority_class];
      if (!first_workload) first_workload = &r.spec->workload;
      in_workload += r.spec->workload == *first_workload;
    }
    for (std::size_t q = 0; q < queues.size(); ++q) {
      if (in_queue[q] == runs) queues[q].HoldsEveryRun();
    }
    for (std::size_t c = 0; c < classes.size(); ++c) {
      if (in_class[c] == runs) classes[c].HoldsEveryRun();
    }
    if (first_workload && in_workload == runs) workloads[*first_workload].HoldsEveryRun();
  }
  GroupBuilder* workload = nullptr;
  const std::string* workload_name = nullptr;
  out.jobs.reserve(runs_.size());
  for (const struct Run& r : runs_) {
    if (r.phase == Phase::kFuture) continue;
    overall.Add(r, end);
    queues[r.spec->job.queue].Add(r, end);
    classes[r.spec->job.priority_class].Add(r, end);
    if (!workload_name || *workload_name != r.spec->workload) {
      workload = &workloads[r.spec->workload];
      workload_name = &r.spec->workload;
    }
    workload->Add(r, end);
    out.jobs.push_back(Record(r));
  }
  out.overall = overall.Build();
  for (QueueId q = 0; q < state_.queue_count(); ++q) {
    if (!state_.queue(q).children.empty()) continue;
    const std::string& qname = state_.queue(q).spec.name;
    out.queue_names.push_back(qname);
    GroupMetrics m = queues[q].Build(&out.overall);
    m.guarantee_gpus = guarantee_[q] / kMilliPerGpu;
    m.mean_gpus =
        end > 0 ? queue_allocated_[q].AreaAt(end) / static_cast<double>(end) / kMilliPerGpu : 0;
    m.below_guarantee_hours = below_guarantee_ms_[q] / kMillisPerHour;
    out.queues[qname] = m;
  }
  for (PriorityClassId c = 0; c < classes.size(); ++c) {
    if (!classes[c].empty())
      out.classes[state_.priority_class(c).name] = classes[c].Build(&out.overall);
  }
  for (auto& [k, b] : workloads) out.workloads[k] = b.Build(&out.overall);
  if (end > 0 && total_milli > 0) {
    const double capacity = out.total_gpus * static_cast<double>(end) / kMillisPerHour;
    out.gpu_allocation = out.overall.gpu_hours_allocated / capacity;
    out.gpu_utilization = out.overall.gpu_hours_useful / capacity;
  }
  for (const ServiceRun& s : services_) {
    ServiceMetrics m;
    m.name = s.spec->name;
    m.queue = state_.queue(s.spec->replica.queue).spec.name;
    const double timeout = static_cast<double>(s.spec->timeout);
    double timeouts = 0;
    for (const LatencyInterval& i : s.intervals) {
      m.requests += i.requests;
      timeouts += i.requests * i.timeout_fraction;
    }
    m.latency_p50_ms = MixtureQuantile(s.intervals, 0.5, timeout);
    m.latency_p99_ms = MixtureQuantile(s.intervals, 0.99, timeout);
    m.slo_miss_minutes = s.slo_miss_ms / (60.0 * kMillisPerSecond);
    m.slo_ms = static_cast<double>(s.spec->slo);
    m.latency_window = options_.latency_window;
    m.latency_p99_by_window_ms =
        WindowQuantiles(s.intervals, options_.latency_window, end, 0.99, timeout);
    for (const double p99 : m.latency_p99_by_window_ms) {
      if (!std::isfinite(p99)) continue;
      m.latency_p99_worst_window_ms = std::max(m.latency_p99_worst_window_ms, p99);
      if (p99 > m.slo_ms) ++m.windows_over_slo;
    }
    m.timeout_fraction = m.requests > 0 ? timeouts / m.requests : 0;
    if (end > 0) {
      m.mean_replicas_wanted = s.wanted_ms / static_cast<double>(end);
      m.mean_replicas_serving = s.serving_ms / static_cast<double>(end);
    }
    out.services.push_back(std::move(m));
  }
  out.series = std::move(series_);
  return out;
}

}  // namespace

const char* WorkKindName(WorkKind kind) {
  switch (kind) {
    case WorkKind::kTraining:
      return "training";
    case WorkKind::kInference:
      return "inference";
    case WorkKind::kBatch:
      return "batch";
  }
  return "?";
}

double RateCurve::At(Millis t) const {
  constexpr double kDay = 24.0 * 3600.0 * kMillisPerSecond;
  constexpr double kTwoPi = 6.283185307179586;
  const double phase = static_cast<double>(t - peak) / kDay;
  double r = base * (1 + diurnal * std::cos(kTwoPi * phase));
  for (const RateSpike& s : spikes) {
    if (t >= s.at && t < s.at + s.duration) r *= s.factor;
  }
  return std::max(0.0, r);
}

Result<JobStatusAt> Inspect(const ClusterSpec& cluster, const EngineOptions& engine,
                            const Workload& workload, const SimOptions& options,
                            const std::string& job, Millis at) {
  Result<ClusterState> state = ClusterState::Create(cluster);
  if (!state.ok()) return state.status();
  if (options.horizon > 0 && at > options.horizon) {
    return Status::InvalidArgument(FormatTime(at, TimeStyle::kElapsed) + " is past the horizon (" +
                                       FormatTime(options.horizon, TimeStyle::kElapsed) + ")",
                                   "at");
  }
  Simulation sim(std::move(*state), engine, workload, options);
  return sim.Inspect(job, at);
}

Result<RunResult> Simulate(const ClusterSpec& cluster, const EngineOptions& engine,
                           const Workload& workload, const SimOptions& options,
                           const std::string& name) {
  Result<ClusterState> state = ClusterState::Create(cluster);
  if (!state.ok()) return state.status();
  Simulation sim(std::move(*state), engine, workload, options);
  return sim.Run(name);
}

}  // namespace arbiter::sim
