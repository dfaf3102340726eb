#include "job/spec.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <string>

#include "job/limits.h"

namespace arbiter::job {
namespace {

constexpr std::array<const char*, 6> kJobStateNames = {"pending",   "held",   "running",
                                                       "completed", "failed", "cancelled"};
bool SameToleration(const Toleration& a, const Toleration& b) {
  return a.key == b.key && a.op == b.op && a.value == b.value && a.effect == b.effect;
}
bool SameGroup(const TaskGroup& a, const TaskGroup& b) {
  return a.name == b.name && a.count == b.count && a.request.gpu == b.request.gpu &&
         a.request.gpu_memory == b.request.gpu_memory && a.request.cpu == b.request.cpu &&
         a.request.memory == b.request.memory;
}
bool SameDevice(const DeviceShare& a, const DeviceShare& b) {
  return a.device == b.device && a.gpu == b.gpu && a.memory == b.memory;
}
bool SameTask(const StoredTask& a, const StoredTask& b) {
  return a.group == b.group && a.index == b.index && a.node == b.node && a.cpu == b.cpu &&
         a.memory == b.memory &&
         std::equal(a.devices.begin(), a.devices.end(), b.devices.begin(), b.devices.end(),
                    SameDevice);
}

Status FieldError(std::string_view field, std::string problem) {
  return Status::InvalidArgument(std::move(problem), std::string(field));
}

Status ValidateGroup(const TaskGroup& g, const std::string& f) {
  if (Status s = limits::CheckObjectName(f + ".name", g.name); !s.ok()) return s;
  if (Status s = limits::CheckCount(f + ".tasks", g.count, 1, limits::kMaxTasksPerJob); !s.ok()) {
    return s;
  }
  const std::int64_t gpu = g.request.gpu.value();
  if (Status s = limits::CheckTaskGpus(f + ".gpu_milli", gpu); !s.ok()) return s;
  if (Status s = limits::CheckCount(f + ".gpu_memory_mib", g.request.gpu_memory.value(), 0,
                                    limits::kMaxMemoryMiB);
      !s.ok()) {
    return s;
  }
  if (g.request.gpu_memory.value() > 0 && gpu == 0) {
    return FieldError(f + ".gpu_memory_mib",
                      "needs GPUs: GPU memory is asked per device of a task with GPUs");
  }
  if (Status s = limits::CheckCount(f + ".cpu_milli", g.request.cpu.value(), 0,
                                    limits::kMaxCpuMilliPerTask);
      !s.ok()) {
    return s;
  }
  return limits::CheckCount(f + ".memory_mib", g.request.memory.value(), 0, limits::kMaxMemoryMiB);
}

// A label map: at most kMaxLabels entries, keys and values as Kubernetes labels.
Status ValidateLabels(const std::string& field, const Labels& labels, bool required) {
  if (required && labels.empty()) return FieldError(field, "give at least one label to match");
  if (labels.size() > limits::kMaxLabels) {
    return FieldError(field,
                      fmt::format("at most {} labels, got {}", limits::kMaxLabels, labels.size()));
  }
  for (const auto& [key, value] : labels) {
    if (Status s = limits::CheckLabelKey(field, key); !s.ok()) return s;
    if (Status s = limits::CheckLabelValue(field + "." + key, value); !s.ok()) return s;
  }
  return Status::Ok();
}

Status Utf8Map(std::string_view field, const Labels& labels) {
  for (const auto& [k, v] : labels) {
    if (!ValidUtf8(k)) return FieldError(field, "has a key that is not valid UTF-8");
    if (Status s = CheckUtf8(fmt::format("{}.{}", field, k), v); !s.ok()) return s;
  }
  return Status::Ok();
}

// Every text of the spec is UTF-8 (JSON text must be).
Status SpecTexts(const JobSpec& spec) {
  for (const auto& [field, text] : {std::pair<const char*, const std::string*>{"name", &spec.name},
                                    {"user", &spec.user},
                                    {"queue", &spec.queue},
                                    {"priority_class", &spec.priority_class},
                                    {"topology.level", &spec.topology_level},
                                    {"command", &spec.command},
                                    {"idempotency_key", &spec.idempotency_key}}) {
    if (Status s = CheckUtf8(field, *text); !s.ok()) return s;
  }
  for (std::size_t i = 0; i < spec.groups.size(); ++i) {
    if (Status s = CheckUtf8(fmt::format("groups[{}].name", i), spec.groups[i].name); !s.ok())
      return s;
  }
  for (std::size_t i = 0; i < spec.gpu_types.size(); ++i) {
    if (Status s = CheckUtf8(fmt::format("gpu_types[{}]", i), spec.gpu_types[i]); !s.ok()) return s;
  }
  if (Status s = Utf8Map("node_selector", spec.node_selector); !s.ok()) return s;
  if (Status s = Utf8Map("labels", spec.labels); !s.ok()) return s;
  if (Status s = Utf8Map("env", spec.env); !s.ok()) return s;
  for (std::size_t i = 0; i < spec.argv.size(); ++i) {
    if (Status s = CheckUtf8(fmt::format("argv[{}]", i), spec.argv[i]); !s.ok()) return s;
  }
  for (std::size_t i = 0; i < spec.tolerations.size(); ++i) {
    if (Status s = CheckUtf8(fmt::format("tolerations[{}].key", i), spec.tolerations[i].key);
        !s.ok()) {
      return s;
    }
    if (Status s = CheckUtf8(fmt::format("tolerations[{}].value", i), spec.tolerations[i].value);
        !s.ok()) {
      return s;
    }
  }
  for (std::size_t i = 0; i < spec.affinity.size(); ++i) {
    if (Status s = Utf8Map(fmt::format("affinity[{}].match", i), spec.affinity[i].match); !s.ok()) {
      return s;
    }
    if (Status s = CheckUtf8(fmt::format("affinity[{}].level", i), spec.affinity[i].level);
        !s.ok()) {
      return s;
    }
  }
  return Status::Ok();
}

}  // namespace

bool ValidUtf8(std::string_view text) {
  std::size_t i = 0;
  const std::size_t n = text.size();
  while (i < n) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len;
    std::uint32_t cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2;
      cp = c & 0x1Fu;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3;
      cp = c & 0x0Fu;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4;
      cp = c & 0x07u;
    } else {
      return false;
    }
    if (i + len > n) return false;
    for (std::size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3Fu);
    }
    // Overlong forms, surrogates, beyond U+10FFFF.
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
        (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
      return false;
    }
    i += len;
  }
  return true;
}

Status CheckUtf8(std::string_view field, std::string_view text) {
  if (!ValidUtf8(text)) return FieldError(field, "is not valid UTF-8");
  return Status::Ok();
}

const char* JobStateName(JobState state) { return kJobStateNames[static_cast<std::size_t>(state)]; }
std::optional<JobState> ParseJobState(std::string_view name) {
  for (std::size_t i = 0; i < kJobStateNames.size(); ++i) {
    if (name == kJobStateNames[i]) return static_cast<JobState>(i);
  }
  return std::nullopt;
}
bool operator==(const JobSpec& a, const JobSpec& b) {
  auto same_affinity = [](const AffinitySpec& x, const AffinitySpec& y) {
    return x.match == y.match && x.level == y.level && x.anti == y.anti && x.required == y.required;
  };
  return a.name == b.name && a.user == b.user && a.queue == b.queue &&
         a.priority_class == b.priority_class &&
         std::equal(a.groups.begin(), a.groups.end(), b.groups.begin(), b.groups.end(),
                    SameGroup) &&
         a.gpu_types == b.gpu_types && a.topology_level == b.topology_level &&
         a.topology_mode == b.topology_mode && a.node_selector == b.node_selector &&
         std::equal(a.tolerations.begin(), a.tolerations.end(), b.tolerations.begin(),
                    b.tolerations.end(), SameToleration) &&
         a.labels == b.labels &&
         std::equal(a.affinity.begin(), a.affinity.end(), b.affinity.begin(), b.affinity.end(),
                    same_affinity) &&
         a.submit_time == b.submit_time && a.runtime_estimate == b.runtime_estimate &&
         a.checkpoint_interval == b.checkpoint_interval &&
         a.restart_overhead == b.restart_overhead && a.argv == b.argv && a.command == b.command &&
         a.env == b.env && a.max_retries == b.max_retries && a.idempotency_key == b.idempotency_key;
}

bool operator==(const StoredAllocation& a, const StoredAllocation& b) {
  return a.gpu_type == b.gpu_type &&
         std::equal(a.tasks.begin(), a.tasks.end(), b.tasks.begin(), b.tasks.end(), SameTask);
}

Status ValidateJobSpec(const JobSpec& spec, Naming naming) {
  if (Status s = SpecTexts(spec); !s.ok()) return s;
  if (Status s = naming == Naming::kCreated ? limits::CheckObjectName("name", spec.name)
                                            : limits::CheckName("name", spec.name, true);
      !s.ok())
    return s;
  if (Status s = limits::CheckName("user", spec.user, false); !s.ok()) return s;
  if (Status s = limits::CheckName("queue", spec.queue, true); !s.ok()) return s;
  if (Status s = limits::CheckName("priority_class", spec.priority_class, true); !s.ok()) return s;
  if (spec.groups.empty()) return FieldError("groups", "give at least one task group");
  if (spec.groups.size() > limits::kMaxGroups) {
    return FieldError("groups", fmt::format("at most {} task groups, got {}", limits::kMaxGroups,
                                            spec.groups.size()));
  }
  std::set<std::string> group_names;
  std::int64_t tasks = 0;
  for (std::size_t i = 0; i < spec.groups.size(); ++i) {
    const std::string f = fmt::format("groups[{}]", i);
    if (Status s = ValidateGroup(spec.groups[i], f); !s.ok()) return s;
    if (!group_names.insert(spec.groups[i].name).second) {
      return FieldError(f + ".name", fmt::format("duplicate group name '{}'", spec.groups[i].name));
    }
    tasks += spec.groups[i].count;
  }
  if (tasks > limits::kMaxTasksPerJob) {
    return FieldError(
        "groups", fmt::format("at most {} tasks in a job, got {}", limits::kMaxTasksPerJob, tasks));
  }
  if (spec.gpu_types.size() > kMaxGpuTypes) {
    return FieldError("gpu_types", fmt::format("at most {} GPU types, got {}", kMaxGpuTypes,
                                               spec.gpu_types.size()));
  }
  for (std::size_t i = 0; i < spec.gpu_types.size(); ++i) {
    if (Status s = limits::CheckName(fmt::format("gpu_types[{}]", i), spec.gpu_types[i], true);
        !s.ok()) {
      return s;
    }
  }
  if (Status s = limits::CheckName("topology.level", spec.topology_level, false); !s.ok()) return s;
  if (Status s = ValidateLabels("node_selector", spec.node_selector, false); !s.ok()) return s;
  if (Status s = ValidateLabels("labels", spec.labels, false); !s.ok()) return s;
  if (spec.tolerations.size() > limits::kMaxTolerations) {
    return FieldError("tolerations", fmt::format("at most {} tolerations, got {}",
                                                 limits::kMaxTolerations, spec.tolerations.size()));
  }
  for (std::size_t i = 0; i < spec.tolerations.size(); ++i) {
    const Toleration& t = spec.tolerations[i];
    const std::string f = fmt::format("tolerations[{}]", i);
    if (!t.key.empty()) {
      if (Status s = limits::CheckLabelKey(f + ".key", t.key); !s.ok()) return s;
    }
    if (Status s = limits::CheckLabelValue(f + ".value", t.value); !s.ok()) return s;
    if (t.op == Toleration::Op::kExists && !t.value.empty()) {
      return FieldError(f + ".value", "operator Exists matches any value; leave 'value' out");
    }
    if (t.op == Toleration::Op::kEqual && t.key.empty()) {
      return FieldError(f + ".key",
                        "operator Equal needs a key (an empty key with operator "
                        "Exists tolerates all)");
    }
  }
  if (spec.affinity.size() > limits::kMaxAffinityTerms) {
    return FieldError("affinity", fmt::format("at most {} terms, got {}", limits::kMaxAffinityTerms,
                                              spec.affinity.size()));
  }
  for (std::size_t i = 0; i < spec.affinity.size(); ++i) {
    const std::string f = fmt::format("affinity[{}]", i);
    if (Status s = ValidateLabels(f + ".match", spec.affinity[i].match, true); !s.ok()) return s;
    if (Status s = limits::CheckName(f + ".level", spec.affinity[i].level, true); !s.ok()) {
      return s;
    }
  }
  if (!spec.argv.empty() && !spec.command.empty()) {
    return FieldError("argv",
                      "give either argv (no shell) or command (run by /bin/sh -c), "
                      "not both");
  }
  if (!spec.argv.empty() && spec.argv[0].empty()) {
    return FieldError("argv[0]", "must name the program to run");
  }
  if (spec.argv.size() > limits::kMaxArgs) {
    return FieldError(
        "argv", fmt::format("at most {} arguments, got {}", limits::kMaxArgs, spec.argv.size()));
  }
  if (spec.env.size() > limits::kMaxEnv) {
    return FieldError(
        "env", fmt::format("at most {} variables, got {}", limits::kMaxEnv, spec.env.size()));
  }
  // What a task runs may span lines (a shell script), but holds no other control character.
  constexpr std::string_view kLines = "\t\n\r";
  std::size_t command_bytes = spec.command.size();
  if (Status s = limits::CheckText("command", spec.command, limits::kMaxCommandBytes, kLines);
      !s.ok()) {
    return s;
  }
  for (std::size_t i = 0; i < spec.argv.size(); ++i) {
    const std::string& a = spec.argv[i];
    if (Status s =
            limits::CheckText(fmt::format("argv[{}]", i), a, limits::kMaxCommandBytes, kLines);
        !s.ok()) {
      return s;
    }
    command_bytes += a.size() + 1;
  }
  for (const auto& [name, value] : spec.env) {
    if (name.empty() || name.find('=') != std::string::npos ||
        limits::FindUnprintable(name) != std::string_view::npos) {
      return FieldError("env",
                        "a variable's name must be non-empty, without '=' or control characters");
    }
    if (Status s =
            limits::CheckText(fmt::format("env.{}", name), value, limits::kMaxCommandBytes, kLines);
        !s.ok()) {
      return s;
    }
    command_bytes += name.size() + value.size() + 2;
  }
  if (command_bytes > limits::kMaxCommandBytes) {
    return FieldError(spec.argv.empty() && spec.env.empty() ? "command" : "argv",
                      fmt::format("argv, command and env together must be at most {} bytes, "
                                  "got {}",
                                  limits::kMaxCommandBytes, command_bytes));
  }
  if (Status s = limits::CheckCount("max_retries", spec.max_retries, 0, limits::kMaxRetries);
      !s.ok()) {
    return s;
  }
  if (spec.topology_level.empty() && spec.topology_mode == ConstraintMode::kPreferred) {
    return FieldError("topology.level", "must be given with mode preferred");
  }
  if (!spec.topology_level.empty() && spec.topology_mode == ConstraintMode::kUnconstrained) {
    return FieldError("topology.mode", "must be required or preferred");
  }
  if (Status s = limits::CheckTime("submit_time_ms", spec.submit_time); !s.ok()) return s;
  if (Status s = limits::CheckDuration("runtime_estimate_ms", spec.runtime_estimate); !s.ok()) {
    return s;
  }
  if (Status s = limits::CheckDuration("checkpoint_interval_ms", spec.checkpoint_interval);
      !s.ok()) {
    return s;
  }
  if (Status s = limits::CheckDuration("restart_overhead_ms", spec.restart_overhead); !s.ok()) {
    return s;
  }
  return limits::CheckName("idempotency_key", spec.idempotency_key, false);
}

}  // namespace arbiter::job
