// The YAML reader of jobs: jobs files (`arbiter plan`, `lint`), `arbiter submit -f` and the job
// templates of scenarios' workloads. Every one goes the same way as a job of the server's API:
//
//   YAML -> job::JobSpec (this reader) -> job::ValidateJobSpec (the limits of
//   job/limits.h) -> job::ToJob (names resolved against the cluster)
//
// The reader checks only the syntax (types, fields, quantities); the checks of values and names
// are the validator's and the resolver's, whose errors name the spec's field path
// ("groups[0].gpu_milli"). The reader remembers where each field of the spec was written, so such
// an error is reported at its line with the path as the file wrote it ("jobs[3].gpus").

#include <fmt/format.h>

#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.h"
#include "config/loaders.h"
#include "config/reader.h"
#include "job/limits.h"
#include "job/resolve.h"

namespace arbiter::config {
namespace {

using internal::Map;
using internal::Value;

// The fields of a job entry, in the order an unknown-field error lists them.
constexpr std::string_view kJobFields[] = {
    // Identity and times.
    "name", "user", "queue", "priority_class", "submit_time", "runtime_estimate",
    "checkpoint_interval", "restart_overhead",
    // Placement constraints.
    "gpu_types", "topology", "node_selector", "tolerations", "labels", "affinity",
    // Shape.
    "replicas", "groups", "tasks", "gpus", "gpu_memory", "cpu", "memory",
    // What each task runs (node agents; `arbiter plan` ignores them), and retries.
    "argv", "command", "env", "max_retries", "idempotency_key"};
// The fields of a job template of a simulator workload: the generator gives name, submit time,
// runtime estimate and the number of jobs; nothing runs.
constexpr std::string_view kTemplateFields[] = {"user",
                                                "queue",
                                                "priority_class",
                                                "checkpoint_interval",
                                                "restart_overhead",
                                                "gpu_types",
                                                "topology",
                                                "node_selector",
                                                "tolerations",
                                                "labels",
                                                "affinity",
                                                "groups",
                                                "tasks",
                                                "gpus",
                                                "gpu_memory",
                                                "cpu",
                                                "memory"};
// The per-task fields, shared by the one-group shorthand and each entry of `groups`.
constexpr std::string_view kTaskFields[] = {"tasks", "gpus", "gpu_memory", "cpu", "memory"};

// One job as read: its spec, its `replicas`, and where each field of the spec was written.
class JobEntry {
 public:
  explicit JobEntry(const Value& self) : self_(self) {}

  job::JobSpec spec;
  std::int64_t replicas = 1;
  std::vector<BareMemory> bare_memory;  // its memory fields written as bare numbers (for lint)

  // Records that the spec's field `field` ("groups[0].gpu_milli") was written at `value`.
  void Mark(std::string field, const Value& value) { marks_.emplace_back(std::move(field), value); }
  const Value* Find(std::string_view field) const {
    for (const auto& [f, v] : marks_) {
      if (f == field) return &v;
    }
    return nullptr;
  }

  // Throws the error of a validator or resolver at the position of its field: the longest field
  // path recorded that is the error's field or encloses it, else the job itself.
  [[noreturn]] void Fail(const Status& status) const {
    const std::string& field = status.field();
    const std::pair<std::string, Value>* best = nullptr;
    for (const auto& mark : marks_) {
      const std::string& f = mark.first;
      const bool encloses =
          field.size() == f.size() ||
          (field.size() > f.size() && (field[f.size()] == '.' || field[f.size()] == '['));
      if (field.compare(0, f.size(), f) == 0 && encloses &&
          (best == nullptr || f.size() > best->first.size())) {
        best = &mark;
      }
    }
    if (best != nullptr) {
      best->second.FailAt(std::string_view(field).substr(best->first.size()), status.detail(),
                          status.code());
    }
    self_.FailAt(field.empty() ? "" : "." + field, status.detail(), status.code());
  }

  // Validates the spec (job::ValidateJobSpec); a missing required field is reported as such.
  void Validate() const {
    for (const auto& [field, value] :
         {std::pair<const char*, const std::string*>{"name", &spec.name},
          {"queue", &spec.queue},
          {"priority_class", &spec.priority_class}}) {
      if (value->empty() && Find(field) == nullptr) {
        self_.Fail(fmt::format("missing required field '{}'", field));
      }
    }
    if (Status s = job::ValidateJobSpec(spec); !s.ok()) Fail(s);
    // Replicas are named NAME-R (and `submit -f` keys them KEY-R): the longest suffix must keep
    // them within the limits too, or the server would refuse what the file reader accepted.
    if (replicas > 1) {
      job::JobSpec last = spec;
      last.name = fmt::format("{}-{}", spec.name, replicas - 1);
      if (!last.idempotency_key.empty()) {
        last.idempotency_key = fmt::format("{}-{}", spec.idempotency_key, replicas - 1);
      }
      if (Status s = job::ValidateJobSpec(last); !s.ok()) {
        Fail(Status::InvalidArgument(
            fmt::format("{} (with the replica suffix '-{}' of replicas: {})", s.detail(),
                        replicas - 1, replicas),
            s.field()));
      }
    }
  }

  // The job with its names resolved against `state` (job::ToJob).
  Job Resolve(JobId id, const ClusterState& state) const {
    Result<Job> job = job::ToJob(id, spec, state);
    if (!job.ok()) Fail(job.status());
    return std::move(job).value();
  }

  const Value& self() const { return self_; }

 private:
  Value self_;
  std::vector<std::pair<std::string, Value>> marks_;
};

// Reads the per-task fields of one group from `m` (the job itself, or one entry of `groups`) into
// `group`, marking them under `path` ("groups[0]").
void ReadGroup(const Map& m, const std::string& path, TaskGroup& group, JobEntry& entry) {
  if (const Value* v = m.Find("tasks")) {
    // The range is the validator's; here only what fits the field.
    group.count = static_cast<std::int32_t>(
        v->Int(std::numeric_limits<std::int32_t>::min(), std::numeric_limits<std::int32_t>::max()));
    entry.Mark(path + ".tasks", *v);
  }
  TaskRequest& r = group.request;
  if (const Value* v = m.Find("gpus")) {
    r.gpu = v->Gpus();
    entry.Mark(path + ".gpu_milli", *v);
  }
  if (const Value* v = m.Find("gpu_memory")) {
    r.gpu_memory =
        GpuMemMiB(internal::MemoryMiB(*v, BareMemory::Kind::kTaskGpu, &entry.bare_memory));
    entry.Mark(path + ".gpu_memory_mib", *v);
  }
  if (const Value* v = m.Find("cpu")) {
    r.cpu = v->Cpu();
    entry.Mark(path + ".cpu_milli", *v);
  }
  if (const Value* v = m.Find("memory")) {
    r.memory = MemMiB(internal::MemoryMiB(*v, BareMemory::Kind::kTask, &entry.bare_memory));
    entry.Mark(path + ".memory_mib", *v);
  }
}

Toleration ReadToleration(const Value& value, const std::string& path, JobEntry& entry) {
  Map m(value, {"key", "operator", "value", "effect"});
  entry.Mark(path, value);
  Toleration t;
  if (const Value* v = m.Find("key")) {
    t.key = v->String();
    entry.Mark(path + ".key", *v);
  }
  if (const Value* v = m.Find("operator")) {
    t.op = v->Choice({"Equal", "Exists"}) == 0 ? Toleration::Op::kEqual : Toleration::Op::kExists;
  }
  if (const Value* v = m.Find("value")) {
    t.value = v->String();
    entry.Mark(path + ".value", *v);
  }
  if (const Value* v = m.Find("effect")) {
    t.effect = v->Choice({"NoSchedule", "PreferNoSchedule"}) == 0 ? TaintEffect::kNoSchedule
                                                                  : TaintEffect::kPreferNoSchedule;
  }
  return t;
}

job::AffinitySpec ReadAffinity(const Value& value, const std::string& path, JobEntry& entry) {
  Map m(value, {"match", "level", "anti", "required"});
  entry.Mark(path, value);
  job::AffinitySpec a;
  const Value& match = m.Get("match");
  a.match = match.StringMap();
  entry.Mark(path + ".match", match);
  if (const Value* v = m.Find("level")) {
    a.level = v->NonEmptyString();
    entry.Mark(path + ".level", *v);
  }
  if (const Value* v = m.Find("anti")) a.anti = v->Bool();
  if (const Value* v = m.Find("required")) a.required = v->Bool();
  return a;
}

// Reads the fields of `m` into `entry.spec` (and `entry.replicas`). `read_time`, when given, reads
// `submit_time` (a snapshot's times); else it is a duration.
void ReadJob(const Map& m, JobEntry& entry,
             const std::function<Millis(const Value&)>& read_time = nullptr) {
  job::JobSpec& s = entry.spec;
  auto text = [&](std::string_view field, std::string& out) {
    if (const Value* v = m.Find(field)) {
      out = v->String();
      entry.Mark(std::string(field), *v);
    }
  };
  auto duration = [&](std::string_view field, Millis& out) {
    if (const Value* v = m.Find(field)) {
      out = v->Duration();
      entry.Mark(fmt::format("{}_ms", field), *v);
    }
  };
  text("name", s.name);
  text("user", s.user);
  text("queue", s.queue);
  text("priority_class", s.priority_class);
  if (const Value* v = m.Find("submit_time"); v != nullptr && read_time) {
    s.submit_time = read_time(*v);
    entry.Mark("submit_time_ms", *v);
  } else {
    duration("submit_time", s.submit_time);
  }
  duration("runtime_estimate", s.runtime_estimate);
  duration("checkpoint_interval", s.checkpoint_interval);
  duration("restart_overhead", s.restart_overhead);
  if (const Value* v = m.Find("gpu_types")) {
    entry.Mark("gpu_types", *v);
    for (const Value& t : v->Items()) {
      entry.Mark(fmt::format("gpu_types[{}]", s.gpu_types.size()), t);
      s.gpu_types.push_back(t.String());
    }
  }
  if (const Value* v = m.Find("topology")) {
    Map t(*v, {"level", "mode"});
    entry.Mark("topology", *v);
    const Value& level = t.Get("level");
    s.topology_level = level.NonEmptyString();
    entry.Mark("topology.level", level);
    s.topology_mode = ConstraintMode::kRequired;
    if (const Value* mode = t.Find("mode")) {
      s.topology_mode = mode->Choice({"required", "preferred"}) == 0 ? ConstraintMode::kRequired
                                                                     : ConstraintMode::kPreferred;
      entry.Mark("topology.mode", *mode);
    }
  }
  if (const Value* v = m.Find("node_selector")) {
    s.node_selector = v->StringMap();
    entry.Mark("node_selector", *v);
  }
  if (const Value* v = m.Find("tolerations")) {
    entry.Mark("tolerations", *v);
    for (const Value& t : v->Items()) {
      s.tolerations.push_back(
          ReadToleration(t, fmt::format("tolerations[{}]", s.tolerations.size()), entry));
    }
  }
  if (const Value* v = m.Find("labels")) {
    s.labels = v->StringMap();
    entry.Mark("labels", *v);
  }
  if (const Value* v = m.Find("affinity")) {
    entry.Mark("affinity", *v);
    for (const Value& a : v->Items()) {
      s.affinity.push_back(ReadAffinity(a, fmt::format("affinity[{}]", s.affinity.size()), entry));
    }
  }
  if (const Value* v = m.Find("replicas")) entry.replicas = v->Int(1, limits::kMaxReplicas);
  if (const Value* v = m.Find("argv")) {
    entry.Mark("argv", *v);
    for (const Value& a : v->Items()) {
      entry.Mark(fmt::format("argv[{}]", s.argv.size()), a);
      s.argv.push_back(a.String());
    }
  }
  text("command", s.command);
  if (const Value* v = m.Find("env")) {
    s.env = v->StringMap();
    entry.Mark("env", *v);
  }
  if (const Value* v = m.Find("max_retries")) {
    s.max_retries = v->Int32(0, limits::kMaxRetries);
    entry.Mark("max_retries", *v);
  }
  text("idempotency_key", s.idempotency_key);

  if (const Value* groups = m.Find("groups")) {
    for (std::string_view field : kTaskFields) {
      if (m.Has(field)) {
        m.Key(field).Fail("not allowed together with 'groups'; give it in each group");
      }
    }
    std::vector<Value> items = groups->Items();
    if (items.empty()) groups->Fail("list at least one group, or leave 'groups' out");
    entry.Mark("groups", *groups);
    for (std::size_t i = 0; i < items.size(); ++i) {
      Map gm(items[i], {"name", "tasks", "gpus", "gpu_memory", "cpu", "memory"});
      const std::string path = fmt::format("groups[{}]", i);
      entry.Mark(path, items[i]);
      TaskGroup& group = s.groups.emplace_back();
      group.name = limits::DefaultGroupName(i, items.size());
      if (const Value* name = gm.Find("name")) {
        group.name = name->String();
        entry.Mark(path + ".name", *name);
      }
      ReadGroup(gm, path, group, entry);
    }
  } else {
    // The shorthand: the job's own fields are its one group's.
    TaskGroup& group = s.groups.emplace_back();
    group.name = limits::DefaultGroupName(0, 1);
    entry.Mark("groups", m.self());
    entry.Mark("groups[0]", m.self());
    ReadGroup(m, "groups[0]", group, entry);
  }
}

// The entries of a document: a mapping with `jobs` (a list), or, when `single` allows it, one job
// mapping.
std::vector<JobEntry> ReadEntries(const Value& root, bool single) {
  std::vector<JobEntry> out;
  if (!root.node().IsMap()) {
    root.Fail(single ? "expected a mapping: one job, or the field 'jobs' with a list of jobs"
                     : "expected a mapping with the field 'jobs'");
  }
  if (single && !root.node()["jobs"]) {
    Map m(root, kJobFields);
    ReadJob(m, out.emplace_back(root));
    return out;
  }
  Map m(root, {"jobs"});
  for (const Value& item : m.Get("jobs").Items()) {
    Map jm(item, kJobFields);
    ReadJob(jm, out.emplace_back(item));
  }
  return out;
}

// A replica's name: the entry's, with "-R" when it has several.
std::string ReplicaName(const std::string& name, std::int64_t replicas, std::int64_t r) {
  return replicas > 1 ? fmt::format("{}-{}", name, r) : name;
}

}  // namespace

namespace internal {
Job LoadJobTemplate(const Value& item, const ClusterState& state,
                    std::vector<BareMemory>* bare_memory) {
  Map m(item, kTemplateFields);
  JobEntry entry(item);
  ReadJob(m, entry);
  if (bare_memory != nullptr) {
    bare_memory->insert(bare_memory->end(), entry.bare_memory.begin(), entry.bare_memory.end());
  }
  // The generator names each job; the checks need a name.
  entry.spec.name = "template";
  entry.Validate();
  Job job = entry.Resolve(0, state);
  job.name.clear();
  return job;
}
}  // namespace internal

Job internal::LoadJobEntry(const Value& item, std::span<const std::string_view> extra,
                           const std::function<Millis(const Value&)>& read_time,
                           const ClusterState& state, JobId id, job::JobSpec& spec) {
  std::vector<std::string_view> fields;
  for (std::string_view f : kJobFields) {
    if (f != "replicas") fields.push_back(f);
  }
  fields.insert(fields.end(), extra.begin(), extra.end());
  Map m(item, fields);
  JobEntry entry(item);
  ReadJob(m, entry, read_time);
  entry.Validate();
  Job job = entry.Resolve(id, state);
  spec = std::move(entry.spec);
  return job;
}

Result<std::vector<Job>> ParseJobs(std::string_view yaml, const std::string& file_name,
                                   const ClusterState& state, JobId first_id,
                                   std::vector<BareMemory>* bare_memory) {
  return internal::LoadDocument<std::vector<Job>>(yaml, file_name, [&](const Value& root) {
    std::vector<Job> jobs;
    JobId next = first_id;
    for (const JobEntry& entry : ReadEntries(root, false)) {
      entry.Validate();
      if (bare_memory != nullptr) {
        bare_memory->insert(bare_memory->end(), entry.bare_memory.begin(), entry.bare_memory.end());
      }
      Job job = entry.Resolve(0, state);
      for (std::int64_t r = 0; r < entry.replicas; ++r) {
        Job& copy = jobs.emplace_back(job);
        copy.id = next++;
        copy.name = ReplicaName(job.name, entry.replicas, r);
      }
    }
    return jobs;
  });
}

Result<std::vector<Job>> LoadJobsFile(const std::string& path, const ClusterState& state,
                                      JobId first_id, std::vector<BareMemory>* bare_memory) {
  Result<std::string> text = internal::ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseJobs(*text, path, state, first_id, bare_memory);
}

Result<std::vector<job::JobSpec>> ParseJobSpecs(std::string_view yaml, const std::string& file_name,
                                                const std::function<void(job::JobSpec&)>& complete,
                                                std::vector<std::string>* notes) {
  return internal::LoadDocument<std::vector<job::JobSpec>>(yaml, file_name, [&](const Value& root) {
    std::vector<job::JobSpec> specs;
    for (JobEntry& entry : ReadEntries(root, true)) {
      // What the server sets itself: dropped, with a note.
      for (const auto& [field, why] :
           {std::pair<const char*, const char*>{"user",
                                                "the server records the submitter from the "
                                                "token"},
            {"submit_time_ms", "the server records the time it accepts the job"}}) {
        if (const Value* v = entry.Find(field)) {
          if (notes != nullptr) {
            notes->push_back(fmt::format("{}:{}: {}: ignored: {}", file_name, v->mark().line + 1,
                                         v->path(), why));
          }
        }
      }
      entry.spec.user.clear();
      entry.spec.submit_time = 0;
      if (complete) complete(entry.spec);
      entry.Validate();
      for (std::int64_t r = 0; r < entry.replicas; ++r) {
        job::JobSpec& copy = specs.emplace_back(entry.spec);
        copy.name = ReplicaName(entry.spec.name, entry.replicas, r);
        if (!copy.idempotency_key.empty() && entry.replicas > 1) {
          copy.idempotency_key = fmt::format("{}-{}", entry.spec.idempotency_key, r);
        }
      }
    }
    return specs;
  });
}

}  // namespace arbiter::config
