// Recorded history for `arbiter whatif` (docs/whatif.md).
#include "cli/history.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <utility>

#include "config/reader.h"
#include "job/resolve.h"
#include "store/codec.h"

namespace arbiter::cli {

std::string WriteHistory(const History& history) {
  nlohmann::json jobs = nlohmann::json::array();
  for (const store::StoredJob& job : history.jobs) jobs.push_back(store::StoredJobToJson(job));
  nlohmann::json doc = {{"history_version", kHistoryVersion},
                        {"taken_at_ms", history.taken_at},
                        {"snapshot", history.snapshot_text},
                        {"jobs", std::move(jobs)}};
  return doc.dump(1) + "\n";
}

Result<History> ParseHistory(std::string_view text, const std::string& file_name) {
  auto fail = [&](const std::string& problem) {
    return Status::InvalidArgument(fmt::format("{}: {}", file_name, problem));
  };
  Result<nlohmann::json> doc = store::ParseJson(text);
  if (!doc.ok()) return fail(doc.status().message());
  if (!doc->is_object()) return fail("expected a JSON object (arbiter history -o FILE)");
  const nlohmann::json& d = *doc;
  if (!d.contains("history_version") || d["history_version"] != kHistoryVersion) {
    return fail(fmt::format("history_version: expected {}", kHistoryVersion));
  }
  History out;
  if (!d.contains("taken_at_ms") || !d["taken_at_ms"].is_number_integer()) {
    return fail("taken_at_ms: expected Unix milliseconds");
  }
  out.taken_at = d["taken_at_ms"].get<Millis>();
  if (!d.contains("snapshot") || !d["snapshot"].is_string()) {
    return fail("snapshot: expected the snapshot's YAML text");
  }
  out.snapshot_text = d["snapshot"].get<std::string>();
  Result<config::LoadedSnapshot> loaded =
      config::ParseSnapshot(out.snapshot_text, file_name + ": snapshot");
  if (!loaded.ok()) return loaded.status();
  out.snapshot = std::move(loaded->snapshot);
  if (!d.contains("jobs") || !d["jobs"].is_array()) return fail("jobs: expected a list");
  for (std::size_t i = 0; i < d["jobs"].size(); ++i) {
    const nlohmann::json& j = d["jobs"][i];
    const std::string at = fmt::format("jobs[{}]", i);
    if (!j.is_object() || !j.contains("id") || !j["id"].is_number_unsigned() ||
        !j.contains("spec") || !j.contains("status")) {
      return fail(at + ": expected {\"id\", \"spec\", \"status\"}");
    }
    store::StoredJob job;
    job.id = j["id"].get<JobId>();
    Result<job::JobSpec> spec = store::JobSpecFromJson(j["spec"], at + ".spec");
    if (!spec.ok()) return fail(spec.status().message());
    Result<store::JobStatus> status = store::JobStatusFromJson(j["status"], at + ".status");
    if (!status.ok()) return fail(status.status().message());
    job.spec = std::move(spec).value();
    job.status = std::move(status).value();
    out.jobs.push_back(std::move(job));
  }
  std::sort(out.jobs.begin(), out.jobs.end(),
            [](const store::StoredJob& a, const store::StoredJob& b) { return a.id < b.id; });
  return out;
}

Result<History> LoadHistoryFile(const std::string& path) {
  Result<std::string> text = config::internal::ReadFile(path);
  if (!text.ok()) return text.status();
  return ParseHistory(*text, path);
}

ReplayWindow WholeHistory(const History& history) {
  ReplayWindow w{history.taken_at, history.taken_at};
  for (const store::StoredJob& job : history.jobs)
    w.since = std::min(w.since, job.spec.submit_time);
  return w;
}

Result<Replay> BuildReplay(const History& history, const ReplayWindow& window,
                           const ClusterState& state, const EngineOptions& engine) {
  Replay out;
  for (const store::StoredJob& stored : history.jobs) {
    const job::JobSpec& spec = stored.spec;
    const store::JobStatus& status = stored.status;
    if (spec.submit_time < window.since || spec.submit_time >= window.until) continue;
    const bool started = status.first_start_time >= 0 && status.first_start_time < window.until;
    const bool finished =
        job::IsFinished(status.state) && status.end_time >= 0 && status.end_time <= window.until;
    if (status.state == job::JobState::kHeld ||
        (!started &&
         (status.state == job::JobState::kCancelled || status.state == job::JobState::kFailed))) {
      ++out.left_out;
      continue;
    }
    job::JobSpec as_run = spec;
    if (!status.priority_class.empty()) as_run.priority_class = status.priority_class;
    Result<Job> job = job::ToJob(0, as_run, state);
    if (!job.ok()) {
      return Status::InvalidArgument(
          fmt::format("job {} ('{}'): {}", stored.id, spec.name, job.status().message()));
    }
    sim::SimJob sj;
    sj.job = std::move(job).value();
    sj.job.submit_time = spec.submit_time - window.since;
    sj.kind = sj.job.checkpoint_interval > 0 ? sim::WorkKind::kTraining : sim::WorkKind::kBatch;
    sj.workload = "history";
    ReplayJob rj;
    rj.id = stored.id;
    if (started) rj.recorded_start = status.first_start_time - window.since;
    const Millis estimate =
        sj.job.runtime_estimate > 0 ? sj.job.runtime_estimate : engine.backfill.default_runtime;
    if (finished && started && status.evictions.empty()) {
      // One run from its first start to its end: its running time as observed.
      sj.work = std::max<Millis>(1, status.end_time - status.first_start_time);
      rj.observed = true;
    } else if (finished && started) {
      // Evicted and started again: the last run's length, which resumed from a checkpoint the
      // history does not say, is a lower bound; the estimate when there is one.
      sj.work = std::max<Millis>(1, status.end_time - status.start_time);
      if (sj.job.runtime_estimate > sj.work) sj.work = sj.job.runtime_estimate;
    } else if (started) {
      // Running when the window ends: the estimate, at least what it has run.
      sj.work = std::max(estimate, window.until - status.first_start_time);
    } else {
      sj.work = estimate;
    }
    out.workload.jobs.push_back(std::move(sj));
    out.jobs.push_back(rj);
  }
  return out;
}

}  // namespace arbiter::cli
