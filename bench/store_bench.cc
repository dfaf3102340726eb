// The store benchmark: durable submissions per second from concurrent submitters, with group
// commit and with one transaction (one fsync) per submission, and the time to recover a store
// full of pending jobs. The data directory is a fresh temporary directory (TMPDIR or /tmp): the
// figures are those of that file system's fsync. The same on PostgreSQL (RunPgStoreBench), on a
// private server the benchmark starts (tests/testing/postgres.h, fsync on).
#include "store_bench.h"

#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "store/store.h"
#include "testing/postgres.h"
#include "workload.h"

namespace arbiter::bench {
namespace {

using Clock = std::chrono::steady_clock;

// A typical submission: one gang of GPU tasks, a GPU type, labels, a command.
job::JobSpec BenchSpec(int thread, std::int64_t i) {
  job::JobSpec s;
  s.name = "job-" + std::to_string(thread) + "-" + std::to_string(i);
  s.user = "user-" + std::to_string(thread);
  s.queue = "training";
  s.priority_class = "P1";
  TaskGroup g;
  g.name = "main";
  g.count = 2;
  g.request.gpu = MilliGpu(8000);
  g.request.cpu = MilliCpu(64000);
  g.request.memory = MemMiB(512 * kGiB);
  s.groups = {g};
  s.gpu_types = {"H800"};
  s.topology_level = "leaf";
  s.labels = {{"team", "nlp"}, {"app", "finetune"}};
  s.submit_time = 1'700'000'000'000 + i;
  s.runtime_estimate = 4 * 3600 * 1000;
  s.checkpoint_interval = 1800 * 1000;
  s.command = "torchrun --nproc-per-node 8 train.py --config configs/finetune.yaml";
  return s;
}

void Print(const char* name, const std::string& suffix, double value, const char* unit) {
  std::printf("BENCH %s%s %.6g %s\n", name, suffix.c_str(), value, unit);
}

// `threads` submitters for `seconds` on `store`; prints the rate (`rate`) and the latency
// percentiles (`latency`_p50_us, _p99_us), with `suffix`.
void Submitters(store::Store& store, int threads, double seconds, std::size_t max_batch,
                const std::string& rate, const std::string& latency, const std::string& suffix) {
  TimedRun run = RunClosedLoop(threads, seconds, [&](int t) {
    return [&store, t](std::int64_t i) {
      Result<store::Submitted> r = store.Submit(BenchSpec(t, i));
      if (!r.ok()) Fail(r.status().message());
    };
  });
  std::vector<double>& all = run.latencies_us;
  const double wall = run.wall_seconds;
  Result<store::Snapshot> snap = store.Load();
  if (!snap.ok()) Fail(snap.status().message());
  if (snap->jobs.size() != all.size()) {
    Fail("store bench: " + std::to_string(all.size()) + " submissions acknowledged, " +
         std::to_string(snap->jobs.size()) + " stored");
  }
  std::printf("# %s%s: %d threads, %zu durable submissions in %.2f s (max_batch %zu)\n",
              latency.c_str(), suffix.c_str(), threads, all.size(), wall, max_batch);
  Print(rate.c_str(), suffix, static_cast<double>(all.size()) / wall, "submits/s");
  Print((latency + "_p50_us").c_str(), suffix, Percentile(all, 0.50), "us");
  Print((latency + "_p99_us").c_str(), suffix, Percentile(all, 0.99), "us");
}

void RunSubmitters(int threads, double seconds, std::size_t max_batch, const std::string& suffix) {
  TempDir dir;
  Result<std::unique_ptr<store::Store>> opened = store::OpenSqliteStore({dir.path(), max_batch});
  if (!opened.ok()) Fail(opened.status().message());
  Submitters(**opened, threads, seconds, max_batch, "store_submits_per_s", "store_submit", suffix);
}

// Fills `store` with `jobs` pending jobs, a quarter of them started (with an allocation).
void Fill(store::Store& store, std::int64_t jobs) {
  constexpr std::int64_t kChunk = 5000;
  for (std::int64_t first = 0; first < jobs; first += kChunk) {
    std::vector<job::JobSpec> specs;
    for (std::int64_t i = first; i < std::min(jobs, first + kChunk); ++i) {
      specs.push_back(BenchSpec(static_cast<int>(i % 8), i));
    }
    Result<std::vector<store::Submitted>> r = store.SubmitBatch(std::move(specs));
    if (!r.ok()) Fail(r.status().message());
    std::vector<store::Event> starts;
    for (std::size_t k = 0; k < r->size(); k += 4) {
      store::Event e;
      e.kind = store::EventKind::kStarted;
      e.job = (*r)[k].id;
      e.time = 1'700'000'100'000;
      for (std::uint32_t t = 0; t < 2; ++t) {
        job::StoredTask task;
        task.index = t;
        task.node = "h800-" + std::to_string((k + t) % 10'000);
        for (std::uint32_t d = 0; d < 8; ++d) {
          task.devices.push_back({d, MilliGpu(1000), GpuMemMiB(0)});
        }
        e.allocation.tasks.push_back(std::move(task));
      }
      e.allocation.gpu_type = "H800";
      starts.push_back(std::move(e));
    }
    Result<std::vector<store::Event>> a = store.Append(std::move(starts));
    if (!a.ok()) Fail(a.status().message());
  }
}

// Fills a store with `jobs` pending jobs (a quarter of them started, with an allocation), closes
// it, and times reopening it and loading everything.
void RunRecovery(std::int64_t jobs) {
  TempDir dir;
  {
    Result<std::unique_ptr<store::Store>> opened = store::OpenSqliteStore({dir.path(), 1024});
    if (!opened.ok()) Fail(opened.status().message());
    Fill(**opened, jobs);
  }
  const Clock::time_point t0 = Clock::now();
  Result<std::unique_ptr<store::Store>> opened = store::OpenSqliteStore({dir.path(), 1024});
  if (!opened.ok()) Fail(opened.status().message());
  Result<store::Snapshot> snap = (*opened)->Load({.include_finished = false});
  if (!snap.ok()) Fail(snap.status().message());
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (static_cast<std::int64_t>(snap->jobs.size()) != jobs)
    Fail("store bench: jobs lost on reload");
  std::printf("# store recovery: open + Load of %lld jobs (a quarter running)\n",
              static_cast<long long>(jobs));
  Print("store_recovery_s", "", seconds, "s");
  Print("store_recovery_jobs_per_s", "", static_cast<double>(jobs) / seconds, "jobs/s");
  // What a server under an order that reads the jobs' service adds to its recovery: every event
  // read again, a batch at a time (Core::ReplayService).
  const Clock::time_point t1 = Clock::now();
  std::size_t events = 0;
  for (std::uint64_t cursor = 0;;) {
    Result<std::vector<store::Event>> batch = (*opened)->EventsSince(cursor, 10000);
    if (!batch.ok()) Fail(batch.status().message());
    events += batch->size();
    if (!batch->empty()) cursor = batch->back().seq;
    if (batch->size() < 10000) break;
  }
  const double replay = std::chrono::duration<double>(Clock::now() - t1).count();
  std::printf("# store events read again: %zu events, a batch of 10,000 at a time\n", events);
  Print("store_events_read_s", "", replay, "s");
  Print("store_events_read_per_s", "", static_cast<double>(events) / replay, "events/s");
}

store::PostgresOptions PgOptions(const std::string& url) {
  store::PostgresOptions options;
  options.url = url;
  return options;
}

// The PostgreSQL store on the server `pg` started: submitters on a fresh database, then (when
// `recovery_jobs` > 0) a database filled with that many jobs, reopened and loaded a batch at a
// time (each_batch, as the server's recovery does).
void RunPg(testing::PostgresInstance& pg, int threads, double seconds, std::size_t max_batch,
           const std::string& suffix, std::int64_t recovery_jobs) {
  {
    store::PostgresOptions options;
    options.url = pg.NewDatabase();
    options.max_batch = max_batch;
    Result<std::unique_ptr<store::Store>> opened = store::OpenPostgresStore(options);
    if (!opened.ok()) Fail(opened.status().message());
    Submitters(**opened, threads, seconds, max_batch, "pg_store_submit_per_s", "pg_store_submit",
               suffix);
  }
  if (recovery_jobs <= 0) return;
  const std::string url = pg.NewDatabase();
  {
    Result<std::unique_ptr<store::Store>> opened = store::OpenPostgresStore(PgOptions(url));
    if (!opened.ok()) Fail(opened.status().message());
    const Clock::time_point t0 = Clock::now();
    Fill(**opened, recovery_jobs);
    std::printf("# pg recovery: filled with %lld jobs in %.1f s\n",
                static_cast<long long>(recovery_jobs),
                std::chrono::duration<double>(Clock::now() - t0).count());
  }
  pg.Sql(url.substr(url.find(":///") + 4, url.find('?') - url.find(":///") - 4),
         "VACUUM ANALYZE jobs");
  const Clock::time_point t0 = Clock::now();
  Result<std::unique_ptr<store::Store>> opened = store::OpenPostgresStore(PgOptions(url));
  if (!opened.ok()) Fail(opened.status().message());
  std::int64_t loaded = 0;
  Result<store::Snapshot> snap = (*opened)->Load(
      {.include_finished = false, .each_batch = [&](std::span<store::StoredJob> batch) {
         loaded += static_cast<std::int64_t>(batch.size());
         return Status::Ok();
       }});
  if (!snap.ok()) Fail(snap.status().message());
  const double s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (loaded != recovery_jobs) Fail("pg store bench: jobs lost on reload");
  std::printf("# pg recovery: open + Load (each_batch) of %lld jobs (a quarter running)\n",
              static_cast<long long>(recovery_jobs));
  Print(recovery_jobs == 1'000'000 ? "pg_recovery_1m_s" : "pg_recovery_s", "", s, "s");
  Print("pg_recovery_jobs_per_s", "", static_cast<double>(recovery_jobs) / s, "jobs/s");
}

}  // namespace

void RunPgStoreBench(int threads, double seconds, std::int64_t recovery_jobs) {
  std::string error;
  // The process's server: stopped at exit, also when Fail exits.
  testing::PostgresInstance* pg = testing::PostgresInstance::Shared(&error);
  if (pg == nullptr) Fail("pg store bench: " + error);
  RunPg(*pg, threads, seconds, 1024, "", recovery_jobs);
}

void RunStoreBench(int threads, double seconds, std::int64_t recovery_jobs) {
  RunSubmitters(threads, seconds, 1024, "");
  RunSubmitters(threads, seconds, 1, "_per_txn");
  if (recovery_jobs > 0) RunRecovery(recovery_jobs);
}

}  // namespace arbiter::bench
