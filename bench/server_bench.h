#pragma once

namespace arbiter::bench {

// The server over HTTP: an in-process `arbiter server` (durable SQLite store in a fresh temporary
// directory, no virtual nodes) and `clients` client threads, each with one keep-alive connection,
// submitting jobs for `seconds`. Every submission is acknowledged only once durably committed.
// Prints BENCH server_submit_per_s, server_submit_p50_us, server_submit_p99_us.
void RunServerBench(int clients = 16, double seconds = 3.0);

}  // namespace arbiter::bench
