#pragma once

#include <cstdint>
#include <string>

namespace arbiter::bench {

// The servers' cluster of the benchmarks (this one and cli_bench.h): 64 nodes of 8 H800 in 8
// leaves, one queue, an admin token `bench-admin-token`, cycles at most once a second; the
// submitted jobs mostly wait (they pile up as a server's queue does under a submission burst), so
// each cycle also orders and explains them.
inline constexpr const char* kServerBenchCluster = R"(
topology: {levels: [leaf]}
priority_classes:
  - {name: P1, value: 100}
queues:
  - {name: training}
nodes:
  - name: h800-{i}
    count: 64
    gpus: {model: H800, count: 8, memory: 80Gi}
    cpu: 192
    memory: 2Ti
    topology: {leaf: "leaf-{i/8}"}
server:
  tokens:
    - {name: bench, token: bench-admin-token, role: admin}
  cycle_min_interval: 1s
  cycle_period: 5s
  max_active_jobs_per_user: 0
)";

// The server over HTTP: an in-process `arbiter server` (durable SQLite store in a fresh temporary
// directory, no virtual nodes) and client threads, each with one keep-alive connection,
// submitting jobs for `seconds`: 16 clients, then `clients`. Every submission is acknowledged only
// once durably committed. Prints BENCH server_submit_per_s, server_submit_p50_us,
// server_submit_p99_us (`clients` clients), and the same with suffix _16_clients. Then fills a
// store with `recovery_jobs` pending jobs and prints BENCH server_recovery_s, the time from
// starting a server on it to ready, and server_recovery_cpu_s, the CPU time of it.
// The recovery is timed in a new process (this program, --only server-recovery), as a server
// starts. With ARBITER_BENCH_RECOVERY_KEEP=DIR the store is filled in DIR and kept, or used as it
// is when DIR holds one already.
void RunServerBench(int clients = 64, double seconds = 3.0, std::int64_t recovery_jobs = 100'000);

// Submissions from `clients` keep-alive clients for `seconds` to an in-process server (over TLS
// when `tls`; on the PostgreSQL store `store` when given, else SQLite in a temporary directory).
// Prints BENCH NAME_per_s, NAME_p50_us and NAME_p99_us, NAME being `name` then `suffix`.
struct SubmitFigures {
  double per_s = 0, p50_us = 0, p99_us = 0;
};
SubmitFigures RunSubmitClients(int clients, double seconds, const std::string& name,
                               const std::string& suffix, bool tls, const std::string& store);

// Starts a server on DIR/cluster.yaml and DIR/data, prints BENCH server_recovery_s and
// server_recovery_cpu_s, and ends the process.
void RunServerRecovery(const std::string& dir);

}  // namespace arbiter::bench
