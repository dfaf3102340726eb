#pragma once

namespace arbiter::bench {

// High availability on a private PostgreSQL 15 server the benchmark starts and stops
// (tests/testing/postgres.h), docs/design/ha.md:
// - durable submissions through the API of a server leading on PostgreSQL: `clients` keep-alive
//   clients for `seconds` (BENCH pg_submit_per_s, pg_submit_p50_us, pg_submit_p99_us and
//   pg_submit_p99_ms);
// - failover: two `arbiter server` processes with virtual nodes on one database, the default
//   lease (5 s); `kills` times the leader is killed with SIGKILL (and started again, as a
//   supervisor would, and waited for until its warm copy of the active jobs is read), and a job
//   submitted from then on (to whichever server takes it, following redirects) is waited for
//   until it runs, while `arbiter submit` of another runs with both addresses. BENCH
//   failover_p50_s and failover_p99_s: from the kill to the first placement by the new leader;
//   failover_cli_p50_s and failover_cli_p99_s: to the command's acknowledgement. The same again
//   with a million held jobs in the store (failover_1m_*; ARBITER_BENCH_FAILOVER_JOBS sets the
//   count, 0 skips it).
void RunHaBench(int clients = 64, double seconds = 3.0, int kills = 10);

}  // namespace arbiter::bench
