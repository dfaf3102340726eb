// Arbiter's own job JSON: {"jobs": [{"name": ..., "submit": seconds, ...}]} or the bare array.
// The fields are those of the own CSV (kJobFields).
#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "job/limits.h"
#include "trace/csv.h"
#include "trace/readers.h"

namespace arbiter::trace::internal {
namespace {

using nlohmann::json;

constexpr std::string_view kStringFields[] = {"name", "queue", "user", "priority_class", "kind"};

bool IsStringField(std::string_view name) {
  for (std::string_view field : kStringFields) {
    if (field == name) return true;
  }
  return false;
}

// A JSON value in a problem, cut short when long.
std::string Shown(const json& value) {
  std::string text = value.dump();
  constexpr std::size_t kMax = 60;
  if (text.size() > kMax) text = text.substr(0, kMax - 3) + "...";
  return text;
}

// Sets one field of `job` from a JSON value; returns the problem, or empty.
std::string SetJsonField(const std::string& name, const json& value, TraceJob* job) {
  if (value.is_null()) return {};  // as if absent
  if (IsStringField(name)) {
    if (!value.is_string()) return name + ": not a string: " + Shown(value);
    return SetJobField(name, value.get_ref<const std::string&>(), job);
  }
  if (name == "gpu_models") {
    if (value.is_string()) {
      job->gpu_models = SplitList(value.get_ref<const std::string&>());
      return {};
    }
    if (!value.is_array()) return name + ": not a list of GPU models: " + Shown(value);
    job->gpu_models.clear();
    for (const json& model : value) {
      if (!model.is_string()) return name + ": not a GPU model name: " + Shown(model);
      const std::string_view trimmed = Trim(model.get_ref<const std::string&>());
      if (!trimmed.empty()) job->gpu_models.emplace_back(trimmed);
    }
    return {};
  }
  // Numbers; gpus and cpu may also be strings such as "500m".
  if (value.is_number()) return SetJobField(name, value.dump(), job);
  if (value.is_string() && (name == "gpus" || name == "cpu")) {
    const std::string& text = value.get_ref<const std::string&>();
    if (Trim(text).empty()) return name + ": empty";
    return SetJobField(name, text, job);
  }
  return name + ": not a number: " + Shown(value);
}

// Objects and arrays within each other: a trace needs 4 ({"jobs": [{"gpu_models": [..]}]}); the
// limit is the API's bodies' (limits::FindTooDeep). A parsed document is walked (and shown in
// problems) recursively, so a deeper text is refused before it is parsed: the 1-based line of the
// first bracket past the limit, or 0 when within it.
std::int64_t LineTooDeep(std::string_view text) {
  const std::size_t at = limits::FindTooDeep(text);
  if (at == std::string_view::npos) return 0;
  return 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n');
}

// The 1-based line of the first occurrence of `token` (1 when not found).
std::int64_t LineOf(std::string_view text, std::string_view token) {
  const std::size_t at = token.empty() ? std::string_view::npos : text.find(token);
  if (at == std::string_view::npos) return 1;
  return 1 + std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n');
}

std::string ReadJob(const json& entry, TraceJob* job) {
  if (!entry.is_object()) return "job: not an object: " + Shown(entry);
  for (const auto& [name, value] : entry.items()) {
    if (!IsJobField(name)) return UnknownField("field", name);
  }
  for (const auto& [name, value] : entry.items()) {
    std::string problem = SetJsonField(name, value, job);
    if (!problem.empty()) return problem;
  }
  for (const char* required : {"submit", "duration"}) {
    const auto it = entry.find(required);
    if (it == entry.end() || it->is_null()) return std::string(required) + ": missing";
  }
  return {};
}

}  // namespace

Result<Trace> ReadArbiterJson(std::string_view text, const std::string& file_name) {
  if (const std::int64_t line = LineTooDeep(text); line > 0) {
    return LineError(
        file_name, line,
        "malformed JSON: nested deeper than " + std::to_string(limits::kMaxJsonDepth) + " levels");
  }
  json document;
  try {
    document = json::parse(text.begin(), text.end());
  } catch (const json::parse_error& error) {
    std::int64_t line = 1;
    const std::size_t end = std::min<std::size_t>(error.byte, text.size());
    for (std::size_t i = 0; i < end; ++i) {
      if (text[i] == '\n') ++line;
    }
    std::string message = error.what();
    const std::size_t prefix = message.find("] ");  // "[json.exception.parse_error.101] "
    if (prefix != std::string::npos) message.erase(0, prefix + 2);
    return LineError(file_name, line, "malformed JSON: " + message);
  } catch (const json::exception& error) {
    // A number out of range ("number overflow parsing '1e400'"), the token quoted.
    std::string message = error.what();
    const std::size_t prefix = message.find("] ");  // "[json.exception.out_of_range.406] "
    if (prefix != std::string::npos) message.erase(0, prefix + 2);
    std::string_view token;
    if (const std::size_t open = message.find('\''); open != std::string::npos) {
      const std::size_t close = message.rfind('\'');
      if (close > open) token = std::string_view(message).substr(open + 1, close - open - 1);
    }
    return LineError(file_name, LineOf(text, token), "malformed JSON: " + message);
  }

  const json* jobs = &document;
  if (document.is_object()) {
    for (const auto& [name, value] : document.items()) {
      if (name != "jobs") {
        return LineError(file_name, 1,
                         "unknown top-level field " + Quote(name) + " (expected \"jobs\")");
      }
    }
    const auto it = document.find("jobs");
    if (it == document.end()) return LineError(file_name, 1, "no \"jobs\" field");
    if (!it->is_array()) return LineError(file_name, 1, "\"jobs\": not an array");
    jobs = &*it;
  } else if (!document.is_array()) {
    return LineError(file_name, 1, "expected {\"jobs\": [...]} or an array of jobs");
  }

  Trace trace;
  std::int64_t index = 0;
  for (const json& entry : *jobs) {
    ++index;
    TraceJob job;
    job.line = index;
    std::string problem = ReadJob(entry, &job);
    if (!problem.empty()) {
      trace.bad_rows.push_back({index, std::move(problem)});
      continue;
    }
    if (job.name.empty()) job.name = "json-" + std::to_string(index);
    trace.jobs.push_back(std::move(job));
  }
  return trace;
}

}  // namespace arbiter::trace::internal
