#pragma once

#include <cstdint>
#include <string>

namespace arbiter::bench {

// The server over HTTP: an in-process `arbiter server` (durable SQLite store in a fresh temporary
// directory, no virtual nodes) and client threads, each with one keep-alive connection,
// submitting jobs for `seconds`: 16 clients, then `clients`. Every submission is acknowledged only
// once durably committed. Prints BENCH server_submit_per_s, server_submit_p50_us,
// server_submit_p99_us (`clients` clients), and the same with suffix _16_clients. Then fills a
// store with `recovery_jobs` pending jobs and prints BENCH server_recovery_s, the time from
// starting a server on it to ready.
// The recovery is timed in a new process (this program, --only server-recovery), as a server
// starts.
void RunServerBench(int clients = 64, double seconds = 3.0, std::int64_t recovery_jobs = 100'000);

// Starts a server on DIR/cluster.yaml and DIR/data and prints BENCH server_recovery_s.
void RunServerRecovery(const std::string& dir);

}  // namespace arbiter::bench
