// The load itself, on one thread: N simulated node agents (register, then sync in a loop,
// running fake tasks), M event-stream watchers, an open-loop stream of submissions and /healthz
// probes, all over real loopback connections to one server; and what they measured.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "loadgen/workload.h"

namespace arbiter::loadgen {

struct LoadOptions {
  std::string host = "127.0.0.1";
  int port = 0;
  Tokens tokens;
  ClusterShape shape;  // agents = shape.nodes, named node-0 ...
  JobTimes times;
  std::uint32_t watchers = 1000;
  double submit_rate = 500;  // submissions per second, open loop
  int submitters = 8;        // their keep-alive connections
  double healthz_rate = 20;  // probes per second, on a connection of their own
  double warmup_s = 10;      // agents register and sync; watchers connect
  double duration_s = 60;    // the measured window, after the warmup
  std::uint64_t seed = 1;
  // The server's process, sampled once a second (-1: not known, nothing sampled) and asked
  // whether it still runs (the run stops early when it does not).
  pid_t server_pid = -1;
  std::function<bool()> server_alive;
};

// What a run measured: latencies and counts over the measured window, errors over the whole run.
struct LoadResults {
  double window_s = 0;  // as measured (shorter if the run stopped early)
  std::vector<double> submit_ms, healthz_ms, assign_ms, event_lag_ms, loop_lag_ms;
  std::uint64_t submitted = 0;           // 201 (or 200: duplicate) answers
  std::uint64_t assigned = 0;            // tasks first seen by their agent
  std::uint64_t completed = 0;           // tasks reported ended with exit code 0
  std::uint64_t stopped = 0;             // tasks reported ended by an eviction's SIGTERM
  std::uint64_t events = 0;              // server-sent events received, all watchers
  std::uint64_t syncs = 0;               // sync answers (200)
  std::uint64_t registrations = 0;       // accepted registrations, whole run
  std::uint32_t agents_registered = 0;   // agents registered at the window's start
  std::uint32_t agents_live = 0;         // agents with a sync answered in the window's last 10 s
  std::uint32_t watchers_streaming = 0;  // watchers with a stream open at the window's end
  std::map<std::string, std::uint64_t> event_kinds;  // the first watcher's events, by kind
  std::map<std::string, std::uint64_t> errors;       // by kind, whole run
  // The server process over the window (zero when not sampled).
  bool sampled = false;
  std::int64_t server_threads_max = 0;
  double server_rss_mib_max = 0;
  double server_cpu_cores = 0;
  double self_cpu_cores = 0;  // the load generator's own processor use
  bool server_died = false;
  bool interrupted = false;  // SIGINT or SIGTERM
  std::string sync_form;     // the sync answers' form: "revision" (by difference) or "version"
};

LoadResults RunLoad(const LoadOptions& options);

// Polls GET /readyz until it answers 200 (true) or `seconds` pass (false).
bool WaitReady(const std::string& host, int port, double seconds);

}  // namespace arbiter::loadgen
