#pragma once

#include <cstdint>

namespace arbiter::bench {

// The durable store (src/store/store.h), SQLite under a fresh temporary directory:
// `threads` threads submit jobs for `seconds` each with group commit and with one transaction per
// submit, then the store is filled with `recovery_jobs` pending jobs, closed, and reopened and
// loaded. Prints BENCH store_submits_per_s, store_submit_p50_us, store_submit_p99_us (group
// commit), the same with suffix _per_txn, and store_recovery_s (open + Load).
void RunStoreBench(int threads = 8, double seconds = 2.0, std::int64_t recovery_jobs = 100'000);

// The PostgreSQL store on a private PostgreSQL 15 server the benchmark starts and stops
// (tests/testing/postgres.h: a temporary directory, unix socket, fsync on): `threads` threads
// submit for `seconds` (BENCH pg_store_submit_per_s, pg_store_submit_p50_us, _p99_us); with
// `recovery_jobs` > 0 a database is filled with that many jobs (a quarter running), then opened
// and loaded a batch at a time as the server's recovery does (BENCH pg_recovery_1m_s for a
// million, else pg_recovery_s).
void RunPgStoreBench(int threads = 64, double seconds = 3.0, std::int64_t recovery_jobs = 0);

}  // namespace arbiter::bench
