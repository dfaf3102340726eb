#include "report/plan.h"

#include <fmt/format.h>

#include <iterator>
#include <string>

namespace arbiter::report {
namespace {

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
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
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<int>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace

std::string PlanJson(const ClusterState& state, std::span<const Job> jobs, const Plan& plan,
                     TimeStyle style) {
  std::string text;
  auto out = std::back_inserter(text);
  fmt::format_to(out, "{{\"now_ms\": {}, \"binds\": [", plan.now);
  for (std::size_t i = 0; i < plan.binds.size(); ++i) {
    const Bind& b = plan.binds[i];
    const Job& job = jobs[b.pending_index];
    fmt::format_to(out, "{}\n  {{\"job\": {}, \"name\": {}, \"gpu_type\": {}, \"tasks\": [",
                   i ? "," : "", job.id, JsonString(job.name),
                   b.allocation.gpu_type == kNone
                       ? "null"
                       : JsonString(state.gpu_type_name(b.allocation.gpu_type)));
    for (std::size_t t = 0; t < b.allocation.tasks.size(); ++t) {
      const TaskAllocation& task = b.allocation.tasks[t];
      fmt::format_to(out, "{}{{\"group\": {}, \"index\": {}, \"node\": {}, \"devices\": [",
                     t ? ", " : "", task.group, task.index, JsonString(state.node(task.node).name));
      for (std::size_t d = 0; d < task.devices.size(); ++d) {
        fmt::format_to(out, "{}{{\"device\": {}, \"milli_gpu\": {}}}", d ? ", " : "",
                       task.devices[d].device, task.devices[d].gpu.value());
      }
      fmt::format_to(out, "]}}");
    }
    fmt::format_to(out, "]}}");
  }
  fmt::format_to(out, "\n], \"unplaced\": [");
  for (std::size_t i = 0; i < plan.unplaced.size(); ++i) {
    const Unplaced& u = plan.unplaced[i];
    std::string counts;
    for (const CauseCount& c : u.reason.node_counts)
      counts += fmt::format("{}{}: {}", counts.empty() ? "" : ", ", JsonString(CauseName(c.cause)),
                            c.nodes);
    fmt::format_to(
        out,
        "{}\n  {{\"job\": {}, \"name\": {}, \"stage\": {}, \"cause\": {}, \"verdict\": {}, "
        "\"nodes_total\": {}, "
        "\"node_counts\": {{{}}}, \"detail\": {}, \"message\": {}}}",
        i ? "," : "", u.job, JsonString(jobs[u.pending_index].name),
        JsonString(StageName(u.reason.stage)), JsonString(CauseName(u.reason.cause)),
        JsonString(u.reason.verdict == Verdict::kNever ? "never" : "wait"), u.reason.nodes_total,
        counts, JsonString(u.reason.detail), JsonString(u.reason.Describe(style)));
  }
  fmt::format_to(out, "\n]}}\n");
  return text;
}

}  // namespace arbiter::report
