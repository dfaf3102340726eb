// Cluster snapshots: the writer and the reader (docs/snapshot.md). The cluster part of a snapshot
// is a cluster file, read by the cluster file's reader; the jobs are jobs-file entries, read by the
// jobs file's reader; the rest is read here, and the state is built through ClusterState's own
// calls, each error at the line of the field that caused it.
#include "config/snapshot.h"

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "arbiter/attained_service.h"
#include "config/loaders.h"
#include "config/reader.h"
#include "job/limits.h"
#include "job/resolve.h"

namespace arbiter::config {
namespace {

using internal::Entries;
using internal::Entry;
using internal::Map;
using internal::Value;

// Job::time_on_model by model name, the models the job has not run on left out.
std::vector<std::pair<std::string, Millis>> TimeOnModels(const ClusterState& state,
                                                         const Job& job) {
  std::vector<std::pair<std::string, Millis>> out;
  for (GpuTypeId t = 0; t < job.time_on_model.size() && t < state.gpu_type_count(); ++t) {
    if (job.time_on_model[t] > 0) out.emplace_back(state.gpu_type_name(t), job.time_on_model[t]);
  }
  return out;
}

constexpr std::string_view kClusterFields[] = {"topology", "scheduler",      "priority_classes",
                                               "queues",   "gpu_throughput", "nodes"};
constexpr std::string_view kSnapshotFields[] = {
    "snapshot_version", "taken_at",       "topology", "scheduler",       "priority_classes",
    "queues",           "gpu_throughput", "nodes",    "node_states",     "queue_usage",
    "running",          "pending",        "stopping", "finished_service"};
constexpr std::string_view kRunningFields[] = {"id",         "evictions",       "service",
                                               "start_time", "last_checkpoint", "allocation"};
constexpr std::string_view kPendingFields[] = {"id", "evictions", "service", "held"};
constexpr std::string_view kStoppingFields[] = {"id", "evictions", "service", "stop_time"};

// ---- Scalars ----

bool Alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool PlainSafe(std::string_view s) {
  if (s.empty() || !Alnum(s.front())) return false;
  if (s == "null" || s == "Null" || s == "NULL") return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return Alnum(c) || c == '_' || c == '-' || c == '.' || c == '/';
  });
}

// A string as a YAML scalar: plain when it cannot be read as anything else, else double-quoted
// with escapes (the bytes of UTF-8 text pass as they are).
std::string Quote(std::string_view s) {
  if (PlainSafe(s)) return std::string(s);
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (u < 0x20 || u == 0x7f) {
          out += fmt::format("\\x{:02x}", u);
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string Bool(bool b) { return b ? "true" : "false"; }

// A duration as its largest units first: `1d12h`, `90s` as `1m30s`, `1500ms` as `1s500ms`, `0`.
std::string Duration(Millis d) {
  if (d == 0) return "0";
  std::string out;
  for (const auto& [unit, ms] : {std::pair<const char*, Millis>{"d", 86400000},
                                 {"h", 3600000},
                                 {"m", 60000},
                                 {"s", 1000},
                                 {"ms", 1}}) {
    if (d >= ms) {
      out += std::to_string(d / ms) + unit;
      d %= ms;
    }
  }
  return out;
}

// MiB with the largest binary unit that divides it exactly.
std::string MiB(std::int64_t mib) {
  if (mib > 0 && mib % (1024 * 1024) == 0) return std::to_string(mib / (1024 * 1024)) + "Ti";
  if (mib > 0 && mib % 1024 == 0) return std::to_string(mib / 1024) + "Gi";
  return std::to_string(mib) + (mib == 0 ? "" : "Mi");
}

std::string Milli(std::int64_t milli) { return limits::FormatGpus(milli); }

// A weight: the shortest decimal that reads back as the same double.
std::string Number(double v) { return fmt::format("{}", v); }

// The recent usage (GPU-milli-milliseconds) in GPU-seconds, exactly: the shortest decimal of the
// usage with its point moved six places, so that reading it back (ReadGpuSeconds) moves the point
// again and gives the same double.
std::string GpuSeconds(double usage) {
  if (!std::isfinite(usage) || usage <= 0) return "0";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, usage, std::chars_format::scientific);
  if (ec != std::errc()) return "0";
  const std::string text(buf, end);  // d[.ddd]e[+-]XX
  const std::size_t e = text.find('e');
  std::string digits = text.substr(0, e);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  int exponent = std::stoi(text.substr(e + 1)) - 6;  // the value is 0.digits x 10^(exponent+1)
  // value = digits[0].digits[1..] x 10^exponent
  std::string out;
  const int point = exponent + 1;  // digits before the decimal point
  if (point <= 0) {
    out = "0." + std::string(static_cast<std::size_t>(-point), '0') + digits;
  } else if (static_cast<std::size_t>(point) >= digits.size()) {
    out = digits + std::string(static_cast<std::size_t>(point) - digits.size(), '0');
  } else {
    out = digits.substr(0, static_cast<std::size_t>(point)) + "." +
          digits.substr(static_cast<std::size_t>(point));
  }
  return out;
}

// GPU-seconds as written (a plain decimal) into GPU-milli-milliseconds, exactly (see GpuSeconds).
double ReadGpuSeconds(const Value& v) {
  v.Number(0);  // its checks: a finite, non-negative decimal
  std::string text = v.String();
  int shift = 6;
  if (const std::size_t e = text.find_first_of("eE"); e != std::string::npos) {
    int exponent = 0;
    auto [end, ec] = std::from_chars(text.data() + e + 1 + (text[e + 1] == '+' ? 1 : 0),
                                     text.data() + text.size(), exponent);
    if (ec != std::errc() || end != text.data() + text.size() || std::abs(exponent) > 400) {
      v.Fail(fmt::format("expected a number, got '{}'", text));
    }
    shift += exponent;
    text.resize(e);
  }
  text += "e" + std::to_string(shift);
  double out = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  if (ec != std::errc() || !std::isfinite(out))
    v.Fail(fmt::format("too large, got {}", v.String()));
  return out;
}

// The civil date of a day count since 1970-01-01 (proleptic Gregorian).
void CivilFromDays(std::int64_t days, std::int64_t& year, int& month, int& day) {
  const std::int64_t z = days + 719468;
  const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
  const std::int64_t doe = z - era * 146097;
  const std::int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  const std::int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  const std::int64_t mp = (5 * doy + 2) / 153;
  day = static_cast<int>(doy - (153 * mp + 2) / 5 + 1);
  month = static_cast<int>(mp < 10 ? mp + 3 : mp - 9);
  year = yoe + era * 400 + (month <= 2 ? 1 : 0);
}

}  // namespace

const char* SnapshotNodeStateName(SnapshotNode::State state) {
  switch (state) {
    case SnapshotNode::State::kSchedulable:
      return "schedulable";
    case SnapshotNode::State::kCordoned:
      return "cordoned";
    case SnapshotNode::State::kDraining:
      return "draining";
  }
  return "?";
}

std::string FormatSnapshotTime(Millis t, bool calendar) {
  if (!calendar || t < 0) return Duration(std::max<Millis>(t, 0));
  const Millis ms = t % 1000;
  const std::int64_t seconds = t / 1000;
  std::int64_t year = 0;
  int month = 0, day = 0;
  CivilFromDays(seconds / 86400, year, month, day);
  const std::int64_t sod = seconds % 86400;
  std::string out = fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}", year, month, day, sod / 3600,
                                sod / 60 % 60, sod % 60);
  if (ms != 0) out += fmt::format(".{:03}", ms);
  return out + "Z";
}

Result<Millis> ParseSnapshotTime(std::string_view text, std::string_view field) {
  Millis t = 0;
  if (text.find(':') != std::string_view::npos ||
      (text.size() > 4 && text[4] == '-' && text.find('T') != std::string_view::npos)) {
    // YYYY-MM-DDTHH:MM:SS[.f{1,3}]Z
    bool ok = text.size() >= 20 && text[10] == 'T' && text.back() == 'Z';
    std::string_view base = ok ? text.substr(0, 19) : text;
    std::string_view fraction = ok ? text.substr(19, text.size() - 20) : std::string_view();
    Millis ms = 0;
    if (!fraction.empty()) {
      ok = fraction.size() >= 2 && fraction.size() <= 4 && fraction[0] == '.';
      for (std::size_t i = 1; ok && i < 4; ++i) {
        const char c = i < fraction.size() ? fraction[i] : '0';
        ok = c >= '0' && c <= '9';
        ms = ms * 10 + (c - '0');
      }
    }
    std::optional<Millis> at = ok ? ParseUtcTime(std::string(base) + "Z") : std::nullopt;
    if (!at) {
      return Status::InvalidArgument(
          fmt::format("expected a UTC time as YYYY-MM-DDTHH:MM:SS[.mmm]Z or a duration from the "
                      "epoch, got '{}'",
                      text),
          std::string(field));
    }
    t = *at + ms;
  } else {
    Result<Millis> d = ParseDuration(text, field);
    if (!d.ok()) return d.status();
    t = *d;
  }
  if (Status s = limits::CheckTime(field, t); !s.ok()) return s;
  return t;
}

// ---- The writer ----

namespace {

class Writer {
 public:
  explicit Writer(const Snapshot& s) : s_(s) {}

  std::string Write() {
    const ClusterConfig& c = s_.config;
    Line("# Arbiter cluster snapshot (docs/snapshot.md)");
    Line(fmt::format("snapshot_version: {}", kSnapshotVersion));
    Line("taken_at: " + Time(s_.taken_at));
    const std::vector<std::string>& levels = c.cluster.topology.levels;
    const std::size_t operator_levels = levels.size() >= 2 ? levels.size() - 2 : 0;
    std::string list;
    for (std::size_t l = 0; l < operator_levels; ++l) list += (l ? ", " : "") + Quote(levels[l]);
    Line("topology:");
    Line("  levels: [" + list + "]");
    WriteScheduler();
    Line("priority_classes:");
    for (const PriorityClassSpec& pc : c.cluster.priority_classes) {
      Line(fmt::format(
          "  - {{name: {}, value: {}, preemptible: {}, min_runtime: {}, grace_period: {}, "
          "checkpoint_signal: {}, max_evictions: {}, eviction_window: {}, eviction_cooldown: {}}}",
          Quote(pc.name), pc.value, Bool(pc.preemptible), Duration(pc.min_runtime),
          Duration(pc.grace_period), Quote(pc.checkpoint_signal), pc.max_evictions,
          Duration(pc.eviction_window), Duration(pc.eviction_cooldown)));
    }
    Line("queues:");
    for (const QueueSpec& q : c.cluster.queues) {
      Line("  - name: " + Quote(q.name));
      if (!q.parent.empty()) Line("    parent: " + Quote(q.parent));
      Line(fmt::format("    weight: {}", q.weight));
      Line(fmt::format("    priority: {}", q.priority));
      Line("    preemptible: " + Bool(q.preemptable));
      Line("    preempt_within_queue: " + Bool(q.preempt_within_queue));
      Line("    preempt_lower_priority: " + Bool(q.preempt_lower_priority));
      Line("    reclaim: " + Bool(q.reclaim));
      Line("    strict_fifo: " + Bool(q.strict_fifo));
      if (!q.quota.empty()) {
        std::string quota;
        for (const auto& [resource, limits] : q.quota) {
          std::string fields = "nominal: " + Milli(limits.nominal.value());
          if (limits.borrowing_limit)
            fields += ", borrowing_limit: " + Milli(limits.borrowing_limit->value());
          if (limits.lending_limit)
            fields += ", lending_limit: " + Milli(limits.lending_limit->value());
          if (limits.max) fields += ", max: " + Milli(limits.max->value());
          quota += fmt::format("{}{}: {{{}}}", quota.empty() ? "" : ", ", Quote(resource), fields);
        }
        Line("    quota: {" + quota + "}");
      }
    }
    if (!c.cluster.throughput.rows.empty()) {
      Line("gpu_throughput:");
      Line("  label: " + Quote(c.cluster.throughput.label));
      Line("  workloads:");
      for (const ThroughputRow& row : c.cluster.throughput.rows) {
        std::string cells;
        for (const auto& [model, x] : row.by_model)
          cells += fmt::format("{}{}: {}", cells.empty() ? "" : ", ", Quote(model), Number(x));
        Line(fmt::format("    {}: {{{}}}", Quote(row.workload), cells));
      }
    }
    Line("nodes:");
    for (const NodeSpec& n : c.cluster.nodes) WriteNode(n, levels, operator_levels);
    if (!s_.node_states.empty()) {
      Line("node_states:");
      for (const SnapshotNode& n : s_.node_states) {
        std::string line = fmt::format("  - {{node: {}, state: {}, healthy: {}", Quote(n.node),
                                       SnapshotNodeStateName(n.state), Bool(n.healthy));
        if (!n.reason.empty()) line += ", reason: " + Quote(n.reason);
        Line(line + "}");
      }
    }
    if (!s_.queue_usage.empty()) {
      Line("queue_usage:  # GPU-seconds of recent use, decayed with the fair-share half-life");
      for (const auto& [queue, usage] : s_.queue_usage)
        Line(fmt::format("  {}: {}", Quote(queue), GpuSeconds(usage)));
    }
    if (!s_.finished_service.empty()) {
      Line("finished_service:  # GPU-time of the last finished jobs, oldest first (gittins)");
      std::string sizes;
      for (Millis d : s_.finished_service) sizes += (sizes.empty() ? "" : ", ") + Duration(d);
      Line("  [" + sizes + "]");
    }
    WriteJobs("running", s_.running);
    WriteJobs("pending", s_.pending);
    WriteJobs("stopping", s_.stopping);
    return std::move(out_);
  }

 private:
  void Line(std::string_view text) {
    out_ += text;
    out_ += '\n';
  }
  std::string Time(Millis t) const { return Quote(FormatSnapshotTime(t, s_.calendar)); }

  void WriteScheduler() {
    const EngineOptions& e = s_.config.engine;
    const OrderingWeights& w = e.ordering;
    Line("scheduler:");
    std::string las;
    if (w.policy != OrderPolicy::kMultifactor) {
      std::string thresholds;
      for (Millis t : w.las_thresholds)
        thresholds += (thresholds.empty() ? "" : ", ") + Duration(t);
      las = fmt::format(", policy: {}, las_thresholds: [{}], starvation_factor: {}",
                        OrderPolicyName(w.policy), thresholds, Number(w.starvation_factor));
      if (w.policy == OrderPolicy::kGittins)
        las += fmt::format(", gittins_quantum: {}, gittins_window: {}", Duration(w.gittins_quantum),
                           w.gittins_window);
      if (w.policy == OrderPolicy::kFinishTimeFairness)
        las += ", ftf_lease: " + Duration(w.ftf_lease);
      if (w.policy == OrderPolicy::kGavel) las += ", gavel_round: " + Duration(w.gavel_round);
    }
    if (w.heterogeneity != HeterogeneityPolicy::kOff)
      las += fmt::format(", heterogeneity: {}", HeterogeneityPolicyName(w.heterogeneity));
    if (w.starvation_wait > 0 && w.policy == OrderPolicy::kMultifactor)
      las += ", starvation_wait: " + Duration(w.starvation_wait);
    Line(fmt::format(
        "  ordering: {{priority_class_weight: {}, queue_priority_weight: {}, fair_share_weight: "
        "{}, age_weight: {}, max_age: {}{}}}",
        Number(w.priority_class), Number(w.queue_priority), Number(w.fair_share), Number(w.age),
        Duration(w.max_age), las));
    Line("  fair_share_half_life: " + Duration(s_.config.cluster.fair_share_half_life));
    Line("  fair_share_period: " + Duration(s_.config.cluster.fair_share_period));
    Line(fmt::format("  score_candidates: {}", e.score_candidates));
    Line(fmt::format("  placement: {{policy: {}, seed: {}}}",
                     PlacementPolicyName(e.placement.policy), e.placement.seed));
    const PreemptionOptions& p = e.preemption;
    std::string preemption = "enabled: " + Bool(p.enabled);
    if (p.max_gpus_per_cycle >= 0)
      preemption += ", max_gpus_per_cycle: " + Milli(p.max_gpus_per_cycle);
    if (p.max_loss_per_gpu >= 0)
      preemption += ", max_loss_per_gpu: " + Duration(p.max_loss_per_gpu);
    preemption += fmt::format(", max_attempts_per_cycle: {}", p.max_attempts_per_cycle);
    Line("  preemption: {" + preemption + "}");
    const BackfillOptions& b = e.backfill;
    Line(fmt::format(
        "  backfill: {{reservations: {}, overrun_grace: {}, default_runtime: {}, max_attempts: "
        "{}}}",
        b.reservations, Duration(b.overrun_grace), Duration(b.default_runtime), b.max_attempts));
  }

  void WriteNode(const NodeSpec& n, const std::vector<std::string>& levels,
                 std::size_t operator_levels) {
    std::string line = "  - {name: " + Quote(n.name);
    if (!n.devices.empty()) {
      const DeviceSpec& first = n.devices.front();
      std::size_t group = 0;
      while (group < n.devices.size() && n.devices[group].nvlink_group == 0) ++group;
      bool uniform = group > 0 && n.devices.size() % group == 0;
      for (std::size_t d = 0; uniform && d < n.devices.size(); ++d) {
        const DeviceSpec& dev = n.devices[d];
        uniform = dev.type == first.type && dev.memory == first.memory &&
                  dev.nvlink_group == static_cast<std::uint32_t>(d / group);
      }
      if (uniform) {
        line += fmt::format(", gpus: {{model: {}, count: {}, memory: {}, nvlink_group_size: {}}}",
                            Quote(first.type), n.devices.size(), MiB(first.memory.value()), group);
      } else {
        std::string devices;
        for (const DeviceSpec& dev : n.devices) {
          devices += fmt::format("{}{{model: {}, memory: {}, nvlink_group: {}}}",
                                 devices.empty() ? "" : ", ", Quote(dev.type),
                                 MiB(dev.memory.value()), dev.nvlink_group);
        }
        line += ", devices: [" + devices + "]";
      }
    }
    line += ", cpu: " + Milli(n.cpu.value()) + ", memory: " + MiB(n.memory.value());
    if (!n.labels.empty()) line += ", labels: " + StringMap(n.labels);
    if (!n.taints.empty()) {
      std::string taints;
      for (const Taint& t : n.taints) {
        taints +=
            fmt::format("{}{{key: {}, value: {}, effect: {}}}", taints.empty() ? "" : ", ",
                        Quote(t.key), Quote(t.value),
                        t.effect == TaintEffect::kNoSchedule ? "NoSchedule" : "PreferNoSchedule");
      }
      line += ", taints: [" + taints + "]";
    }
    if (operator_levels > 0) {
      std::string topology;
      for (std::size_t l = 0; l < operator_levels && l < n.domains.size(); ++l) {
        topology += fmt::format("{}{}: {}", l ? ", " : "", Quote(levels[l]), Quote(n.domains[l]));
      }
      line += ", topology: {" + topology + "}";
    }
    if (n.cordoned) line += ", cordoned: true";
    Line(line + "}");
  }

  static std::string StringMap(const Labels& map) {
    std::string out;
    for (const auto& [k, v] : map)
      out += fmt::format("{}{}: {}", out.empty() ? "" : ", ", Quote(k), Quote(v));
    return "{" + out + "}";
  }

  std::string Times(const std::vector<Millis>& times) const {
    std::string out;
    for (Millis t : times) out += (out.empty() ? "" : ", ") + Time(t);
    return "[" + out + "]";
  }

  // The request's fields that are not 0, as `key: value`.
  static std::vector<std::string> Request(const TaskRequest& r) {
    std::vector<std::string> out;
    if (r.gpu.value() != 0) out.push_back("gpus: " + Milli(r.gpu.value()));
    if (r.gpu_memory.value() != 0) out.push_back("gpu_memory: " + MiB(r.gpu_memory.value()));
    if (r.cpu.value() != 0) out.push_back("cpu: " + Milli(r.cpu.value()));
    if (r.memory.value() != 0) out.push_back("memory: " + MiB(r.memory.value()));
    return out;
  }

  // A job as a jobs file has it, then the fields of its section.
  void WriteJob(const SnapshotJob& j, const char* section) {
    const job::JobSpec& s = j.spec;
    Line(fmt::format("  - id: {}", j.id));
    Line("    name: " + Quote(s.name));
    if (!s.user.empty()) Line("    user: " + Quote(s.user));
    Line("    queue: " + Quote(s.queue));
    Line("    priority_class: " + Quote(s.priority_class));
    Line("    submit_time: " + Time(s.submit_time));
    if (s.runtime_estimate != 0) Line("    runtime_estimate: " + Duration(s.runtime_estimate));
    if (s.checkpoint_interval != 0)
      Line("    checkpoint_interval: " + Duration(s.checkpoint_interval));
    if (s.restart_overhead != 0) Line("    restart_overhead: " + Duration(s.restart_overhead));
    if (!s.gpu_types.empty()) {
      std::string types;
      for (const std::string& t : s.gpu_types) types += (types.empty() ? "" : ", ") + Quote(t);
      Line("    gpu_types: [" + types + "]");
    }
    if (!s.topology_level.empty()) {
      Line(fmt::format("    topology: {{level: {}, mode: {}}}", Quote(s.topology_level),
                       s.topology_mode == ConstraintMode::kPreferred ? "preferred" : "required"));
    }
    if (!s.node_selector.empty()) Line("    node_selector: " + StringMap(s.node_selector));
    if (!s.tolerations.empty()) {
      Line("    tolerations:");
      for (const Toleration& t : s.tolerations) {
        std::string fields = "key: " + Quote(t.key) +
                             ", operator: " + (t.op == Toleration::Op::kEqual ? "Equal" : "Exists");
        if (t.op == Toleration::Op::kEqual) fields += ", value: " + Quote(t.value);
        if (t.effect) {
          fields += std::string(", effect: ") +
                    (*t.effect == TaintEffect::kNoSchedule ? "NoSchedule" : "PreferNoSchedule");
        }
        Line("      - {" + fields + "}");
      }
    }
    if (!s.labels.empty()) Line("    labels: " + StringMap(s.labels));
    if (!s.affinity.empty()) {
      Line("    affinity:");
      for (const job::AffinitySpec& a : s.affinity) {
        Line(fmt::format("      - {{match: {}, level: {}, anti: {}, required: {}}}",
                         StringMap(a.match), Quote(a.level), Bool(a.anti), Bool(a.required)));
      }
    }
    if (s.groups.size() == 1 && s.groups[0].name == limits::DefaultGroupName(0, 1)) {
      const TaskGroup& g = s.groups[0];
      Line(fmt::format("    tasks: {}", g.count));
      for (const std::string& field : Request(g.request)) Line("    " + field);
    } else {
      Line("    groups:");
      for (const TaskGroup& g : s.groups) {
        std::string fields = fmt::format("name: {}, tasks: {}", Quote(g.name), g.count);
        for (const std::string& field : Request(g.request)) fields += ", " + field;
        Line("      - {" + fields + "}");
      }
    }
    if (!s.argv.empty()) {
      std::string argv;
      for (const std::string& a : s.argv) argv += (argv.empty() ? "" : ", ") + Quote(a);
      Line("    argv: [" + argv + "]");
    }
    if (!s.command.empty()) Line("    command: " + Quote(s.command));
    if (!s.env.empty()) Line("    env: " + StringMap(s.env));
    if (s.max_retries != 0) Line(fmt::format("    max_retries: {}", s.max_retries));
    if (!s.idempotency_key.empty()) Line("    idempotency_key: " + Quote(s.idempotency_key));
    if (!j.evictions.empty()) Line("    evictions: " + Times(j.evictions));
    if (j.attained > 0 || j.starved > 0 || !j.time_on_model.empty()) {
      std::string service =
          fmt::format("attained: {}, starved: {}", Duration(j.attained), Duration(j.starved));
      if (j.service_time >= 0) service += ", since: " + Time(j.service_time);
      if (!j.time_on_model.empty()) {
        std::string models;
        for (const auto& [model, time] : j.time_on_model)
          models += (models.empty() ? "" : ", ") + Quote(model) + ": " + Duration(time);
        service += ", time_on_model: {" + models + "}";
      }
      Line("    service: {" + service + "}");
    }
    const std::string_view kind = section;
    if (kind == "running") {
      Line("    start_time: " + Time(j.start_time));
      if (j.last_checkpoint >= 0) Line("    last_checkpoint: " + Time(j.last_checkpoint));
      Line("    allocation:");
      if (!j.allocation.gpu_type.empty()) Line("      gpu_type: " + Quote(j.allocation.gpu_type));
      Line("      tasks:");
      for (const job::StoredTask& t : j.allocation.tasks) {
        const std::string group =
            t.group < s.groups.size() ? s.groups[t.group].name : std::to_string(t.group);
        std::string devices;
        for (const DeviceShare& d : t.devices)
          devices += (devices.empty() ? "" : ", ") + std::to_string(d.device);
        std::string line = fmt::format("        - {{group: {}, index: {}, node: {}, devices: [{}]",
                                       Quote(group), t.index, Quote(t.node), devices);
        if (t.devices.size() == 1 && t.devices[0].gpu.value() < kMilliPerGpu) {
          line += ", share: " + Milli(t.devices[0].gpu.value());
        }
        Line(line + "}");
      }
    } else if (kind == "pending") {
      if (j.held) Line("    held: true");
    } else {
      Line("    stop_time: " + Time(j.stop_time));
    }
  }

  void WriteJobs(const char* section, const std::vector<SnapshotJob>& jobs) {
    if (jobs.empty()) return;
    Line(fmt::format("{}:", section));
    for (const SnapshotJob& j : jobs) WriteJob(j, section);
  }

  const Snapshot& s_;
  std::string out_;
};

}  // namespace

std::string WriteSnapshot(const Snapshot& snapshot) { return Writer(snapshot).Write(); }

Snapshot MakeSnapshot(const ClusterConfig& config, ClusterState& state,
                      std::span<const Job> pending, Millis taken_at) {
  state.AccrueUsage(taken_at);
  Snapshot s;
  s.config.cluster = config.cluster;
  s.config.engine = config.engine;
  s.config.engine.clock_micros = nullptr;
  s.taken_at = taken_at;
  for (NodeSpec& n : s.config.cluster.nodes) {
    std::optional<NodeId> id = state.FindNode(n.name);
    if (!id) continue;
    const NodeState& node = state.node(*id);
    n.cordoned = node.cordoned;
    if (node.cordoned || !node.healthy) {
      s.node_states.push_back(SnapshotNode{
          n.name,
          node.cordoned ? SnapshotNode::State::kCordoned : SnapshotNode::State::kSchedulable,
          node.healthy,
          {}});
    }
  }
  for (QueueId q = 0; q < state.queue_count(); ++q)
    s.queue_usage[state.queue(q).spec.name] = state.recent_usage(q);
  s.finished_service = state.finished_service();
  std::vector<JobId> ids;
  for (const auto& [id, running] : state.running()) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  for (JobId id : ids) {
    const RunningJob& r = *state.FindRunning(id);
    SnapshotJob j;
    j.id = id;
    j.spec = job::ToSpec(r.job, state);
    const std::span<const Millis> evictions = state.EvictionTimes(id);
    j.evictions.assign(evictions.begin(), evictions.end());
    j.start_time = r.start_time;
    j.attained = r.job.attained;
    j.starved = r.job.starved;
    j.time_on_model = TimeOnModels(state, r.job);
    j.last_checkpoint = r.last_checkpoint > r.start_time ? r.last_checkpoint : -1;
    j.allocation = job::ToStoredAllocation(r.allocation, state);
    s.running.push_back(std::move(j));
  }
  for (const Job& job : pending) {
    SnapshotJob j;
    j.id = job.id;
    j.spec = job::ToSpec(job, state);
    const std::span<const Millis> evictions = state.EvictionTimes(job.id);
    j.evictions.assign(evictions.begin(), evictions.end());
    j.attained = job.attained;
    j.starved = job.starved;
    j.time_on_model = TimeOnModels(state, job);
    if (j.attained > 0 || j.starved > 0) j.service_time = job.service_time;
    s.pending.push_back(std::move(j));
  }
  std::sort(s.pending.begin(), s.pending.end(),
            [](const SnapshotJob& a, const SnapshotJob& b) { return a.id < b.id; });
  return s;
}

// ---- The reader ----

namespace {

class SnapshotLoader {
 public:
  LoadedSnapshot Load(const Value& root) {
    if (!root.node().IsMap())
      root.Fail("expected a mapping: a cluster file with a snapshot's sections");
    Map m(root, kSnapshotFields);
    const Value& version = m.Get("snapshot_version");
    if (version.Int(0, 1 << 20) != kSnapshotVersion) {
      version.Fail(
          fmt::format("this reader reads version {}, got {}", kSnapshotVersion, version.String()));
    }
    const Value& taken_at = m.Get("taken_at");
    s_.taken_at = Time(taken_at);
    s_.calendar = taken_at.String().find('T') != std::string::npos;

    // The cluster: the cluster file's sections, read by its reader.
    YAML::Node cluster(YAML::NodeType::Map);
    for (std::string_view key : kClusterFields) {
      if (m.Has(key)) cluster[std::string(key)] = m.Get(key).node();
    }
    s_.config = internal::LoadClusterValue(root.WithNode(cluster));
    if (const Value* v = m.Find("node_states")) LoadNodeStates(*v);
    Result<ClusterState> created = ClusterState::Create(s_.config.cluster);
    if (!created.ok()) root.FailWith(created.status());
    state_.emplace(std::move(created).value());
    for (const SnapshotNode& n : s_.node_states) {
      if (!n.healthy) Check(state_->SetHealthy(*state_->FindNode(n.node), false), root);
    }

    if (const Value* v = m.Find("running")) {
      for (const Value& item : v->Items()) LoadRunning(item);
    }
    std::vector<Job> pending;
    if (const Value* v = m.Find("pending")) {
      for (const Value& item : v->Items()) {
        SnapshotJob j;
        Job job = LoadJob(item, kPendingFields, j);
        if (std::optional<Value> held = Field(item, "held")) j.held = held->Bool();
        if (!j.held) pending.push_back(std::move(job));
        s_.pending.push_back(std::move(j));
      }
    }
    if (const Value* v = m.Find("stopping")) {
      for (const Value& item : v->Items()) {
        SnapshotJob j;
        LoadJob(item, kStoppingFields, j);
        j.stop_time = Time(Required(item, "stop_time"));
        s_.stopping.push_back(std::move(j));
      }
    }
    // Fair share: every queue's usage as of taken_at (a queue left out had none).
    std::map<std::string, double> usage;
    if (const Value* v = m.Find("queue_usage")) {
      std::vector<std::string> names;
      for (QueueId q = 0; q < state_->queue_count(); ++q)
        names.push_back(state_->queue(q).spec.name);
      for (const Entry& e : Entries(*v)) {
        if (!state_->FindQueue(e.key))
          e.key_value.Fail(internal::UnknownName("queue", e.key, names));
        usage[e.key] = ReadGpuSeconds(e.value);
      }
    }
    for (QueueId q = 0; q < state_->queue_count(); ++q) {
      const std::string& name = state_->queue(q).spec.name;
      auto it = usage.find(name);
      const double u = it == usage.end() ? 0.0 : it->second;
      state_->RestoreRecentUsage(q, u, s_.taken_at);
      s_.queue_usage[name] = u;
    }
    // What a Gittins order learned: the finished jobs' service, oldest first.
    if (const Value* v = m.Find("finished_service")) {
      for (const Value& item : v->Items()) {
        const Millis service = item.Duration();
        state_->RecordFinishedService(
            service, static_cast<std::size_t>(s_.config.engine.ordering.gittins_window));
      }
      s_.finished_service = state_->finished_service();
    }
    if (Status st = state_->CheckInvariants(); !st.ok()) root.FailWith(st);
    std::sort(pending.begin(), pending.end(),
              [](const Job& a, const Job& b) { return a.id < b.id; });
    return LoadedSnapshot{std::move(s_), std::move(*state_), std::move(pending)};
  }

 private:
  static Millis Time(const Value& v) {
    Result<Millis> t = ParseSnapshotTime(v.String(), v.path());
    if (!t.ok()) v.FailWith(t.status());
    return *t;
  }

  static void Check(const Status& st, const Value& at) {
    if (!st.ok()) at.FailWith(st);
  }

  // The field `key` of a job entry, whose fields the jobs reader has checked; nullptr when absent.
  static std::optional<Value> Field(const Value& item, std::string_view key) {
    for (Entry& e : Entries(item)) {
      if (e.key == key) return std::move(e.value);
    }
    return std::nullopt;
  }
  static Value Required(const Value& item, std::string_view key) {
    std::optional<Value> v = Field(item, key);
    if (!v) item.Fail(fmt::format("missing required field '{}'", key));
    return std::move(*v);
  }

  void LoadNodeStates(const Value& value) {
    std::vector<std::string> names;
    for (const NodeSpec& n : s_.config.cluster.nodes) names.push_back(n.name);
    std::set<std::string> seen;
    for (const Value& item : value.Items()) {
      Map m(item, {"node", "state", "healthy", "reason"});
      SnapshotNode n;
      const Value& node = m.Get("node");
      n.node = node.NonEmptyString();
      auto spec = std::find_if(s_.config.cluster.nodes.begin(), s_.config.cluster.nodes.end(),
                               [&](const NodeSpec& s) { return s.name == n.node; });
      if (spec == s_.config.cluster.nodes.end())
        node.Fail(internal::UnknownName("node", n.node, names));
      if (!seen.insert(n.node).second) node.Fail(fmt::format("node '{}' is listed twice", n.node));
      if (const Value* v = m.Find("state")) {
        n.state =
            static_cast<SnapshotNode::State>(v->Choice({"schedulable", "cordoned", "draining"}));
      }
      if (const Value* v = m.Find("healthy")) n.healthy = v->Bool();
      if (const Value* v = m.Find("reason")) {
        n.reason = v->String();
        if (Status s = limits::CheckText(v->path(), n.reason, limits::kMaxReasonBytes); !s.ok())
          v->Fail(s.detail());
      }
      // The node's state decides its cordon, whatever its entry of `nodes` says.
      spec->cordoned = n.state != SnapshotNode::State::kSchedulable;
      s_.node_states.push_back(std::move(n));
    }
  }

  // A job of any section: its spec (the jobs reader's checks), id and eviction history.
  Job LoadJob(const Value& item, std::span<const std::string_view> extra, SnapshotJob& j) {
    const std::function<Millis(const Value&)> time = [](const Value& v) { return Time(v); };
    if (!item.node().IsMap()) item.Fail("expected a mapping: a job");
    const Value id = Required(item, "id");
    j.id = static_cast<JobId>(id.Int(1, std::numeric_limits<std::int64_t>::max()));
    if (auto [it, fresh] = ids_.emplace(j.id, item.path()); !fresh)
      id.Fail(fmt::format("job id {} is also {}'s", j.id, it->second));
    Job job = internal::LoadJobEntry(item, extra, time, *state_, j.id, j.spec);
    if (std::optional<Value> v = Field(item, "evictions")) {
      for (const Value& t : v->Items()) {
        const Millis at = Time(t);
        if (!j.evictions.empty() && at < j.evictions.back()) t.Fail("evictions go oldest first");
        j.evictions.push_back(at);
      }
      if (!j.evictions.empty()) state_->RestoreEvictions(j.id, j.evictions);
    }
    if (std::optional<Value> v = Field(item, "service")) {
      Map m(*v, {"attained", "starved", "since", "time_on_model"});
      j.attained = job.attained = m.Get("attained").Duration();
      if (const Value* x = m.Find("starved")) j.starved = job.starved = x->Duration();
      if (const Value* x = m.Find("since")) j.service_time = job.service_time = Time(*x);
      if (const Value* x = m.Find("time_on_model")) {
        for (const Entry& e : Entries(*x)) {
          const std::optional<GpuTypeId> type = state_->FindGpuType(e.key);
          if (!type) e.value.Fail(fmt::format("no GPU model '{}' in the cluster", e.key));
          const Millis ran = e.value.Duration();
          if (ran <= 0) e.value.Fail("must be a positive duration");
          AddTimeOnModel(job.time_on_model, *type, ran);
          j.time_on_model.emplace_back(e.key, ran);
        }
      }
    }
    return job;
  }

  void LoadRunning(const Value& item) {
    SnapshotJob j;
    Job job = LoadJob(item, kRunningFields, j);
    j.start_time = Time(Required(item, "start_time"));
    const std::optional<Value> checkpoint = Field(item, "last_checkpoint");
    if (checkpoint) j.last_checkpoint = Time(*checkpoint);
    const Value allocation_value = Required(item, "allocation");
    Allocation allocation = LoadAllocation(allocation_value, job);
    const std::string name = job.name;
    if (Status st = state_->Bind(std::move(job), allocation, j.start_time); !st.ok()) {
      allocation_value.Fail(fmt::format("job '{}' cannot run there: {}", name, st.message()));
    }
    if (checkpoint) Check(state_->RecordCheckpoint(j.id, j.last_checkpoint), *checkpoint);
    const RunningJob& bound = *state_->FindRunning(j.id);
    if (bound.last_checkpoint <= bound.start_time) j.last_checkpoint = -1;
    j.allocation = job::ToStoredAllocation(bound.allocation, *state_);
    s_.running.push_back(std::move(j));
  }

  // Where each task runs: the node and the device indices; the task's CPU, memory and share of
  // each device are its request's.
  Allocation LoadAllocation(const Value& value, const Job& job) {
    const ClusterState& state = *state_;
    Map m(value, {"gpu_type", "tasks"});
    Allocation a;
    const bool uses_gpu = job.total_gpu().value() > 0;
    if (const Value* v = m.Find("gpu_type")) {
      const std::string type = v->NonEmptyString();
      std::optional<GpuTypeId> id = state.FindGpuType(type);
      if (!id) {
        std::vector<std::string> types;
        for (GpuTypeId t = 0; t < state.gpu_type_count(); ++t)
          types.push_back(state.gpu_type_name(t));
        v->Fail(internal::UnknownName("GPU type", type, types));
      }
      if (!uses_gpu) v->Fail("the job asks for no GPU");
      if (!job.gpu_types.Accepts(*id)) v->Fail(fmt::format("the job does not accept {}", type));
      a.gpu_type = *id;
    } else if (uses_gpu) {
      value.Fail("missing required field 'gpu_type' (the job asks for GPUs)");
    }
    std::vector<std::string> groups;
    for (const TaskGroup& g : job.groups) groups.push_back(g.name);
    std::set<std::pair<std::uint32_t, std::uint32_t>> placed;
    const Value& tasks = m.Get("tasks");
    for (const Value& item : tasks.Items()) {
      Map t(item, {"group", "index", "node", "devices", "share"});
      TaskAllocation task;
      if (const Value* g = t.Find("group")) {
        const std::string name = g->NonEmptyString();
        auto it = std::find(groups.begin(), groups.end(), name);
        if (it == groups.end()) g->Fail(internal::UnknownName("task group", name, groups));
        task.group = static_cast<std::uint32_t>(it - groups.begin());
      } else if (groups.size() > 1) {
        item.Fail("missing required field 'group' (the job has several groups)");
      }
      const TaskGroup& group = job.groups[task.group];
      if (const Value* i = t.Find("index")) {
        task.index = static_cast<std::uint32_t>(i->Int(0, group.count - 1));
      }
      if (!placed.emplace(task.group, task.index).second) {
        item.Fail(fmt::format("task {} of group {} is placed twice", task.index, group.name));
      }
      const Value& node_value = t.Get("node");
      const std::string node_name = node_value.NonEmptyString();
      std::optional<NodeId> node = state.FindNode(node_name);
      if (!node) {
        std::vector<std::string> names;
        for (const NodeSpec& n : s_.config.cluster.nodes) names.push_back(n.name);
        node_value.Fail(internal::UnknownName("node", node_name, names));
      }
      task.node = *node;
      const TaskRequest& req = group.request;
      task.cpu = req.cpu;
      task.memory = req.memory;
      const NodeState& n = state.node(*node);
      const std::int64_t want = req.gpu.value() == 0 ? 0 : req.shared() ? 1 : req.whole_gpus();
      const Value* devices = t.Find("devices");
      std::vector<Value> items = devices ? devices->Items() : std::vector<Value>{};
      if (static_cast<std::int64_t>(items.size()) != want) {
        (devices ? *devices : item)
            .Fail(fmt::format("the task asks for {} device{}, got {}", want, want == 1 ? "" : "s",
                              items.size()));
      }
      std::set<std::int64_t> seen;
      for (const Value& d : items) {
        const std::int64_t index = d.Int(0, static_cast<std::int64_t>(n.devices.size()) - 1);
        if (!seen.insert(index).second) d.Fail(fmt::format("device {} is listed twice", index));
        const DeviceState& dev = n.devices[static_cast<std::size_t>(index)];
        if (dev.type != a.gpu_type) {
          d.Fail(fmt::format("device {} of {} is a {}, not the allocation's {}", index, node_name,
                             state.gpu_type_name(dev.type), state.gpu_type_name(a.gpu_type)));
        }
        DeviceShare share;
        share.device = static_cast<std::uint32_t>(index);
        share.gpu = req.shared() ? req.gpu : kWholeGpu;
        share.memory = req.shared() ? req.gpu_memory : dev.memory;
        task.devices.push_back(share);
      }
      if (const Value* s = t.Find("share")) {
        if (!req.shared()) s->Fail("only a task that asks for a share of one GPU has a share");
        if (s->Gpus() != req.gpu) {
          s->Fail(fmt::format("the task asks for {} GPU, got {}", Milli(req.gpu.value()),
                              Milli(s->Gpus().value())));
        }
      }
      a.tasks.push_back(std::move(task));
    }
    for (std::uint32_t g = 0; g < job.groups.size(); ++g) {
      for (std::int32_t i = 0; i < job.groups[g].count; ++i) {
        if (!placed.count({g, static_cast<std::uint32_t>(i)})) {
          tasks.Fail(
              fmt::format("task {} of group {} is not placed (a running job has every task "
                          "placed)",
                          i, job.groups[g].name));
        }
      }
    }
    return a;
  }

  Snapshot s_;
  std::optional<ClusterState> state_;
  std::map<JobId, std::string> ids_;  // -> the entry's path
};

}  // namespace

Result<LoadedSnapshot> ParseSnapshot(std::string_view yaml, const std::string& file_name) {
  return internal::LoadDocument<LoadedSnapshot>(
      yaml, file_name, [](const Value& root) { return SnapshotLoader().Load(root); });
}

Result<LoadedSnapshot> LoadSnapshotFile(const std::string& path) {
  Result<std::string> text = internal::ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseSnapshot(*text, path);
}

}  // namespace arbiter::config
