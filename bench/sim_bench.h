#pragma once

#include <cstdint>
#include <string>

namespace arbiter::bench {

// Replays a Philly-shaped trace of `jobs` jobs, drawn from the shipped Philly sample's GPU counts
// and durations with Poisson arrivals at 80% offered load, on `gpus` GPUs (8 per node); prints
// BENCH lines named with `label` (e.g. "100k": sim_philly100k_s).
void RunSimBench(const std::string& sample, std::int64_t jobs, std::int64_t gpus,
                 std::uint64_t seed, const std::string& label);

// Replays `jobs` jobs drawn from the shipped Philly sample with arrivals compressed to three times
// the capacity of 64 nodes x 8 GPUs in four racks (four queues, jobs dealt round robin), under
// strict FIFO, the default order with backfill, and fair share; prints
// BENCH sim_backlog20k_{fifo,default,fairshare}_s; `policy` names one of them to run it alone.
void RunBacklogBench(const std::string& sample, std::int64_t jobs, std::uint64_t seed,
                     const std::string& policy = "", bool skip = true);

// Writes the backlog benchmark's workload (the same jobs and arrivals) as a Tiresias simulator
// trace (job_id,num_gpu,submit_time,iterations,model_name,duration,interval; whole seconds), so
// that Arbiter's scenarios and Tiresias's simulator replay the same jobs.
void WriteBacklogTrace(const std::string& sample, std::int64_t jobs, std::uint64_t seed,
                       const std::string& path);

}  // namespace arbiter::bench
