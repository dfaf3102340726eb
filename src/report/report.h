// Reports of simulation runs: a terminal table, JSON with every metric, CSV time series and a
// self-contained HTML report (inline SVG charts, no network). Each takes the runs of one
// scenario, side by side in the order given.
#pragma once

#include <span>
#include <string>

#include "arbiter/status.h"
#include "sim/sim.h"

namespace arbiter::report {

// A readable comparison for the terminal: one column per run; rows for the headline metrics
// (GPU utilisation and allocation, inference latency P50/P99, the worst hour's P99, hours over
// the SLO and SLO-miss minutes, training JCT and completion, JCT and wait mean, median and P95,
// wait P99, longest wait, evictions, GPU-hours lost, jobs completed), then the same per queue.
std::string Table(std::span<const sim::RunResult> runs);

// {"scenario": NAME, "runs": [{"name": ..., "metrics": {...}, "queues": {...}, "classes": {...},
// "workloads": {...}, "services": [...]}]} with the metric names of docs/simulator.md.
std::string Json(std::span<const sim::RunResult> runs, const std::string& scenario);

// Writes DIR/<run>-series.csv (one row per sample) and DIR/<run>-jobs.csv (one row per job) for
// every run, creating DIR if needed. Run names are made file-safe.
Status WriteCsv(std::span<const sim::RunResult> runs, const std::string& dir);

// One HTML page, no external resource: the headline table, then charts of GPU allocation over
// time (all GPUs and per GPU model), pending jobs per queue, inference P99 latency over time and
// per hour (with the SLO), and the JCT CDF per queue, each with every run (its own colour and
// dash pattern); an empty chart says why.
std::string Html(std::span<const sim::RunResult> runs, const std::string& scenario);

}  // namespace arbiter::report
