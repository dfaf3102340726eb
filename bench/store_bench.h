#pragma once

#include <cstdint>

namespace arbiter::bench {

// The durable store (include/arbiter/store.h), SQLite under a fresh temporary directory:
// `threads` threads submit jobs for `seconds` each with group commit and with one transaction per
// submit, then the store is filled with `recovery_jobs` pending jobs, closed, and reopened and
// loaded. Prints BENCH store_submits_per_s, store_submit_p50_us, store_submit_p99_us (group
// commit), the same with suffix _per_txn, and store_recovery_s (open + Load).
void RunStoreBench(int threads = 8, double seconds = 2.0, std::int64_t recovery_jobs = 100'000);

}  // namespace arbiter::bench
