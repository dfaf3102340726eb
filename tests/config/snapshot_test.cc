// Cluster snapshots (src/config/snapshot.h): a state written and read back is the same state to
// every reader of it, and a cycle on it decides the same; every malformed field is an error at its
// line naming the field.
#include "config/snapshot.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "arbiter/attained_service.h"
#include "arbiter/engine.h"
#include "config/config.h"
#include "core/engine/stages.h"
#include "core/state/cluster_state.h"
#include "job/resolve.h"
#include "store/codec.h"
#include "store/store.h"

namespace arbiter::config {
namespace {

::testing::AssertionResult HasSubstr(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' does not contain '" << part << "'";
}

// Two leaves; whole-GPU nodes, a node with two GPU models, a tainted shared node; quotas that
// borrow; classes with protection; scheduler options away from their defaults.
constexpr const char* kCluster = R"(topology:
  levels: [leaf]
scheduler:
  ordering: {priority_class_weight: 5000.5, fair_share_weight: 3000, age_weight: 10, max_age: 2d}
  fair_share_half_life: 6h
  placement: {policy: best-fit, seed: 7}
  preemption: {max_gpus_per_cycle: 8.5, max_loss_per_gpu: 1h, max_attempts_per_cycle: 5}
  backfill: {reservations: 2, overrun_grace: 90s, default_runtime: 12h, max_attempts: 9}
priority_classes:
  - {name: P0, value: 1000, preemptible: false}
  - {name: P1, value: 100, min_runtime: 10m, max_evictions: 3, eviction_window: 6h,
     eviction_cooldown: 5m, grace_period: 1m, checkpoint_signal: SIGTERM}
queues:
  - name: org
  - name: training
    parent: org
    weight: 3
    quota:
      H800: {nominal: 8, borrowing_limit: 4.5, lending_limit: 2}
  - name: "batch: \"odd\" name"
    parent: org
    priority: -2
    strict_fifo: true
    preempt_lower_priority: true
    quota:
      gpu: {nominal: 2, max: 6}
nodes:
  - name: h-{i}
    count: 3
    gpus: {model: H800, count: 4, memory: 80Gi, nvlink_group_size: 2}
    cpu: 64
    memory: 512Gi
    labels: {pool: train, "zone.example/rack": "r 1"}
    topology: {leaf: "leaf-{i/2}"}
  - name: mixed
    devices:
      - {model: A100, memory: 40Gi, nvlink_group: 0}
      - {model: H800, memory: 81921Mi, nvlink_group: 1}
    cpu: 8.5
    memory: 1000Mi
    topology: {leaf: leaf-1}
  - name: shared
    gpus: {model: L40S, count: 2, memory: 48Gi}
    cpu: 32
    memory: 128Gi
    taints: [{key: dedicated, value: inference, effect: PreferNoSchedule}]
    topology: {leaf: leaf-1}
)";

constexpr const char* kJobs = R"y(jobs:
  - name: waiting-gang
    user: bob
    queue: training
    priority_class: P1
    submit_time: 100s
    runtime_estimate: 2h
    checkpoint_interval: 30m
    restart_overhead: 2m
    gpu_types: [H800]
    topology: {level: leaf, mode: preferred}
    tasks: 3
    gpus: 4
    cpu: 8
    memory: 64Gi
  - name: weird-1
    command: "echo \"a: b\" # ünïcode\n\tdone"
    queue: "batch: \"odd\" name"
    priority_class: P0
    submit_time: 200s
    node_selector: {pool: train}
    tolerations: [{key: dedicated, operator: Equal, value: inference}, {operator: Exists, effect: NoSchedule}]
    labels: {app: x}
    affinity: [{match: {app: y}, level: leaf, anti: true, required: false}]
    groups:
      - {name: launcher, cpu: 1, memory: 1Gi}
      - {name: worker, tasks: 2, gpus: 0.25, gpu_memory: 10Gi, cpu: 250m}
    env: {A: "1", "B_X": "two words"}
    max_retries: 2
    idempotency_key: key-1
)y";

// kCluster, its multifactor order with a starvation wait.
ClusterConfig Config() {
  std::string text = kCluster;
  const std::string from = "max_age: 2d}";
  text.replace(text.find(from), from.size(), "max_age: 2d, starvation_wait: 3d}");
  Result<ClusterConfig> c = ParseCluster(text, "cluster.yaml");
  EXPECT_TRUE(c.ok()) << c.status().message();
  return std::move(c).value();
}

ClusterState Create(const ClusterConfig& c) {
  Result<ClusterState> s = ClusterState::Create(c.cluster);
  EXPECT_TRUE(s.ok()) << s.status().message();
  return std::move(s).value();
}

Job Parsed(const ClusterState& state, const std::string& yaml, JobId id) {
  Result<std::vector<Job>> jobs = ParseJobs(yaml, "jobs.yaml", state, id);
  EXPECT_TRUE(jobs.ok()) << jobs.status().message();
  return jobs->at(0);
}

// Binds `job` with each task on `node` at the given devices.
void BindOn(ClusterState& state, const Job& job,
            const std::vector<std::pair<std::string, std::vector<std::uint32_t>>>& tasks,
            Millis start) {
  Allocation a;
  std::size_t k = 0;
  for (std::uint32_t g = 0; g < job.groups.size(); ++g) {
    for (std::int32_t i = 0; i < job.groups[g].count; ++i, ++k) {
      const TaskRequest& r = job.groups[g].request;
      TaskAllocation t;
      t.group = g;
      t.index = static_cast<std::uint32_t>(i);
      t.node = *state.FindNode(tasks.at(k).first);
      t.cpu = r.cpu;
      t.memory = r.memory;
      for (std::uint32_t d : tasks.at(k).second) {
        const DeviceState& dev = state.node(t.node).devices[d];
        a.gpu_type = dev.type;
        t.devices.push_back(
            {d, r.shared() ? r.gpu : kWholeGpu, r.shared() ? r.gpu_memory : dev.memory});
      }
      a.tasks.push_back(t);
    }
  }
  Status st = state.Bind(job, a, start);
  ASSERT_TRUE(st.ok()) << st.message();
}

// What a reader of the state sees, as text: nodes and devices, running jobs (spec, allocation,
// times, evictions), queues (limits, usage, recent usage), eviction histories.
std::string Visible(const ClusterState& s, const std::vector<JobId>& other_ids) {
  std::string out;
  for (NodeId n = 0; n < s.node_count(); ++n) {
    const NodeState& node = s.node(n);
    out += fmt::format("node {} cordoned={} healthy={} cpu={}/{} mem={}/{} tasks={} stamp-free:",
                       node.name, node.cordoned, node.healthy, node.cpu_free.value(),
                       node.cpu.value(), node.memory_free.value(), node.memory.value(), node.tasks);
    for (const DeviceState& d : node.devices)
      out += fmt::format(" {}:{}:{}:{}", s.gpu_type_name(d.type), d.free.value(),
                         d.memory_free.value(), d.nvlink_group);
    for (const Resident& r : node.residents)
      out += fmt::format(" resident {} since {} held {}", r.job->job.id, r.since, r.held);
    out += "\n";
  }
  std::vector<JobId> ids;
  for (const auto& [id, r] : s.running()) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (JobId id : ids) {
    const RunningJob& r = *s.FindRunning(id);
    const job::JobSpec spec = job::ToSpec(r.job, s);
    out += fmt::format("running {} {} spec={} start={} checkpoint={} evictions=[{}]\n", id,
                       r.job.name, store::EncodeJobSpec(spec), r.start_time, r.last_checkpoint,
                       fmt::join(r.evictions, ","));
    for (const job::StoredTask& t : job::ToStoredAllocation(r.allocation, s).tasks) {
      out += fmt::format("  task {}/{} on {} cpu={} mem={}", t.group, t.index, t.node,
                         t.cpu.value(), t.memory.value());
      for (const DeviceShare& d : t.devices)
        out += fmt::format(" [{} {} {}]", d.device, d.gpu.value(), d.memory.value());
      out += "\n";
    }
  }
  for (JobId id : other_ids)
    out += fmt::format("evictions of {}: [{}]\n", id, fmt::join(s.EvictionTimes(id), ","));
  for (QueueId q = 0; q < s.queue_count(); ++q) {
    out += fmt::format("queue {} recent={:.17g}", s.queue(q).spec.name, s.recent_usage(q));
    for (std::size_t r = 0; r < s.quota_resource_count(); ++r) {
      const QuotaLimits& l = s.quota(q, r);
      out += fmt::format(" [{} {} {} {} {} {}]", l.limited, l.nominal, l.borrowing_limit,
                         l.lending_limit, l.max, s.usage(q, r));
    }
    out += "\n";
  }
  out += fmt::format("last accrual {} half-life {}\n", s.last_accrual(), s.fair_share_half_life());
  return out;
}

// A cycle's decisions, as text.
std::string Decisions(const ClusterState& s, const Plan& plan) {
  std::string out;
  for (const Bind& b : plan.binds) {
    out += fmt::format("bind {} after {}:", b.job, b.start_after);
    for (const job::StoredTask& t : job::ToStoredAllocation(b.allocation, s).tasks) {
      out += " " + t.node;
      for (const DeviceShare& d : t.devices) out += fmt::format("[{}]", d.device);
    }
    out += "\n";
  }
  for (const Eviction& e : plan.evictions)
    out += fmt::format("evict {} for {} stop {}\n", e.job, e.preemptor, e.stop_at);
  for (const Unplaced& u : plan.unplaced)
    out += fmt::format("unplaced {}: {}\n", u.job, u.reason.Describe());
  for (const Reservation& r : plan.reservations)
    out += fmt::format("reserve {} at {}\n", r.job, r.start);
  return out;
}

struct Fixture {
  ClusterConfig config = Config();
  ClusterState state = Create(config);
  std::vector<Job> pending;
  std::vector<JobId> ids;  // every job
};

// A state with three running jobs (one with a checkpoint and evictions, a gang across nodes, a
// job with shares of a device and a CPU-only group), a cordoned and an unhealthy node, usage
// accrued over hours, and pending jobs, one of them evicted before.
Fixture Busy() {
  Fixture f;
  ClusterState& s = f.state;
  const Job gang = Parsed(s, R"(jobs:
  - {name: gang, user: alice, queue: training, priority_class: P1, submit_time: 10s,
     runtime_estimate: 5h, checkpoint_interval: 20m, gpu_types: [H800], tasks: 2, gpus: 2,
     cpu: 4, memory: 8Gi})",
                          11);
  s.RestoreEvictions(11, {1000, 2000});
  BindOn(s, gang, {{"h-0", {0, 1}}, {"h-1", {2, 3}}}, 60000);
  EXPECT_TRUE(s.RecordCheckpoint(11, 60000 + 20 * 60000).ok());
  const std::string jobs = kJobs;
  const Job shared = Parsed(s, "jobs:\n" + jobs.substr(jobs.find("  - name: weird")), 12);
  BindOn(s, shared, {{"shared", {}}, {"shared", {1}}, {"shared", {1}}}, 90000);
  const Job small = Parsed(s, R"(jobs:
  - {name: small, queue: "batch: \"odd\" name", priority_class: P1, gpus: 1, gpu_types: [A100]})",
                           13);
  BindOn(s, small, {{"mixed", {0}}}, 3 * 3600000);
  EXPECT_TRUE(s.SetCordoned(*s.FindNode("h-2"), true).ok());
  EXPECT_TRUE(s.SetHealthy(*s.FindNode("h-1"), false).ok());
  s.AccrueUsage(0);
  s.AccrueUsage(2 * 3600000 + 17);
  Result<std::vector<Job>> pending = ParseJobs(kJobs, "jobs.yaml", s, 20);
  EXPECT_TRUE(pending.ok()) << pending.status().message();
  f.pending = std::move(pending).value();
  s.RestoreEvictions(20, {5000});
  f.ids = {11, 12, 13, 20, 21};
  return f;
}

TEST(Snapshot, AStateReadBackIsTheSameStateAndACycleDecidesTheSame) {
  Fixture f = Busy();
  const Millis taken_at = 4 * 3600000 + 123;
  Snapshot snap = MakeSnapshot(f.config, f.state, f.pending, taken_at);
  snap.calendar = true;
  const std::string text = WriteSnapshot(snap);
  Result<LoadedSnapshot> loaded = ParseSnapshot(text, "snap.yaml");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message() << "\n" << text;
  EXPECT_EQ(Visible(loaded->state, f.ids), Visible(f.state, f.ids)) << text;
  EXPECT_TRUE(loaded->state.CheckInvariants().ok());
  EXPECT_EQ(loaded->snapshot.taken_at, taken_at);
  EXPECT_TRUE(loaded->snapshot.calendar);
  // The pending jobs, and the scheduler's options.
  ASSERT_EQ(loaded->pending.size(), f.pending.size());
  for (std::size_t i = 0; i < f.pending.size(); ++i) {
    EXPECT_EQ(loaded->pending[i].id, f.pending[i].id);
    EXPECT_EQ(job::ToSpec(loaded->pending[i], loaded->state), job::ToSpec(f.pending[i], f.state));
  }
  const EngineOptions& a = loaded->snapshot.config.engine;
  const EngineOptions& b = f.config.engine;
  EXPECT_EQ(a.ordering.priority_class, b.ordering.priority_class);
  EXPECT_EQ(a.ordering.fair_share, b.ordering.fair_share);
  EXPECT_EQ(a.ordering.age, b.ordering.age);
  EXPECT_EQ(a.ordering.max_age, b.ordering.max_age);
  EXPECT_EQ(a.ordering.starvation_wait, b.ordering.starvation_wait);
  EXPECT_EQ(a.ordering.starvation_wait, 3 * 24 * 3600 * kMillisPerSecond);
  EXPECT_EQ(a.placement.policy, b.placement.policy);
  EXPECT_EQ(a.placement.seed, b.placement.seed);
  EXPECT_EQ(a.preemption.max_gpus_per_cycle, b.preemption.max_gpus_per_cycle);
  EXPECT_EQ(a.preemption.max_loss_per_gpu, b.preemption.max_loss_per_gpu);
  EXPECT_EQ(a.preemption.max_attempts_per_cycle, b.preemption.max_attempts_per_cycle);
  EXPECT_EQ(a.backfill.reservations, b.backfill.reservations);
  EXPECT_EQ(a.backfill.overrun_grace, b.backfill.overrun_grace);
  EXPECT_EQ(a.backfill.default_runtime, b.backfill.default_runtime);
  EXPECT_EQ(a.backfill.max_attempts, b.backfill.max_attempts);
  // Written again, the same text: nothing was lost or changed.
  EXPECT_EQ(WriteSnapshot(loaded->snapshot), text);
  // A cycle at taken_at decides the same on both.
  Engine engine(f.config.engine);
  const Plan original = engine.Schedule(f.state, f.pending, taken_at);
  Engine other(loaded->snapshot.config.engine);
  const Plan again = other.Schedule(loaded->state, loaded->pending, taken_at);
  EXPECT_EQ(Decisions(loaded->state, again), Decisions(f.state, original));
  EXPECT_FALSE(original.binds.empty() && original.unplaced.empty());
}

TEST(Snapshot, PolicyOptionsAndTheThroughputMatrixReadBack) {
  std::string text = kCluster;
  const std::string from = "  ordering: {priority_class_weight: 5000.5,";
  ASSERT_NE(text.find(from), std::string::npos);
  text.replace(text.find(from), from.size(),
               "  ordering: {policy: ftf, ftf_lease: 25m, heterogeneity: max-throughput,\n"
               "             priority_class_weight: 5000.5,");
  text += R"(gpu_throughput:
  label: arch
  workloads:
    resnet: {H800: 2.5, A100: 1, L40S: 0.75}
    "odd: name": {H800: 1, A100: 1, L40S: 1e-3, K80: 0.1}
)";
  Result<ClusterConfig> config = ParseCluster(text, "cluster.yaml");
  ASSERT_TRUE(config.ok()) << config.status().message();
  ClusterState state = Create(*config);
  const std::string written = WriteSnapshot(MakeSnapshot(*config, state, {}, 1000));
  Result<LoadedSnapshot> loaded = ParseSnapshot(written, "snap.yaml");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message() << "\n" << written;
  const ClusterConfig& back = loaded->snapshot.config;
  EXPECT_EQ(back.engine.ordering.policy, OrderPolicy::kFinishTimeFairness);
  EXPECT_EQ(back.engine.ordering.ftf_lease, 25 * 60000);
  EXPECT_EQ(back.engine.ordering.heterogeneity, HeterogeneityPolicy::kMaxThroughput);
  EXPECT_EQ(back.cluster.throughput.label, "arch");
  ASSERT_EQ(back.cluster.throughput.rows.size(), 2u);
  EXPECT_EQ(back.cluster.throughput.rows[1].workload, "odd: name");
  EXPECT_EQ(back.cluster.throughput.rows[1].by_model, config->cluster.throughput.rows[1].by_model);
  EXPECT_EQ(back.cluster.throughput.rows[0].by_model, config->cluster.throughput.rows[0].by_model);
  EXPECT_EQ(WriteSnapshot(loaded->snapshot), written);
}

TEST(Snapshot, JobsAsSubmittedReadBackWithEveryField) {
  Fixture f = Busy();
  Snapshot snap = MakeSnapshot(f.config, f.state, f.pending, 4 * 3600000);
  // What a server's jobs carry besides the engine's fields, with text that needs quoting.
  job::JobSpec& argv = snap.pending.at(0).spec;
  argv.argv = {"python", "-c", "print('a, b')", "x: y", "#z", "", "null", "-", "[1]", "{a}", "~"};
  argv.env = {{"A", "1"}, {"B_X", "two words: \"q\" \\ 'r'"}, {"EMPTY", ""}};
  argv.max_retries = 3;
  argv.idempotency_key = "arbiter-00ff";
  job::JobSpec& command = snap.pending.at(1).spec;
  command.command = "set -e\n\techo \"a: b\" # ünïcode\r\n";
  snap.pending.at(1).held = true;
  snap.running.at(0).spec.argv = {"torchrun", "train.py"};
  snap.stopping.push_back(snap.pending.at(0));
  snap.stopping.back().id = 99;
  snap.stopping.back().stop_time = 4 * 3600000 + 30000;
  const std::string text = WriteSnapshot(snap);
  Result<LoadedSnapshot> loaded = ParseSnapshot(text, "snap.yaml");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message() << "\n" << text;
  ASSERT_EQ(loaded->snapshot.pending.size(), 2u);
  EXPECT_EQ(loaded->snapshot.pending[0].spec, argv) << text;
  EXPECT_EQ(loaded->snapshot.pending[1].spec, command) << text;
  EXPECT_TRUE(loaded->snapshot.pending[1].held);
  EXPECT_EQ(loaded->pending.size(), 1u);  // the held one is not scheduled
  EXPECT_EQ(loaded->snapshot.running.at(0).spec, snap.running.at(0).spec);
  ASSERT_EQ(loaded->snapshot.stopping.size(), 1u);
  EXPECT_EQ(loaded->snapshot.stopping[0].spec, argv);
  EXPECT_EQ(loaded->snapshot.stopping[0].stop_time, 4 * 3600000 + 30000);
  EXPECT_EQ(loaded->snapshot.stopping[0].evictions, std::vector<Millis>{5000});
  EXPECT_EQ(WriteSnapshot(loaded->snapshot), text);
}

// Under Gavel's rounds the time each job has run on each model is an input of its priority: a
// snapshot keeps it by model name, with the policy's options.
TEST(Snapshot, GavelsTimeOnModelsReadsBack) {
  Fixture f = Busy();
  f.config.engine.ordering.policy = OrderPolicy::kGavel;
  f.config.engine.ordering.heterogeneity = HeterogeneityPolicy::kMaxMinFairness;
  f.config.engine.ordering.gavel_round = 20 * 60000;
  const GpuTypeId h800 = *f.state.FindGpuType("H800");
  AddTimeOnModel(f.pending.at(0).time_on_model, h800, 30 * 60000);
  const Millis taken_at = 4 * 3600000;
  const std::string text = WriteSnapshot(MakeSnapshot(f.config, f.state, f.pending, taken_at));
  EXPECT_TRUE(HasSubstr(text, "time_on_model: {H800: 30m}")) << text;
  EXPECT_TRUE(HasSubstr(text, "policy: gavel")) << text;
  EXPECT_TRUE(HasSubstr(text, "gavel_round: 20m")) << text;
  Result<LoadedSnapshot> loaded = ParseSnapshot(text, "snap.yaml");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message() << "\n" << text;
  const OrderingWeights& w = loaded->snapshot.config.engine.ordering;
  EXPECT_EQ(w.policy, OrderPolicy::kGavel);
  EXPECT_EQ(w.heterogeneity, HeterogeneityPolicy::kMaxMinFairness);
  EXPECT_EQ(w.gavel_round, 20 * 60000);
  const GpuTypeId loaded_h800 = *loaded->state.FindGpuType("H800");
  EXPECT_EQ(TimeOnModel(loaded->pending.at(0), loaded_h800), 30 * 60000);
  EXPECT_EQ(WriteSnapshot(loaded->snapshot), text);
  Engine engine(f.config.engine);
  const Plan original = engine.Schedule(f.state, f.pending, taken_at);
  Engine other(loaded->snapshot.config.engine);
  EXPECT_EQ(Decisions(loaded->state, other.Schedule(loaded->state, loaded->pending, taken_at)),
            Decisions(f.state, original));
  // A model the cluster does not have is refused, by name.
  std::string bad = text;
  bad.replace(bad.find("{H800: 30m}"), 11, "{K80: 30m}");
  Result<LoadedSnapshot> refused = ParseSnapshot(bad, "snap.yaml");
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(HasSubstr(refused.status().message(), "no GPU model 'K80'"))
      << refused.status().message();
}

// Under least attained service and Gittins the jobs' service and the finished jobs' sizes are
// inputs of the order: a snapshot keeps them, and a cycle on it decides as on the original.
TEST(Snapshot, ServiceAndLearnedJobSizesReadBack) {
  Fixture f = Busy();
  f.config.engine.ordering.policy = OrderPolicy::kGittins;
  f.config.engine.ordering.las_thresholds = {100 * 3600000};  // one queue: the index decides
  f.config.engine.ordering.starvation_factor = 2;
  // Every job learned ended a minute past the service job 0 has had: it is likely to end soon,
  // and goes before job 1 (which has run a minute and stopped after job 0: without what was
  // learned, it would go first, as the one stopped last).
  f.pending.at(1).attained = 60000;
  f.pending.at(1).service_time = 3 * 3600000 + 1800000;
  f.pending.at(0).attained = 900000;
  const Millis ran =
      LasService(f.config.engine.ordering, 900000, f.pending.at(0).total_gpu().value());
  for (int i = 0; i < 3; ++i) f.state.RecordFinishedService(ran + 60000, 1000);
  f.pending.at(0).starved = 60000;
  f.pending.at(0).service_time = 3 * 3600000;
  const Millis taken_at = 4 * 3600000;
  const std::string text = WriteSnapshot(MakeSnapshot(f.config, f.state, f.pending, taken_at));
  EXPECT_TRUE(HasSubstr(text, "service: {attained: 15m, starved: 1m, since: 3h}")) << text;
  EXPECT_TRUE(HasSubstr(text, "policy: gittins")) << text;
  Result<LoadedSnapshot> loaded = ParseSnapshot(text, "snap.yaml");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message() << "\n" << text;
  EXPECT_EQ(loaded->state.finished_service(), f.state.finished_service());
  EXPECT_EQ(loaded->snapshot.config.engine.ordering.gittins_quantum,
            f.config.engine.ordering.gittins_quantum);
  const Job& pending = loaded->pending.at(0);
  EXPECT_EQ(pending.attained, 900000);
  EXPECT_EQ(pending.starved, 60000);
  EXPECT_EQ(pending.service_time, 3 * 3600000);
  EXPECT_EQ(WriteSnapshot(loaded->snapshot), text);
  // The order and a cycle at taken_at decide as on the original (whose learned sizes and
  // service change its order: without them it is another).
  EXPECT_EQ(engine::OrderPending(f.state, f.pending, taken_at, f.config.engine.ordering),
            (std::vector<std::uint32_t>{0, 1}));
  EXPECT_EQ(engine::OrderPending(Busy().state, f.pending, taken_at, f.config.engine.ordering),
            (std::vector<std::uint32_t>{1, 0}));
  EXPECT_EQ(engine::OrderPending(loaded->state, loaded->pending, taken_at,
                                 loaded->snapshot.config.engine.ordering),
            engine::OrderPending(f.state, f.pending, taken_at, f.config.engine.ordering));
  Engine engine(f.config.engine);
  const Plan original = engine.Schedule(f.state, f.pending, taken_at);
  Engine other(loaded->snapshot.config.engine);
  EXPECT_EQ(Decisions(loaded->state, other.Schedule(loaded->state, loaded->pending, taken_at)),
            Decisions(f.state, original));
  // A running job's service reads back into the state's running job.
  Snapshot snap = loaded->snapshot;
  snap.running.at(0).attained = 1800000;
  Result<LoadedSnapshot> running = ParseSnapshot(WriteSnapshot(snap), "running.yaml");
  ASSERT_TRUE(running.ok()) << running.status().message();
  EXPECT_EQ(running->state.FindRunning(snap.running.at(0).id)->job.attained, 1800000);
}

TEST(Snapshot, TimesAreDurationsWithoutACalendar) {
  Fixture f = Busy();
  const std::string text = WriteSnapshot(MakeSnapshot(f.config, f.state, f.pending, 4 * 3600000));
  EXPECT_TRUE(HasSubstr(text, "taken_at: 4h\n")) << text;
  EXPECT_TRUE(HasSubstr(text, "start_time: 1m\n")) << text;
  EXPECT_TRUE(HasSubstr(text, "last_checkpoint: 21m\n")) << text;
  Result<LoadedSnapshot> loaded = ParseSnapshot(text, "snap.yaml");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_FALSE(loaded->snapshot.calendar);
  EXPECT_EQ(Visible(loaded->state, f.ids), Visible(f.state, f.ids));
}

TEST(Snapshot, UsageReadsBackExactly) {
  ClusterConfig config = Config();
  ClusterState state = Create(config);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> exponent(-3, 22);
  for (int i = 0; i < 200; ++i) {
    const double usage =
        std::pow(10.0, exponent(rng)) * (1 + static_cast<double>(rng() % 1000) / 7);
    state.RestoreRecentUsage(1, usage, 1000);
    Result<LoadedSnapshot> loaded =
        ParseSnapshot(WriteSnapshot(MakeSnapshot(config, state, {}, 1000)), "snap.yaml");
    ASSERT_TRUE(loaded.ok()) << loaded.status().message();
    ASSERT_EQ(loaded->state.recent_usage(1), usage) << i;
  }
}

TEST(Snapshot, FormatsTimes) {
  EXPECT_EQ(FormatSnapshotTime(0, true), "1970-01-01T00:00:00Z");
  EXPECT_EQ(FormatSnapshotTime(1795996193439, true), "2026-11-29T23:49:53.439Z");
  EXPECT_EQ(FormatSnapshotTime(951782400000, true), "2000-02-29T00:00:00Z");
  EXPECT_EQ(FormatSnapshotTime(90500, false), "1m30s500ms");
  EXPECT_EQ(FormatSnapshotTime(86400000 + 7200000, false), "1d2h");
  for (Millis t : {Millis{0}, Millis{1795996193439}, Millis{951782400001}, Millis{90500}}) {
    for (bool calendar : {true, false}) {
      Result<Millis> back = ParseSnapshotTime(FormatSnapshotTime(t, calendar), "t");
      ASSERT_TRUE(back.ok()) << back.status().message();
      EXPECT_EQ(*back, t);
    }
  }
  EXPECT_EQ(*ParseSnapshotTime("2026-11-29T23:49:53.4Z", "t"), 1795996193400);
  EXPECT_FALSE(ParseSnapshotTime("2026-11-30 05:49:53Z", "t").ok());
  EXPECT_FALSE(ParseSnapshotTime("2026-02-30T00:00:00Z", "t").ok());
  EXPECT_FALSE(ParseSnapshotTime("2026-11-30T05:49:53.4444Z", "t").ok());
  EXPECT_TRUE(HasSubstr(ParseSnapshotTime("-5s", "running[0].start_time").status().message(),
                        "running[0].start_time: "));
}

// A small valid snapshot, written by hand, that each case below breaks in one place.
constexpr const char* kValid = R"(snapshot_version: 1
taken_at: "2026-05-01T10:00:00Z"
priority_classes:
  - {name: high, value: 100}
  - {name: low, value: 10}
queues:
  - name: main
nodes:
  - {name: g-0, gpus: {model: G, count: 4, memory: 40Gi}, cpu: 32, memory: 256Gi}
  - {name: g-1, gpus: {model: G, count: 4, memory: 40Gi}, cpu: 32, memory: 256Gi}
node_states:
  - {node: g-1, state: cordoned, healthy: true, reason: repair}
queue_usage:
  main: 3600.5
running:
  - id: 1
    name: a
    queue: main
    priority_class: low
    submit_time: "2026-05-01T09:00:00Z"
    tasks: 2
    gpus: 2
    evictions: ["2026-05-01T08:00:00Z", "2026-05-01T08:30:00Z"]
    start_time: "2026-05-01T09:01:00Z"
    last_checkpoint: "2026-05-01T09:31:00Z"
    allocation:
      gpu_type: G
      tasks:
        - {group: main, index: 0, node: g-0, devices: [0, 1]}
        - {group: main, index: 1, node: g-0, devices: [2, 3]}
  - id: 2
    name: b
    queue: main
    priority_class: low
    submit_time: "2026-05-01T09:00:00Z"
    gpus: 0.5
    start_time: "2026-05-01T09:02:00Z"
    allocation:
      gpu_type: G
      tasks:
        - {node: g-1, devices: [0], share: 0.5}
pending:
  - {id: 3, name: c, queue: main, priority_class: high, submit_time: "2026-05-01T09:59:00Z", gpus: 4}
  - {id: 4, name: d, queue: main, priority_class: low, submit_time: "2026-05-01T09:59:00Z", gpus: 1, held: true}
stopping:
  - {id: 5, name: e, queue: main, priority_class: low, submit_time: "2026-05-01T09:00:00Z", gpus: 1,
     evictions: ["2026-05-01T09:59:50Z"], stop_time: "2026-05-01T10:00:20Z"}
)";

TEST(Snapshot, AHandWrittenSnapshotLoads) {
  Result<LoadedSnapshot> loaded = ParseSnapshot(kValid, "snap.yaml");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  const ClusterState& s = loaded->state;
  EXPECT_EQ(s.running().size(), 2u);
  const RunningJob& a = *s.FindRunning(1);
  EXPECT_EQ(s.Describe(a.allocation.tasks[1]), "g-0[2-3]");
  EXPECT_EQ(a.evictions.size(), 2u);
  EXPECT_EQ(a.last_checkpoint - a.start_time, 30 * 60000);
  EXPECT_EQ(s.Describe(s.FindRunning(2)->allocation.tasks[0]), "g-1[0]:0.5");
  EXPECT_TRUE(s.node(*s.FindNode("g-1")).cordoned);
  EXPECT_EQ(s.recent_usage(0), 3600.5e6);
  ASSERT_EQ(loaded->pending.size(), 1u);  // the held job waits for its release
  EXPECT_EQ(loaded->pending[0].name, "c");
  EXPECT_EQ(loaded->snapshot.pending.size(), 2u);
  EXPECT_EQ(loaded->snapshot.stopping.size(), 1u);
  EXPECT_EQ(s.EvictionTimes(5).size(), 1u);
  EXPECT_EQ(loaded->snapshot.node_states.at(0).reason, "repair");
}

TEST(Snapshot, JsonIsReadToo) {
  constexpr const char* kJson = R"({"snapshot_version": 1, "taken_at": "2h",
    "priority_classes": [{"name": "low", "value": 10}],
    "queues": [{"name": "main"}],
    "nodes": [{"name": "g-0", "gpus": {"model": "G", "count": 2, "memory": "40Gi"},
               "cpu": 8, "memory": "64Gi"}],
    "queue_usage": {"main": 12.25},
    "running": [{"id": 1, "name": "a", "queue": "main", "priority_class": "low",
                 "submit_time": "1h", "gpus": 1, "start_time": "90m",
                 "allocation": {"gpu_type": "G", "tasks": [{"node": "g-0", "devices": [1]}]}}]})";
  Result<LoadedSnapshot> loaded = ParseSnapshot(kJson, "snap.json");
  ASSERT_TRUE(loaded.ok()) << loaded.status().message();
  EXPECT_EQ(loaded->state.Describe(loaded->state.FindRunning(1)->allocation.tasks[0]), "g-0[1]");
  EXPECT_EQ(loaded->state.recent_usage(0), 12.25e6);
}

// The snapshot with `from` replaced by `to` (once; it must be there).
std::string Broken(const std::string& from, const std::string& to) {
  std::string text = kValid;
  const std::size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

TEST(Snapshot, EveryMalformedFieldIsNamedAtItsLine) {
  struct Case {
    std::string from, to;
    std::string error;  // what the message holds after `snap.yaml:`
  };
  const std::vector<Case> cases = {
      {"snapshot_version: 1", "snapshot_version: 2",
       "1:19: snapshot_version: this reader reads version 1, got 2"},
      {"snapshot_version: 1\n", "", "1:1: missing required field 'snapshot_version'"},
      {"taken_at: \"2026-05-01T10:00:00Z\"", "taken_at: yesterday", "2:11: taken_at: "},
      {"taken_at: \"2026-05-01T10:00:00Z\"", "taken_at: \"2026-05-01 10:00:00Z\"",
       "2:11: taken_at: expected a UTC time"},
      {"queues:", "server: {}\nqueues:", "unknown field 'server'"},
      {"  - name: main\n", "  - name: main\n    quota: {G: {nominal: -1}}\n",
       "queues[0].quota.G.nominal: must not be negative"},
      {"{node: g-1, state", "{node: g-9, state", "12:12: node_states[0].node: unknown node 'g-9'"},
      {"state: cordoned", "state: asleep", "node_states[0].state: expected one of"},
      {"healthy: true", "healthy: maybe", "node_states[0].healthy: expected true or false"},
      {"  main: 3600.5", "  mian: 3600.5", "14:3: queue_usage.mian: unknown queue 'mian'"},
      {"  main: 3600.5", "  main: -1", "queue_usage.main: must not be negative"},
      {"  - id: 1\n", "  - id: 0\n", "16:9: running[0].id: must be at least 1"},
      {"  - id: 2\n", "  - id: 1\n", "running[1].id: job id 1 is also running[0]'s"},
      {"{id: 3,", "{id: 1,", "pending[0].id: job id 1 is also running[0]'s"},
      {"    name: a\n", "    name: a\n    replicas: 2\n", "running[0].replicas: unknown field"},
      {"    name: a\n    queue: main", "    name: a\n    queue: mian",
       "running[0].queue: unknown leaf queue 'mian'"},
      {"    tasks: 2\n", "    tasks: 0\n", "running[0].tasks: must be at least 1"},
      {"start_time: \"2026-05-01T09:01:00Z\"", "start_time: soon", "running[0].start_time: "},
      {"    start_time: \"2026-05-01T09:01:00Z\"\n", "",
       "running[0]: missing required field 'start_time'"},
      {"last_checkpoint: \"2026-05-01T09:31:00Z\"", "last_checkpoint: []",
       "running[0].last_checkpoint: expected a string"},
      {"\"2026-05-01T08:30:00Z\"]", "\"2026-05-01T07:30:00Z\"]",
       "running[0].evictions[1]: evictions go oldest first"},
      {"      gpu_type: G\n      tasks:\n        - {group: main, index: 0",
       "      gpu_type: H\n      tasks:\n        - {group: main, index: 0",
       "running[0].allocation.gpu_type: unknown GPU type 'H'"},
      {"{group: main, index: 0, node: g-0", "{group: mian, index: 0, node: g-0",
       "running[0].allocation.tasks[0].group: unknown task group 'mian'"},
      {"index: 1, node: g-0", "index: 2, node: g-0",
       "running[0].allocation.tasks[1].index: must be at most 1, got 2"},
      {"index: 1, node: g-0", "index: 0, node: g-0",
       "running[0].allocation.tasks[1]: task 0 of group main is placed twice"},
      {"index: 0, node: g-0", "index: 0, node: g-7",
       "running[0].allocation.tasks[0].node: unknown node 'g-7'"},
      {"devices: [0, 1]", "devices: [0, 9]",
       "running[0].allocation.tasks[0].devices[1]: must be at most 3, got 9"},
      {"devices: [0, 1]", "devices: [1, 1]",
       "running[0].allocation.tasks[0].devices[1]: device 1 is listed twice"},
      {"devices: [0, 1]", "devices: [0]",
       "running[0].allocation.tasks[0].devices: the task asks for 2 devices, got 1"},
      {"        - {group: main, index: 1, node: g-0, devices: [2, 3]}\n", "",
       "running[0].allocation.tasks: task 1 of group main is not placed"},
      {"devices: [2, 3]", "devices: [1, 2]", "running[0].allocation: job 'a' cannot run there: "},
      {"{node: g-1, devices: [0], share: 0.5}", "{node: g-0, devices: [0], share: 0.5}",
       "running[1].allocation: job 'b' cannot run there: "},
      {"share: 0.5", "share: 0.25",
       "running[1].allocation.tasks[0].share: the task asks for 0.5 GPU"},
      {"        - {node: g-1", "        - {group: x, node: g-1",
       "running[1].allocation.tasks[0].group: unknown task group 'x'"},
      {"    allocation:\n      gpu_type: G\n      tasks:\n        - {node",
       "    allocation:\n      tasks:\n        - {node",
       "running[1].allocation: missing required field 'gpu_type'"},
      {"gpus: 4}", "gpus: 4, held: maybe}", "pending[0].held: expected true or false"},
      {"gpus: 4}", "gpus: 4, stop_time: \"2026-05-01T10:00:20Z\"}",
       "pending[0].stop_time: unknown field"},
      {", stop_time: \"2026-05-01T10:00:20Z\"", "",
       "stopping[0]: missing required field 'stop_time'"},
      {"submit_time: \"2026-05-01T09:59:00Z\", gpus: 4", "submit_time: tomorrow, gpus: 4",
       "pending[0].submit_time: "},
  };
  for (const Case& c : cases) {
    Result<LoadedSnapshot> loaded = ParseSnapshot(Broken(c.from, c.to), "snap.yaml");
    ASSERT_FALSE(loaded.ok()) << c.to;
    EXPECT_TRUE(HasSubstr(loaded.status().message(), "snap.yaml:")) << c.to;
    EXPECT_TRUE(HasSubstr(loaded.status().message(), c.error)) << c.to;
  }
}

}  // namespace
}  // namespace arbiter::config
