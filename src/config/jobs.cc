// The jobs file: pending jobs, their names resolved against a ClusterState.

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.h"
#include "config/loaders.h"
#include "config/reader.h"

namespace arbiter::config {
namespace {

using internal::Map;
using internal::UnknownName;
using internal::Value;

// Bounds that keep a typo from exhausting memory.
constexpr std::int64_t kMaxTasksPerGroup = 1 << 20;
constexpr std::int64_t kMaxReplicas = 1 << 16;

// The fields of a job entry, in the order an unknown-field error lists them.
constexpr std::string_view kJobFields[] = {
    // Identity and times.
    "name", "user", "queue", "priority_class", "submit_time", "runtime_estimate",
    "checkpoint_interval", "restart_overhead",
    // Placement constraints.
    "gpu_types", "topology", "node_selector", "tolerations", "labels", "affinity",
    // Shape.
    "replicas", "groups", "tasks", "gpus", "gpu_memory", "cpu", "memory"};
// The fields of a job template of a simulator workload: the generator gives name, submit time,
// runtime estimate and the number of jobs.
constexpr std::string_view kTemplateFields[] = {
    "user", "queue", "priority_class", "checkpoint_interval", "restart_overhead", "gpu_types",
    "topology", "node_selector", "tolerations", "labels", "affinity", "groups", "tasks", "gpus",
    "gpu_memory", "cpu", "memory"};
// The per-task fields, shared by the one-group shorthand and each entry of `groups`.
constexpr std::string_view kTaskFields[] = {"tasks", "gpus", "gpu_memory", "cpu", "memory"};

class JobsLoader {
 public:
  JobsLoader(const ClusterState& state, JobId first_id) : state_(state), next_id_(first_id) {
    for (QueueId q = 0; q < state.queue_count(); ++q) queues_.push_back(state.queue(q).spec.name);
    for (PriorityClassId c = 0; c < state.priority_class_count(); ++c) {
      classes_.push_back(state.priority_class(c).name);
    }
    for (GpuTypeId t = 0; t < state.gpu_type_count(); ++t) {
      gpu_types_.push_back(state.gpu_type_name(t));
    }
  }

  std::vector<Job> Load(const Value& root) {
    if (!root.node().IsMap()) root.Fail("expected a mapping with the field 'jobs'");
    Map m(root, {"jobs"});
    for (const Value& item : m.Get("jobs").Items()) LoadJob(item);
    return std::move(jobs_);
  }

  // One entry as a template: no name, submit time, estimate or replicas.
  Job LoadTemplate(const Value& item) const {
    Map m(item, kTemplateFields);
    return ReadJob(m);
  }

 private:
  void LoadJob(const Value& item) {
    Map m(item, kJobFields);
    m.Get("name");
    Job job = ReadJob(m);
    std::int64_t replicas = 1;
    if (const Value* v = m.Find("replicas")) replicas = v->Int(1, kMaxReplicas);
    for (std::int64_t r = 0; r < replicas; ++r) {
      Job copy = job;
      copy.id = next_id_++;
      if (replicas > 1) copy.name = fmt::format("{}-{}", job.name, r);
      jobs_.push_back(std::move(copy));
    }
  }

  // A job from the fields of `m`; name, times and estimate only when present.
  Job ReadJob(const Map& m) const {
    Job job;
    if (const Value* v = m.Find("name")) job.name = v->NonEmptyString();
    if (const Value* v = m.Find("user")) job.user = v->String();
    job.queue = Resolve(m.Get("queue"), "queue", queues_, &ClusterState::FindQueue);
    if (!state_.queue(job.queue).children.empty()) {
      // The engine takes jobs only in leaf queues; a parent's quota is its children's.
      std::vector<std::string> leaves;
      for (QueueId q = 0; q < state_.queue_count(); ++q) {
        if (state_.queue(q).children.empty()) leaves.push_back(queues_[q]);
      }
      m.Get("queue").Fail(fmt::format("queue '{}' has child queues; jobs go to leaf queues ({})",
                                      queues_[job.queue], fmt::join(leaves, ", ")));
    }
    job.priority_class = Resolve(m.Get("priority_class"), "priority class", classes_,
                                 &ClusterState::FindPriorityClass);
    if (const Value* v = m.Find("submit_time")) job.submit_time = v->Duration();
    if (const Value* v = m.Find("runtime_estimate")) job.runtime_estimate = v->Duration();
    if (const Value* v = m.Find("checkpoint_interval")) job.checkpoint_interval = v->Duration();
    if (const Value* v = m.Find("restart_overhead")) job.restart_overhead = v->Duration();
    if (const Value* v = m.Find("gpu_types")) {
      for (const Value& t : v->Items()) {
        job.gpu_types.Add(Resolve(t, "GPU type", gpu_types_, &ClusterState::FindGpuType));
      }
    }
    if (const Value* v = m.Find("topology")) {
      Map t(*v, {"level", "mode"});
      job.topology.level = Level(t.Get("level"));
      job.topology.mode = ConstraintMode::kRequired;
      if (const Value* mode = t.Find("mode")) {
        job.topology.mode = mode->Choice({"required", "preferred"}) == 0
                                ? ConstraintMode::kRequired
                                : ConstraintMode::kPreferred;
      }
    }
    if (const Value* v = m.Find("node_selector")) job.node_selector = v->StringMap();
    if (const Value* v = m.Find("tolerations")) {
      for (const Value& t : v->Items()) job.tolerations.push_back(LoadToleration(t));
    }
    if (const Value* v = m.Find("labels")) job.labels = v->StringMap();
    if (const Value* v = m.Find("affinity")) {
      for (const Value& a : v->Items()) job.affinity.push_back(LoadAffinity(a));
    }

    if (const Value* groups = m.Find("groups")) {
      for (std::string_view field : kTaskFields) {
        if (m.Has(field)) {
          m.Key(field).Fail("not allowed together with 'groups'; give it in each group");
        }
      }
      std::vector<Value> items = groups->Items();
      if (items.empty()) groups->Fail("list at least one group, or leave 'groups' out");
      std::set<std::string> names;
      for (const Value& g : items) {
        Map gm(g, {"name", "tasks", "gpus", "gpu_memory", "cpu", "memory"});
        TaskGroup group = LoadGroup(gm);
        group.name = fmt::format("group-{}", job.groups.size());
        if (const Value* name = gm.Find("name")) {
          group.name = name->NonEmptyString();
          if (!names.insert(group.name).second) {
            name->Fail(fmt::format("duplicate group name '{}'", group.name));
          }
        }
        job.groups.push_back(std::move(group));
      }
    } else {
      TaskGroup group = LoadGroup(m);
      group.name = "main";
      job.groups.push_back(std::move(group));
    }

    return job;
  }

  // Reads the per-task fields of one group from `m` (the job itself, or one entry of `groups`).
  static TaskGroup LoadGroup(const Map& m) {
    TaskGroup group;
    if (const Value* v = m.Find("tasks")) {
      group.count = static_cast<std::int32_t>(v->Int(1, kMaxTasksPerGroup));
    }
    TaskRequest& r = group.request;
    if (const Value* v = m.Find("gpus")) {
      r.gpu = v->Gpus();
      if (r.gpu.value() > kMilliPerGpu && r.gpu.value() % kMilliPerGpu != 0) {
        v->Fail(
            fmt::format("above 1 GPU must be a whole number (a task takes a share of one GPU or "
                        "whole GPUs), got {}",
                        v->String()));
      }
    }
    if (const Value* v = m.Find("gpu_memory")) {
      r.gpu_memory = GpuMemMiB(v->MiB());
      if (r.gpu_memory.value() > 0 && r.gpu.value() == 0) {
        v->Fail("needs 'gpus': GPU memory is asked per device of a task with GPUs");
      }
    }
    if (const Value* v = m.Find("cpu")) r.cpu = v->Cpu();
    if (const Value* v = m.Find("memory")) r.memory = MemMiB(v->MiB());
    return group;
  }

  template <typename Id>
  Id Resolve(const Value& v, std::string_view what, const std::vector<std::string>& known,
             std::optional<Id> (ClusterState::*find)(const std::string&) const) const {
    std::string name = v.NonEmptyString();
    std::optional<Id> id = (state_.*find)(name);
    if (!id) v.Fail(UnknownName(what, name, known));
    return *id;
  }

  int Level(const Value& v) const {
    std::string name = v.NonEmptyString();
    int level = state_.topology().LevelIndex(name);
    if (level < 0) v.Fail(UnknownName("topology level", name, state_.topology().levels));
    return level;
  }

  static Toleration LoadToleration(const Value& value) {
    Map m(value, {"key", "operator", "value", "effect"});
    Toleration t;
    if (const Value* v = m.Find("key")) t.key = v->String();
    if (const Value* v = m.Find("operator")) {
      t.op = v->Choice({"Equal", "Exists"}) == 0 ? Toleration::Op::kEqual : Toleration::Op::kExists;
    }
    if (const Value* v = m.Find("value")) {
      t.value = v->String();
      if (t.op == Toleration::Op::kExists && !t.value.empty()) {
        v->Fail("operator Exists matches any value; leave 'value' out");
      }
    }
    if (t.op == Toleration::Op::kEqual && t.key.empty()) {
      value.Fail("operator Equal needs a 'key' (an empty key with operator Exists tolerates all)");
    }
    if (const Value* v = m.Find("effect")) {
      t.effect = v->Choice({"NoSchedule", "PreferNoSchedule"}) == 0
                     ? TaintEffect::kNoSchedule
                     : TaintEffect::kPreferNoSchedule;
    }
    return t;
  }

  AffinityTerm LoadAffinity(const Value& value) const {
    Map m(value, {"match", "level", "anti", "required"});
    AffinityTerm a;
    const Value& match = m.Get("match");
    a.match = match.StringMap();
    if (a.match.empty()) match.Fail("give at least one label to match");
    a.level = state_.topology().node_level();
    if (const Value* v = m.Find("level")) a.level = Level(*v);
    if (const Value* v = m.Find("anti")) a.anti = v->Bool();
    if (const Value* v = m.Find("required")) a.required = v->Bool();
    return a;
  }

  const ClusterState& state_;
  JobId next_id_;
  std::vector<std::string> queues_;
  std::vector<std::string> classes_;
  std::vector<std::string> gpu_types_;
  std::vector<Job> jobs_;
};

}  // namespace

namespace internal {
Job LoadJobTemplate(const Value& item, const ClusterState& state) {
  return JobsLoader(state, 0).LoadTemplate(item);
}
}  // namespace internal

Result<std::vector<Job>> ParseJobs(std::string_view yaml, const std::string& file_name,
                                   const ClusterState& state, JobId first_id) {
  return internal::LoadDocument<std::vector<Job>>(
      yaml, file_name, [&](const Value& root) { return JobsLoader(state, first_id).Load(root); });
}

Result<std::vector<Job>> LoadJobsFile(const std::string& path, const ClusterState& state,
                                      JobId first_id) {
  Result<std::string> text = internal::ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseJobs(*text, path, state, first_id);
}

}  // namespace arbiter::config
