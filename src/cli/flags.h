// The one mapping from a field an error names (the API's, as the server or the shared validator
// reports it: `groups[0].gpu_milli`, `state`, `quota.H800.nominal`) to the flag the user typed
// (`-g/--gpus`, `-s/--state`, `--nominal`), per command, so that every error of a command given
// by its flags names a flag.
#pragma once

#include <string>
#include <string_view>

namespace arbiter::cli {

struct FlagOfField {
  std::string_view command;  // the subcommand: "submit"
  std::string_view field;    // a field, or a prefix of it; `*` matches one name between dots
  std::string_view flag;
};

inline constexpr FlagOfField kFlagsOfFields[] = {
    {"submit", "name", "--name"},
    {"submit", "queue", "-q/--queue"},
    {"submit", "priority_class", "-p/--priority-class"},
    {"submit", "groups[0].tasks", "-n/--tasks"},
    {"submit", "groups[0].gpu_milli", "-g/--gpus"},
    {"submit", "groups[0].gpu_memory_mib", "--gpu-memory"},
    {"submit", "groups[0].cpu_milli", "--cpu"},
    {"submit", "groups[0].memory_mib", "--memory"},
    {"submit", "groups", "-n/--tasks, -g/--gpus, --cpu, --memory"},
    {"submit", "gpu_types", "-t/--gpu-type"},
    {"submit", "topology.level", "--topology"},
    {"submit", "topology", "--topology"},
    {"submit", "runtime_estimate_ms", "-r/--runtime"},
    {"submit", "checkpoint_interval_ms", "--checkpoint-interval"},
    {"submit", "argv", "the command after --"},
    {"submit", "command", "--sh"},
    {"submit", "env", "-e/--env"},
    {"submit", "max_retries", "--max-retries"},
    {"submit", "idempotency_key", "--idempotency-key"},
    {"jobs", "queue", "-q/--queue"},
    {"jobs", "state", "-s/--state"},
    {"jobs", "user", "-u/--user"},
    {"jobs", "limit", "--limit"},
    {"set-priority", "priority_class", "-p/--priority-class"},
    {"set-quota", "quota.*.nominal", "--nominal"},
    {"set-quota", "quota.*.borrowing_limit", "--borrowing-limit"},
    {"set-quota", "quota.*.lending_limit", "--lending-limit"},
    {"set-quota", "quota.*.max", "--max"},
    {"set-quota", "queue", "QUEUE"},
};

// Whether `field` is `pattern` or lies under it (`pattern[...]`, `pattern.x`); `*` in the pattern
// matches one name (no dot).
inline bool FieldMatches(std::string_view pattern, std::string_view field) {
  std::size_t p = 0;
  std::size_t f = 0;
  while (p < pattern.size()) {
    if (pattern[p] == '*') {
      while (f < field.size() && field[f] != '.') ++f;
      ++p;
      continue;
    }
    if (f >= field.size() || field[f] != pattern[p]) return false;
    ++p;
    ++f;
  }
  return f == field.size() || field[f] == '[' || field[f] == '.';
}

// The flag of `command` that sets `field`, or empty when none does.
inline std::string FlagOf(std::string_view command, std::string_view field) {
  for (const FlagOfField& m : kFlagsOfFields) {
    if (m.command == command && FieldMatches(m.field, field)) return std::string(m.flag);
  }
  return {};
}

// `message` (which starts with `field: `, as every error does) with the field replaced by the
// flag of `command` that sets it; unchanged when no flag does.
inline std::string NameTheFlag(std::string_view command, std::string_view field,
                               const std::string& message) {
  const std::string flag = FlagOf(command, field);
  if (flag.empty() || field.empty()) return message;
  if (message.rfind(std::string(field) + ": ", 0) == 0) return flag + message.substr(field.size());
  return flag + ": " + message;
}

}  // namespace arbiter::cli
