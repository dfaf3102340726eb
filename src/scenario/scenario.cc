// The scenario loader. A scenario's configurations share the cluster's nodes and the workload;
// each may replace the cluster's `queues`, `priority_classes` and `scheduler` and assign
// workloads to its own queues and classes. The workload is drawn once per seed: every
// configuration sees the same jobs at the same times.
#include "scenario/scenario.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "config/loaders.h"
#include "config/reader.h"
#include "config/snapshot.h"
#include "core/state/cluster_state.h"
#include "job/resolve.h"
#include "sim/workload.h"
#include "trace/trace.h"

namespace arbiter::config {
namespace {

using internal::Entries;
using internal::Entry;
using internal::Map;
using internal::Value;

constexpr std::string_view kWorkloadFields[] = {
    "name",    "kind", "job", "arrivals", "work", "gpus", "checkpoint_cost", "estimate_factor",
    "service", "trace"};

// A node of a mapping that is `base` with the keys of `overrides` replaced or added. The merged
// node shares the original nodes, so their positions stay right for errors.
YAML::Node Merge(const YAML::Node& base,
                 const std::vector<std::pair<std::string, YAML::Node>>& overrides) {
  YAML::Node merged(YAML::NodeType::Map);
  if (base.IsMap()) {
    for (const auto& kv : base) merged[kv.first] = kv.second;
  }
  for (const auto& [key, node] : overrides) merged[key] = node;
  return merged;
}

// A distribution of durations (ms) or of plain numbers.
sim::Dist LoadDist(const Value& v, bool duration) {
  auto number = [&](const Value& x) {
    return duration ? static_cast<double>(x.Duration()) : x.Number(0);
  };
  sim::Dist d;
  if (!v.node().IsMap()) {
    d.a = number(v);
    return d;
  }
  Map m(v, {"uniform", "exponential", "lognormal", "choice", "weights"});
  int forms = 0;
  for (std::string_view f : {"uniform", "exponential", "lognormal", "choice"}) forms += m.Has(f);
  if (forms != 1) v.Fail("give exactly one of uniform, exponential, lognormal, choice");
  if (const Value* u = m.Find("uniform")) {
    std::vector<Value> items = u->Items();
    if (items.size() != 2) u->Fail("expected [low, high]");
    d.kind = sim::Dist::Kind::kUniform;
    d.a = number(items[0]);
    d.b = number(items[1]);
    if (d.b < d.a) items[1].Fail("high must not be below low");
  } else if (const Value* e = m.Find("exponential")) {
    d.kind = sim::Dist::Kind::kExponential;
    d.a = number(*e);
  } else if (const Value* l = m.Find("lognormal")) {
    Map lm(*l, {"median", "sigma"});
    d.kind = sim::Dist::Kind::kLogNormal;
    d.a = number(lm.Get("median"));
    d.b = lm.Get("sigma").Number(0);
  } else {
    const Value& c = m.Get("choice");
    d.kind = sim::Dist::Kind::kChoice;
    for (const Value& x : c.Items()) d.values.push_back(number(x));
    if (d.values.empty()) c.Fail("list at least one value");
    if (const Value* w = m.Find("weights")) {
      for (const Value& x : w->Items()) d.weights.push_back(x.Number(0));
      if (d.weights.size() != d.values.size()) {
        w->Fail(fmt::format("give one weight per choice ({})", d.values.size()));
      }
    }
  }
  if (m.Has("weights") && !m.Has("choice")) m.Key("weights").Fail("weights go with choice");
  return d;
}

sim::Arrivals LoadArrivals(const Value& v) {
  Map m(v, {"per_hour", "every", "burst", "at", "start", "until", "count"});
  sim::Arrivals a;
  const int forms = m.Has("per_hour") + m.Has("every") + m.Has("at");
  if (forms != 1) v.Fail("give exactly one of per_hour (Poisson), every (periodic), at (times)");
  if (const Value* x = m.Find("per_hour")) {
    a.kind = sim::Arrivals::Kind::kPoisson;
    a.per_hour = x->Number(0);
    if (a.per_hour <= 0) x->Fail("must be above 0");
  } else if (const Value* e = m.Find("every")) {
    a.kind = sim::Arrivals::Kind::kPeriodic;
    a.every = e->Duration();
    if (a.every <= 0) e->Fail("must be above 0");
    if (const Value* b = m.Find("burst")) a.burst = b->Int32(1, 1 << 20);
  } else {
    a.kind = sim::Arrivals::Kind::kAt;
    for (const Value& t : m.Get("at").Items()) a.at.push_back(t.Duration());
  }
  if (m.Has("burst") && !m.Has("every")) m.Key("burst").Fail("burst goes with every");
  if (const Value* x = m.Find("start")) a.start = x->Duration();
  if (const Value* x = m.Find("until")) a.until = x->Duration();
  if (const Value* x = m.Find("count")) a.count = x->Int(0, 1 << 30);
  // Given times in order, so that `count` keeps the earliest; `start` bounds them as `until` does.
  std::erase_if(a.at, [&](Millis t) { return t < a.start; });
  std::sort(a.at.begin(), a.at.end());
  return a;
}

sim::InferenceService LoadService(const Value& v) {
  Map m(v, {"rate", "replica_rate", "target_utilization", "replicas", "scale_interval", "startup",
            "slo", "timeout"});
  sim::InferenceService s;
  Map rate(m.Get("rate"), {"base", "diurnal", "peak", "spikes"});
  s.rate.base = rate.Get("base").Number(0);
  if (const Value* x = rate.Find("diurnal")) {
    s.rate.diurnal = x->Number(0);
    if (s.rate.diurnal > 1) x->Fail("must be between 0 and 1");
  }
  if (const Value* x = rate.Find("peak")) s.rate.peak = x->Duration();
  if (const Value* x = rate.Find("spikes")) {
    for (const Value& item : x->Items()) {
      Map sm(item, {"at", "duration", "factor"});
      s.rate.spikes.push_back(sim::RateSpike{sm.Get("at").Duration(), sm.Get("duration").Duration(),
                                             sm.Get("factor").Number(0)});
    }
  }
  s.replica_rate = m.Get("replica_rate").Number(0);
  if (s.replica_rate <= 0) m.Get("replica_rate").Fail("must be above 0");
  if (const Value* x = m.Find("target_utilization")) {
    s.target_utilization = x->Number(0);
    if (s.target_utilization <= 0 || s.target_utilization > 1) {
      x->Fail("must be above 0 and at most 1");
    }
  }
  if (const Value* x = m.Find("replicas")) {
    Map rm(*x, {"min", "max"});
    if (const Value* y = rm.Find("min")) s.min_replicas = y->Int32(0, 1 << 20);
    if (const Value* y = rm.Find("max")) s.max_replicas = y->Int32(0, 1 << 20);
    if (s.max_replicas < s.min_replicas) x->Fail("max must not be below min");
  }
  if (const Value* x = m.Find("scale_interval")) {
    s.scale_interval = x->Duration();
    if (s.scale_interval <= 0) x->Fail("must be above 0");
  }
  if (const Value* x = m.Find("startup")) s.startup = x->Duration();
  if (const Value* x = m.Find("slo")) s.slo = x->Duration();
  if (const Value* x = m.Find("timeout")) {
    s.timeout = x->Duration();
    if (s.timeout <= 0) x->Fail("must be above 0");
  }
  return s;
}

struct TraceSource {
  std::string path;
  std::string format;
  bool skip_bad_rows = false;
  std::int64_t limit = 0;
  std::map<std::string, std::string> queue_map;  // trace queue -> queue; "*" for the rest
  Value at;                                      // for errors
};

class ScenarioLoader {
 public:
  ScenarioLoader(std::string base_dir, std::optional<std::uint64_t> seed)
      : base_dir_(std::move(base_dir)), seed_override_(seed) {}

  Scenario Load(const Value& root) {
    Map m(root,
          {"name", "description", "seed", "horizon", "cycle", "sample_interval", "latency_window",
           "cluster", "start", "failures", "outages", "workloads", "configurations"});
    out_.name = m.Get("name").NonEmptyString();
    if (const Value* v = m.Find("description")) out_.description = v->String();
    if (const Value* v = m.Find("seed"))
      out_.seed = static_cast<std::uint64_t>(v->Int(0, INT64_MAX));
    if (seed_override_) out_.seed = *seed_override_;
    if (const Value* v = m.Find("horizon")) out_.options.horizon = v->Duration();
    if (const Value* v = m.Find("cycle")) {
      Map c(*v, {"min_interval", "period"});
      if (const Value* x = c.Find("min_interval")) out_.options.min_cycle_interval = x->Duration();
      if (const Value* x = c.Find("period")) {
        out_.options.cycle_period = x->Duration();
        if (out_.options.cycle_period <= 0) x->Fail("must be above 0");
      }
    }
    if (const Value* v = m.Find("sample_interval")) {
      out_.options.sample_interval = v->Duration();
      if (out_.options.sample_interval <= 0) v->Fail("must be above 0");
    }
    if (const Value* v = m.Find("latency_window")) {
      out_.options.latency_window = v->Duration();
      if (out_.options.latency_window <= 0) v->Fail("must be above 0");
    }
    if (const Value* start = m.Find("start")) LoadStart(*start, m);
    const Value cluster = snapshot_ ? *snapshot_cluster_ : m.Get("cluster");
    if (!cluster.node().IsMap()) cluster.Fail("expected a mapping in the cluster file's format");
    // The cluster on its own first, so that its errors name `cluster`: a configuration's merged
    // cluster can then fail only in the configuration's own fields, and names the configuration.
    cluster_bare_memory_ = internal::LoadClusterValue(cluster).bare_memory;

    std::vector<Value> workloads;
    if (const Value* w = m.Find("workloads")) workloads = w->Items();
    if (workloads.empty() && !snapshot_) {
      root.Fail("missing required field 'workloads' (list at least one)");
    }
    std::vector<std::string> names;
    for (const Value& w : workloads) {
      Map wm(w, kWorkloadFields);
      const std::string name = wm.Get("name").NonEmptyString();
      for (const std::string& n : names) {
        if (n == name) wm.Get("name").Fail(fmt::format("duplicate workload name '{}'", name));
      }
      names.push_back(name);
    }
    out_.workloads = names;

    std::vector<Value> configs;
    if (const Value* c = m.Find("configurations")) configs = c->Items();
    if (configs.empty()) {
      LoadConfiguration(cluster, nullptr, workloads, m);
    } else {
      for (const Value& c : configs) LoadConfiguration(cluster, &c, workloads, m);
    }
    for (std::size_t i = 0; i < out_.configurations.size(); ++i) {
      for (std::size_t j = 0; j < i; ++j) {
        if (out_.configurations[i].name == out_.configurations[j].name) {
          configs[i].Fail(
              fmt::format("duplicate configuration name '{}'", out_.configurations[i].name));
        }
      }
    }
    return std::move(out_);
  }

 private:
  // `start: {snapshot: FILE}`: the run starts from a cluster snapshot (docs/snapshot.md), whose
  // cluster is the scenario's.
  void LoadStart(const Value& start, const Map& root) {
    Map m(start, {"snapshot"});
    const Value& file = m.Get("snapshot");
    if (root.Has("cluster")) {
      root.Key("cluster").Fail("the cluster is the snapshot's (start.snapshot): leave it out");
    }
    std::filesystem::path path(file.NonEmptyString());
    if (path.is_relative()) path = std::filesystem::path(base_dir_) / path;
    snapshot_file_ = path.string();
    Result<std::string> text = internal::ReadFile(snapshot_file_);
    if (!text.ok()) file.Fail(text.status().message());
    Result<LoadedSnapshot> loaded = ParseSnapshot(*text, snapshot_file_);
    if (!loaded.ok()) file.Fail(loaded.status().message());
    snapshot_.emplace(std::move(loaded->snapshot));
    // The snapshot's cluster sections, read again by each configuration (which may replace its
    // queues, classes and scheduler) with their positions in the snapshot's file.
    const YAML::Node document = YAML::Load(*text);
    YAML::Node cluster(YAML::NodeType::Map);
    for (const char* key :
         {"topology", "scheduler", "priority_classes", "queues", "gpu_throughput", "nodes"}) {
      if (document[key]) cluster[key] = document[key];
    }
    snapshot_cluster_.emplace(&snapshot_file_, cluster, "", YAML::Mark());
    snapshot_at_.emplace(file);
  }

  // The snapshot's jobs in a configuration: its running jobs run at time 0 where they ran, its
  // pending jobs (held ones left out) and the jobs being evicted are pending at 0, every time
  // made relative to when it was taken (submit times before 0 keep the jobs' ages). Work: the
  // runtime estimate (else the scheduler's backfill.default_runtime); a running job past it has
  // backfill.overrun_grace left, as the engine assumes.
  void AddSnapshotJobs(const Value& at, const ClusterState& state, const EngineOptions& engine,
                       sim::Workload& out) {
    const Snapshot& snap = *snapshot_;
    const Millis t0 = snap.taken_at;
    auto job_of = [&](const SnapshotJob& j, const char* section) {
      Result<Job> job = job::ToJob(0, j.spec, state);
      if (!job.ok()) {
        at.Fail(fmt::format("{} job '{}' (id {}) of the snapshot: {}", section, j.spec.name, j.id,
                            job.status().message()));
      }
      sim::SimJob sj;
      sj.job = std::move(job).value();
      sj.job.submit_time -= t0;
      sj.kind = sj.job.checkpoint_interval > 0 ? sim::WorkKind::kTraining : sim::WorkKind::kBatch;
      sj.workload = "snapshot";
      sj.work =
          sj.job.runtime_estimate > 0 ? sj.job.runtime_estimate : engine.backfill.default_runtime;
      for (Millis e : j.evictions) sj.evictions.push_back(e - t0);
      return sj;
    };
    for (const SnapshotJob& j : snap.running) {
      sim::InitialRun run;
      run.job = job_of(j, "running");
      Result<Allocation> allocation = job::ToAllocation(j.allocation, state);
      if (!allocation.ok()) {
        at.Fail(fmt::format("running job '{}' (id {}) of the snapshot: {}", j.spec.name, j.id,
                            allocation.status().message()));
      }
      run.allocation = std::move(allocation).value();
      run.start_time = j.start_time - t0;
      if (j.last_checkpoint >= 0) run.last_checkpoint = j.last_checkpoint - t0;
      const Millis elapsed = std::max<Millis>(0, -run.start_time);
      if (run.job.work <= elapsed) run.job.work = elapsed + engine.backfill.overrun_grace;
      out.initial_running.push_back(std::move(run));
    }
    for (const SnapshotJob& j : snap.pending) {
      if (!j.held) out.jobs.push_back(job_of(j, "pending"));
    }
    for (const SnapshotJob& j : snap.stopping) out.jobs.push_back(job_of(j, "stopping"));
    out.initial_usage.assign(state.queue_count(), 0.0);
    for (const auto& [queue, usage] : snap.queue_usage) {
      if (std::optional<QueueId> q = state.FindQueue(queue)) out.initial_usage[*q] = usage;
    }
  }

  void LoadConfiguration(const Value& cluster, const Value* config,
                         const std::vector<Value>& workloads, const Map& root) {
    SimConfiguration sc;
    sc.name = out_.name;
    std::vector<std::pair<std::string, YAML::Node>> overrides;
    std::map<std::string, Value> assign;  // workload (or "*") -> {queue, priority_class}
    if (config) {
      Map cm(*config, {"name", "description", "queues", "priority_classes", "scheduler", "assign"});
      sc.name = cm.Get("name").NonEmptyString();
      if (const Value* v = cm.Find("description")) sc.description = v->String();
      for (std::string_view key : {"queues", "priority_classes", "scheduler"}) {
        if (const Value* v = cm.Find(key)) overrides.emplace_back(std::string(key), v->node());
      }
      if (const Value* a = cm.Find("assign")) {
        for (const Entry& e : Entries(*a)) assign.emplace(e.key, e.value);
      }
    }
    const Value merged = (config ? *config : cluster).WithNode(Merge(cluster.node(), overrides));
    ClusterConfig cc = internal::LoadClusterValue(merged);
    if (snapshot_) {
      // Nodes cordoned, drained or lost when the snapshot was taken take no new work in the run.
      for (const SnapshotNode& n : snapshot_->node_states) {
        if (n.state == SnapshotNode::State::kSchedulable && n.healthy) continue;
        for (NodeSpec& spec : cc.cluster.nodes) {
          if (spec.name == n.node) spec.cordoned = true;
        }
      }
    }
    Result<ClusterState> state = ClusterState::Create(cc.cluster);
    if (!state.ok()) (config ? *config : cluster).FailWith(state.status());
    sc.cluster = std::move(cc.cluster);
    sc.engine = std::move(cc.engine);
    sc.aliases = std::move(cc.aliases);
    // The nodes come from `cluster` alone (a configuration cannot change them): their paths.
    sc.bare_memory = cluster_bare_memory_;

    for (const auto& [key, value] : assign) {
      bool known = key == "*";
      for (const Value& w : workloads) known |= Map(w, kWorkloadFields).Get("name").String() == key;
      if (!known) value.Fail(fmt::format("assign: unknown workload '{}'", key));
      CheckAssign(value, *state);
    }
    for (const Value& w : workloads) LoadWorkload(w, assign, *state, sc);
    if (snapshot_)
      AddSnapshotJobs(config ? *config : *snapshot_at_, *state, sc.engine, sc.workload);

    if (const Value* f = root.Find("failures")) {
      Map fm(*f, {"mtbf", "repair"});
      const Millis mtbf = fm.Get("mtbf").Duration();
      const Millis repair = fm.Get("repair").Duration();
      if (mtbf <= 0) fm.Get("mtbf").Fail("must be above 0");
      if (out_.options.horizon <= 0) f->Fail("random failures need a horizon");
      sc.workload.outages =
          sim::RandomOutages(state->node_count(), mtbf, repair, out_.seed, out_.options.horizon);
    }
    if (const Value* o = root.Find("outages")) {
      for (const Value& item : o->Items()) {
        Map om(item, {"node", "at", "duration"});
        const std::string node = om.Get("node").NonEmptyString();
        std::optional<NodeId> id = state->FindNode(node);
        if (!id) om.Get("node").Fail(fmt::format("unknown node '{}'", node));
        sc.workload.outages.push_back(
            sim::NodeOutage{*id, om.Get("at").Duration(), om.Get("duration").Duration()});
      }
    }
    out_.configurations.push_back(std::move(sc));
  }

  // An assign entry's queue and class, checked here so that errors name the assign: merged into
  // the job template, they would be reported under the workload's `job`.
  static void CheckAssign(const Value& value, const ClusterState& state) {
    Map am(value, {"queue", "priority_class"});
    if (const Value* v = am.Find("queue")) {
      const std::string queue = v->NonEmptyString();
      std::vector<std::string> leaves;
      for (QueueId q = 0; q < state.queue_count(); ++q) {
        if (state.queue(q).children.empty()) leaves.push_back(state.queue(q).spec.name);
      }
      std::optional<QueueId> id = state.FindQueue(queue);
      if (!id || !state.queue(*id).children.empty()) {
        v->Fail(internal::UnknownName("leaf queue", queue, leaves));
      }
    }
    if (const Value* v = am.Find("priority_class")) {
      const std::string name = v->NonEmptyString();
      std::vector<std::string> classes;
      for (PriorityClassId c = 0; c < state.priority_class_count(); ++c) {
        classes.push_back(state.priority_class(c).name);
      }
      if (!state.FindPriorityClass(name)) {
        v->Fail(internal::UnknownName("priority class", name, classes));
      }
    }
  }

  // The job template of a workload with the configuration's assignment of queue and class.
  // `required`: the workload is a generator or service, whose jobs all take the template's queue.
  // A trace's template may leave the queue out when the trace's `queues` map gives every job
  // one; `queue_given` says whether it did not.
  // `bare_memory` receives the template's memory fields written as bare numbers.
  Job Template(const Value& w, const Map& wm, const std::map<std::string, Value>& assign,
               const ClusterState& state, bool required, std::vector<BareMemory>* bare_memory,
               bool* queue_given = nullptr) {
    const std::string name = wm.Get("name").String();
    std::vector<std::pair<std::string, YAML::Node>> overrides;
    auto it = assign.find(name);
    if (it == assign.end()) it = assign.find("*");
    if (it != assign.end()) {
      Map am(it->second, {"queue", "priority_class"});
      for (std::string_view key : {"queue", "priority_class"}) {
        if (const Value* v = am.Find(key)) overrides.emplace_back(std::string(key), v->node());
      }
    }
    const Value* job = wm.Find("job");
    if (!job && required) w.Fail("missing required field 'job'");
    const Value base = job ? *job : w;
    const Value merged = base.WithNode(Merge(job ? job->node() : YAML::Node(), overrides));
    Map check(merged, {"user", "queue", "priority_class", "checkpoint_interval", "restart_overhead",
                       "gpu_types", "topology", "node_selector", "tolerations", "labels",
                       "affinity", "groups", "tasks", "gpus", "gpu_memory", "cpu", "memory"});
    if (queue_given) *queue_given = check.Has("queue");
    if (!check.Has("queue") && required) {
      base.Fail(
          fmt::format("no queue for workload '{}': give job.queue or the configuration's "
                      "assign",
                      name));
    }
    if (!check.Has("priority_class")) {
      base.Fail(
          fmt::format("no priority class for workload '{}': give job.priority_class or the "
                      "configuration's assign",
                      name));
    }
    if (!check.Has("queue")) {
      // A placeholder for the loader; every job's queue comes from the trace (checked per job).
      for (QueueId q = 0; q < state.queue_count(); ++q) {
        if (state.queue(q).children.empty()) {
          YAML::Node any(state.queue(q).spec.name);
          return internal::LoadJobTemplate(merged.WithNode(Merge(merged.node(), {{"queue", any}})),
                                           state, bare_memory);
        }
      }
    }
    return internal::LoadJobTemplate(merged, state, bare_memory);
  }

  static sim::WorkKind Kind(const Value& v) {
    switch (v.Choice({"training", "batch", "inference"})) {
      case 0:
        return sim::WorkKind::kTraining;
      case 1:
        return sim::WorkKind::kBatch;
      default:
        return sim::WorkKind::kInference;
    }
  }

  void LoadWorkload(const Value& w, const std::map<std::string, Value>& assign,
                    const ClusterState& state, SimConfiguration& sc) {
    sim::Workload& out = sc.workload;
    std::vector<BareMemory>* bare = &sc.bare_memory;
    Map m(w, kWorkloadFields);
    const std::string name = m.Get("name").String();
    sim::WorkKind kind = sim::WorkKind::kBatch;
    if (const Value* k = m.Find("kind")) kind = Kind(*k);
    const Millis checkpoint_cost =
        m.Has("checkpoint_cost") ? m.Get("checkpoint_cost").Duration() : 0;
    double estimate_factor = 1;
    if (const Value* v = m.Find("estimate_factor")) estimate_factor = v->Number(0);

    if (kind == sim::WorkKind::kInference) {
      for (std::string_view f : {"arrivals", "work", "gpus", "trace", "checkpoint_cost"}) {
        if (m.Has(f)) m.Key(f).Fail("not a field of an inference workload (it has a service)");
      }
      if (out_.options.horizon <= 0) m.Get("service").Fail("an inference service needs a horizon");
      sim::InferenceService s = LoadService(m.Get("service"));
      s.name = name;
      s.replica = Template(w, m, assign, state, true, bare);
      if (s.replica.groups.size() != 1 || s.replica.groups[0].count != 1) {
        m.Get("job").Fail("a replica is one task: give tasks: 1 and no groups");
      }
      out.services.push_back(std::move(s));
      return;
    }
    if (m.Has("service")) m.Key("service").Fail("only inference workloads have a service");

    if (const Value* t = m.Find("trace")) {
      for (std::string_view f : {"arrivals", "work", "gpus"}) {
        if (m.Has(f)) m.Key(f).Fail("not a field of a trace workload (the trace gives it)");
      }
      bool queue_given = false;
      Job base = Template(w, m, assign, state, false, bare, &queue_given);
      LoadTrace(*t, name, kind, base, queue_given, Assigns(name, assign, "queue"),
                Assigns(name, assign, "priority_class"), checkpoint_cost, estimate_factor, state,
                out);
      return;
    }

    sim::Generator g;
    g.name = name;
    g.kind = kind;
    g.job = Template(w, m, assign, state, true, bare);
    g.arrivals = LoadArrivals(m.Get("arrivals"));
    g.work = LoadDist(m.Get("work"), true);
    if (const Value* v = m.Find("gpus")) {
      g.gpus = LoadDist(*v, false);
      g.gpus_set = true;
      // The draw replaces the GPUs of the groups that ask for some: without any, it would be lost.
      bool any = false;
      for (const TaskGroup& group : g.job.groups) any |= group.request.gpu.value() > 0;
      if (!any) v->Fail("the job template asks for no GPUs to replace: give job.gpus");
      // Every draw must be a GPU count: whole GPUs from 1, or a share of one GPU above 0.
      const sim::Dist& d = g.gpus;
      bool positive = true;
      switch (d.kind) {
        case sim::Dist::Kind::kConstant:
        case sim::Dist::Kind::kUniform:
          positive = d.a > 0;
          break;
        case sim::Dist::Kind::kChoice:
          for (double x : d.values) positive = positive && x > 0;
          break;
        default:  // exponential and lognormal draws are positive
          positive = d.a > 0;
          break;
      }
      if (!positive) v->Fail("every draw must be above 0 GPUs");
    }
    g.checkpoint_cost = checkpoint_cost;
    g.estimate_factor = estimate_factor;
    if (g.arrivals.count == 0 && g.arrivals.until == 0 && out_.options.horizon <= 0 &&
        g.arrivals.kind != sim::Arrivals::Kind::kAt) {
      m.Get("arrivals").Fail("without a horizon, give count or until");
    }
    std::vector<sim::SimJob> jobs = sim::Generate(g, out_.seed, out_.options.horizon);
    for (sim::SimJob& j : jobs) out.jobs.push_back(std::move(j));
  }

  // Whether the configuration's assign gives the workload's `field` (queue or priority_class).
  static bool Assigns(const std::string& name, const std::map<std::string, Value>& assign,
                      const char* field) {
    auto it = assign.find(name);
    if (it == assign.end()) it = assign.find("*");
    return it != assign.end() && it->second.node().IsMap() && it->second.node()[field];
  }

  // A trace's jobs. Their queue: the configuration's assign when it gives one (every job there);
  // else the trace's queue through `queues`, or as named when it is a leaf queue; else the
  // template's. Their class: the assign's when it gives one; else the row's when the
  // configuration has it; else the template's.
  void LoadTrace(const Value& t, const std::string& name, sim::WorkKind kind, const Job& base,
                 bool queue_given, bool assigned, bool class_assigned, Millis checkpoint_cost,
                 double estimate_factor, const ClusterState& state, sim::Workload& out) {
    Map m(t, {"file", "format", "skip_bad_rows", "limit", "queues", "split", "processors_per_gpu"});
    std::string file = m.Get("file").NonEmptyString();
    std::filesystem::path path(file);
    if (path.is_relative()) path = std::filesystem::path(base_dir_) / path;
    std::string format;
    if (const Value* v = m.Find("format")) {
      format = v->String();
      if (!trace::ParseFormat(format).ok()) v->Fail(trace::ParseFormat(format).status().message());
    }
    trace::ReadOptions read_options;
    if (const Value* v = m.Find("split")) {
      Result<trace::TaskSplit> split = trace::ParseTaskSplit(v->String());
      if (!split.ok()) v->Fail(split.status().message());
      read_options.split = *split;
    }
    if (const Value* v = m.Find("processors_per_gpu")) {
      read_options.processors_per_gpu = v->Int(1, 1'000'000);
    }
    bool skip = false;
    if (const Value* v = m.Find("skip_bad_rows")) skip = v->Bool();
    std::int64_t limit = 0;
    if (const Value* v = m.Find("limit")) limit = v->Int(0, INT64_MAX);
    std::map<std::string, QueueId> queue_map;
    if (const Value* v = m.Find("queues"); v && !assigned) {
      for (const Entry& e : Entries(*v)) {
        const std::string queue = e.value.NonEmptyString();
        std::optional<QueueId> id = state.FindQueue(queue);
        if (!id || !state.queue(*id).children.empty()) {
          e.value.Fail(fmt::format("unknown leaf queue '{}'", queue));
        }
        queue_map[e.key] = *id;
      }
    }

    // The trace is read once, and its skipped rows recorded once, for all configurations and
    // workloads that replay it; whether bad rows fail is each workload's choice.
    const std::string key =
        fmt::format("{}|{}|{}|{}", path.string(), format, trace::TaskSplitName(read_options.split),
                    read_options.processors_per_gpu);
    auto cached = traces_.find(key);
    const bool first_read = cached == traces_.end();
    if (first_read) {
      Result<trace::Trace> read = trace::ReadTraceFile(path.string(), format, read_options);
      if (!read.ok()) m.Get("file").Fail(read.status().message());
      cached = traces_.emplace(key, std::make_shared<trace::Trace>(std::move(*read))).first;
    }
    const trace::Trace& tr = *cached->second;
    if (tr.bad_row_count > 0 && !skip) {
      std::string first;
      for (const std::string& line : trace::DescribeBadRows(tr, file)) first += "\n  " + line;
      m.Get("file").Fail(fmt::format("{} bad rows (set skip_bad_rows: true to skip them):{}",
                                     tr.bad_row_count, first));
    }
    if (first_read) {
      for (const std::string& line : trace::DescribeBadRows(tr, file)) {
        out_.skipped_rows.push_back(line);
      }
      for (const std::string& line : trace::DescribeSkipped(tr, file)) {
        out_.skipped_rows.push_back(line);
      }
    }
    std::int64_t taken = 0;
    for (const trace::TraceJob& tj : tr.jobs) {
      if (limit > 0 && taken >= limit) break;
      if (out_.options.horizon > 0 && tj.submit >= out_.options.horizon) break;
      sim::SimJob j;
      j.job = base;
      j.job.name = tj.name;
      j.job.user = tj.user.empty() ? base.user : tj.user;
      j.job.submit_time = tj.submit;
      if (!assigned && (!tj.queue.empty() || !queue_map.empty())) {
        auto q = queue_map.find(tj.queue);
        if (q == queue_map.end()) q = queue_map.find("*");
        if (q != queue_map.end()) {
          j.job.queue = q->second;
        } else if (std::optional<QueueId> id = state.FindQueue(tj.queue);
                   id && state.queue(*id).children.empty()) {
          j.job.queue = *id;
        } else if (!queue_given) {
          m.Get("file").Fail(
              fmt::format("{}:{}: trace queue '{}' is not mapped to a queue: add it (or \"*\") to "
                          "trace.queues, or give job.queue",
                          file, tj.line, tj.queue));
        }
      } else if (!assigned && !queue_given) {
        m.Get("file").Fail(fmt::format(
            "{}:{}: the row has no queue: give job.queue or \"*\" in trace.queues", file, tj.line));
      }
      if (!class_assigned && !tj.priority_class.empty()) {
        if (std::optional<PriorityClassId> c = state.FindPriorityClass(tj.priority_class)) {
          j.job.priority_class = *c;
        }
      }
      j.job.groups.assign(1, TaskGroup{});
      TaskGroup& g = j.job.groups[0];
      g.name = "main";
      g.count = tj.tasks;
      g.request = base.groups.empty() ? TaskRequest{} : base.groups[0].request;
      g.request.gpu = tj.gpu_per_task;
      if (tj.cpu_per_task.value() > 0) g.request.cpu = tj.cpu_per_task;
      if (tj.memory_per_task.value() > 0) g.request.memory = tj.memory_per_task;
      if (!tj.gpu_models.empty()) {
        j.job.gpu_types = GpuTypeSet{};
        for (const std::string& model : tj.gpu_models) {
          if (std::optional<GpuTypeId> type = state.FindGpuType(model)) j.job.gpu_types.Add(*type);
        }
        if (j.job.gpu_types.empty()) {
          // The nodes, hence the GPU models, are the same in every configuration: record the
          // row once.
          if (out_.configurations.empty()) {
            out_.skipped_rows.push_back(fmt::format(
                "{}:{}: no GPU model of the cluster among the row's models", file, tj.line));
          }
          continue;
        }
      }
      if (tj.checkpoint_interval > 0) j.job.checkpoint_interval = tj.checkpoint_interval;
      j.kind = kind;
      if (tj.kind == "training") j.kind = sim::WorkKind::kTraining;
      if (tj.kind == "batch") j.kind = sim::WorkKind::kBatch;
      j.workload = name;
      j.work = std::max<Millis>(1, tj.duration);
      j.checkpoint_cost = checkpoint_cost;
      j.job.runtime_estimate =
          estimate_factor > 0 ? static_cast<Millis>(static_cast<double>(j.work) * estimate_factor)
                              : 0;
      // The row's job passes the check of every reader of jobs (job::ValidateJobSpec, its name
      // the trace's id), the template's fields with the row's: one outside it is a bad row.
      if (Status valid = job::ValidateJobSpec(job::ToSpec(j.job, state), job::Naming::kTrace);
          !valid.ok()) {
        const std::string row = fmt::format("{}:{}: {}", file, tj.line, valid.message());
        if (!skip) m.Get("file").Fail(row + " (set skip_bad_rows: true to skip such rows)");
        if (out_.configurations.empty()) out_.skipped_rows.push_back(row);
        continue;
      }
      out.jobs.push_back(std::move(j));
      ++taken;
    }
  }

  std::string base_dir_;
  std::optional<std::uint64_t> seed_override_;
  // start.snapshot: the snapshot, its file's name (the positions of its cluster's values refer to
  // it), its cluster sections, and the scenario's field that names it.
  std::optional<Snapshot> snapshot_;
  std::string snapshot_file_;
  std::optional<Value> snapshot_cluster_;
  std::optional<Value> snapshot_at_;
  std::map<std::string, std::shared_ptr<trace::Trace>> traces_;
  std::vector<BareMemory> cluster_bare_memory_;  // of `cluster` alone, for every configuration
  Scenario out_;
};

}  // namespace

Result<Scenario> ParseScenario(std::string_view yaml, const std::string& file_name,
                               const std::string& base_dir, std::optional<std::uint64_t> seed) {
  return internal::LoadDocument<Scenario>(yaml, file_name, [&](const Value& root) {
    return ScenarioLoader(base_dir, seed).Load(root);
  });
}

Result<Scenario> LoadScenarioFile(const std::string& path, std::optional<std::uint64_t> seed) {
  Result<std::string> text = internal::ReadFile(path);
  if (!text.ok()) return text.status();
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return ParseScenario(*text, path, dir.empty() ? "." : dir, seed);
}

}  // namespace arbiter::config
