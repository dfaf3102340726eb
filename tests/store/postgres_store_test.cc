// What only the PostgreSQL store promises, on a private PostgreSQL 15 server
// (testing/postgres.h): recovery on reopening, many jobs loaded in batches, fencing by the
// leader's epoch, a session terminated under the writer, a refused statement undoing only its
// call, the schema version check, migrations by servers starting together, and the libpq
// wrapper's answers and errors. The behaviour every store shares is StoreTest's
// (tests/store/store_test.cc), run on PostgreSQL too.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "store/fixtures.h"
#include "store/leader.h"
#include "store/pg.h"
#include "store/store.h"
#include "testing/fault_proxy.h"
#include "testing/postgres.h"

namespace arbiter::store {
namespace {

using fixtures::JobEvent;
using fixtures::On;
using fixtures::Spec;
using fixtures::Start;

using arbiter::testing::FaultProxy;
using arbiter::testing::PostgresInstance;
using Clock = std::chrono::steady_clock;

PostgresInstance* Server() {
  std::string error;
  PostgresInstance* pg = PostgresInstance::Shared(&error);
  // Never skipped: scripts/install-deps.sh installs PostgreSQL.
  EXPECT_NE(pg, nullptr) << "no PostgreSQL server for the test: " << error;
  return pg;
}

// The database's name in a URL of the test server.
std::string DbName(const std::string& url) {
  const std::size_t begin = url.find(":///") + 4;
  return url.substr(begin, url.find('?') - begin);
}

std::unique_ptr<Store> OpenOrDie(const std::string& url, std::uint64_t epoch = 0,
                                 std::function<void()> on_fenced = nullptr) {
  PostgresOptions options;
  options.url = url;
  options.epoch = epoch;
  options.on_fenced = std::move(on_fenced);
  Result<std::unique_ptr<Store>> store = OpenPostgresStore(options);
  EXPECT_TRUE(store.ok()) << store.status().message();
  return store.ok() ? std::move(store).value() : nullptr;
}

// A proxy in front of the test server's socket, and the URL of database `db` through it.
std::unique_ptr<FaultProxy> ProxyFor(PostgresInstance* pg) {
  return std::make_unique<FaultProxy>(pg->socket_dir() + "/.s.PGSQL." + std::to_string(pg->port()));
}
std::string UrlThrough(const FaultProxy& proxy, const std::string& db) {
  return "postgresql://arbiter@127.0.0.1:" + std::to_string(proxy.port()) + "/" + db +
         "?sslmode=disable";
}

LeaderOptions Leader(const std::string& url, const std::string& id) {
  LeaderOptions options;
  options.url = url;
  options.id = id;
  options.address = "http://" + id + ":1";
  options.lease = std::chrono::milliseconds(1000);
  return options;
}

PostgresOptions PgOptions(const std::string& url) {
  PostgresOptions options;
  options.url = url;
  return options;
}

TEST(PostgresStore, RecoversEverythingAfterReopening) {
  PostgresInstance* pg = Server();
  ASSERT_NE(pg, nullptr);
  const std::string url = pg->NewDatabase();
  Snapshot before;
  std::vector<Event> events_before;
  {
    std::unique_ptr<Store> store = OpenOrDie(url);
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(store->Submit(Spec("j" + std::to_string(i))).ok());
    Event prio = JobEvent(4, EventKind::kPriorityChanged, 50, "admin");
    prio.priority_class = "P0";
    ASSERT_TRUE(store
                    ->Append({Start(1, 10, "h800-0"), JobEvent(1, EventKind::kCheckpointed, 20),
                              Start(2, 10, "h800-1"), JobEvent(2, EventKind::kEvicted, 30),
                              JobEvent(3, EventKind::kHeld, 40), prio,
                              JobEvent(5, EventKind::kCancelled, 60, "alice")})
                    .ok());
    QueueQuotaOverride q;
    q.queue = "training";
    q.quota["gpu"] = QuotaSpec{MilliGpu(16000), std::nullopt, MilliGpu(0), MilliGpu(32000)};
    ASSERT_TRUE(store->SetQueueQuota(q).ok());
    ASSERT_TRUE(store->SetNodeState({"h800-3", NodeAdminState::kCordoned, "ecc", 70, "ops"}).ok());
    ASSERT_TRUE(store->Append({Start(6, 80, "h800-2"), JobEvent(6, EventKind::kRetried, 90)}).ok());
    ASSERT_TRUE(store->SaveQueueUsage({{"training", 1.5e9, 95}, {"batch", 2.5, 95}}).ok());
    Result<Snapshot> snap = store->Load();
    ASSERT_TRUE(snap.ok()) << snap.status().message();
    before = *snap;
    events_before = *store->EventsSince(0, 1000);
  }
  std::unique_ptr<Store> store = OpenOrDie(url);
  ASSERT_NE(store, nullptr);
  Result<Snapshot> after = store->Load();
  ASSERT_TRUE(after.ok()) << after.status().message();
  ASSERT_EQ(after->jobs.size(), before.jobs.size());
  for (std::size_t i = 0; i < before.jobs.size(); ++i) {
    EXPECT_EQ(after->jobs[i].id, before.jobs[i].id);
    EXPECT_TRUE(after->jobs[i].spec == before.jobs[i].spec) << i;
    EXPECT_TRUE(after->jobs[i].status == before.jobs[i].status) << i;
  }
  EXPECT_EQ(after->jobs[0].status.state, job::JobState::kRunning);
  EXPECT_TRUE(after->jobs[0].status.allocation == On("h800-0"));
  EXPECT_EQ(after->jobs[1].status.evictions, std::vector<Millis>{30});
  EXPECT_EQ(after->jobs[3].status.priority_class, "P0");
  EXPECT_EQ(after->jobs[5].status.retries, 1);
  ASSERT_EQ(after->queue_quotas.size(), 1u);
  EXPECT_EQ(after->queue_quotas[0].quota.at("gpu").max, MilliGpu(32000));
  ASSERT_EQ(after->nodes.size(), 1u);
  EXPECT_EQ(after->nodes[0].reason, "ecc");
  ASSERT_EQ(after->queue_usage.size(), 2u);
  EXPECT_EQ(after->queue_usage[1].queue, "training");
  EXPECT_EQ(after->queue_usage[1].usage, 1.5e9);
  EXPECT_EQ(after->queue_usage[0].usage, 2.5);
  EXPECT_EQ(after->last_seq, before.last_seq);
  EXPECT_EQ(after->last_job_id, 10u);
  EXPECT_EQ(store->LastSeq(), before.last_seq);
  Result<std::vector<Event>> events_after = store->EventsSince(0, 1000);
  ASSERT_TRUE(events_after.ok());
  EXPECT_TRUE(*events_after == events_before);
  Result<Submitted> next = store->Submit(Spec("next"));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->id, 11u);
  EXPECT_EQ(next->seq, before.last_seq + 1);
}

TEST(PostgresStore, LoadsManyJobsExactly) {
  PostgresInstance* pg = Server();
  ASSERT_NE(pg, nullptr);
  std::unique_ptr<Store> store = OpenOrDie(pg->NewDatabase());
  ASSERT_NE(store, nullptr);
  constexpr int kJobs = 30'000;  // several of Load's batches
  std::vector<job::JobSpec> specs;
  for (int i = 0; i < kJobs; ++i) {
    job::JobSpec s = Spec("j" + std::to_string(i), "user-" + std::to_string(i % 13));
    s.submit_time = i;
    if (i % 3 == 0) s.idempotency_key = "k" + std::to_string(i);
    specs.push_back(std::move(s));
  }
  Result<std::vector<Submitted>> r = store->SubmitBatch(specs);
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::vector<Event> events;
  for (int i = 0; i < kJobs; i += 5) {
    events.push_back(Start((*r)[i].id, 100, "n" + std::to_string(i)));
  }
  for (int i = 0; i < kJobs; i += 10)
    events.push_back(JobEvent((*r)[i].id, EventKind::kEvicted, 200));
  ASSERT_TRUE(store->Append(events).ok());
  std::size_t batches = 0, n = 0;
  Result<Snapshot> snap = store->Load({.each_batch = [&](std::span<StoredJob> batch) {
    ++batches;
    for (StoredJob& job : batch) {
      const int i = static_cast<int>(n++);
      if (job.id != (*r)[i].id || !(job.spec == specs[i])) {
        return Status::Internal("job " + std::to_string(job.id) + " differs");
      }
      const bool running = i % 5 == 0 && i % 10 != 0;
      if (running != (job.status.state == job::JobState::kRunning) ||
          (running && !(job.status.allocation == On("n" + std::to_string(i)))) ||
          (i % 10 == 0 && job.status.evictions != std::vector<Millis>{200})) {
        return Status::Internal("job " + std::to_string(job.id) + "'s status differs");
      }
    }
    return Status::Ok();
  }});
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  EXPECT_EQ(n, static_cast<std::size_t>(kJobs));
  EXPECT_GT(batches, 2u);
  Result<Snapshot> all = store->Load({.include_finished = false});
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(all->jobs.size(), static_cast<std::size_t>(kJobs));
}

TEST(PostgresStore, ManyThreadsSubmittingGetUniqueIncreasingIdsAndSeqs) {
  PostgresInstance* pg = Server();
  ASSERT_NE(pg, nullptr);
  std::unique_ptr<Store> store = OpenOrDie(pg->NewDatabase());
  ASSERT_NE(store, nullptr);
  constexpr int kThreads = 64;
  constexpr int kPerThread = 40;
  std::vector<std::vector<Submitted>> acks(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        job::JobSpec spec = Spec("t" + std::to_string(t) + "-" + std::to_string(i));
        // Every other thread retries with a key: its second try is a duplicate.
        if (t % 2 == 0) spec.idempotency_key = spec.name;
        Result<Submitted> r = store->Submit(spec);
        if (!r.ok()) {
          ADD_FAILURE() << r.status().message();
          return;
        }
        acks[t].push_back(*r);
        if (t % 2 == 0) {
          Result<Submitted> again = store->Submit(spec);
          if (!again.ok() || !again->duplicate || again->id != r->id) {
            ADD_FAILURE() << "a retry was not recognised";
            return;
          }
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  std::set<JobId> ids;
  std::set<std::uint64_t> seqs;
  for (const std::vector<Submitted>& a : acks) {
    ASSERT_EQ(a.size(), static_cast<std::size_t>(kPerThread));
    for (std::size_t i = 0; i < a.size(); ++i) {
      ids.insert(a[i].id);
      seqs.insert(a[i].seq);
      if (i > 0) {
        EXPECT_GT(a[i].id, a[i - 1].id);
        EXPECT_GT(a[i].seq, a[i - 1].seq);
      }
    }
  }
  constexpr std::size_t kAll = kThreads * kPerThread;
  ASSERT_EQ(ids.size(), kAll);
  ASSERT_EQ(seqs.size(), kAll);
  // Gapless: ids 1..N, seqs 1..N.
  EXPECT_EQ(*ids.rbegin(), kAll);
  EXPECT_EQ(*seqs.rbegin(), kAll);
  EXPECT_EQ(store->LastSeq(), kAll);
}

TEST(PostgresStore, AFencedWriteFailsAndStoresNothing) {
  PostgresInstance* pg = Server();
  ASSERT_NE(pg, nullptr);
  const std::string url = pg->NewDatabase();
  { ASSERT_NE(OpenOrDie(url), nullptr); }  // migrated
  pg->Sql(DbName(url), "UPDATE leader SET epoch = 7, holder = 'a' WHERE id = 1");
  std::atomic<int> fenced{0};
  std::unique_ptr<Store> store = OpenOrDie(url, 7, [&] { ++fenced; });
  ASSERT_NE(store, nullptr);
  Result<Submitted> first = store->Submit(Spec("first"));
  ASSERT_TRUE(first.ok()) << first.status().message();
  // Another server takes the lease.
  pg->Sql(DbName(url), "UPDATE leader SET epoch = 8, holder = 'b' WHERE id = 1");
  Result<Submitted> second = store->Submit(Spec("second"));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(second.status().message(),
            "store: fenced: this server's epoch 7 is not the leader's 8; another server leads");
  Result<std::vector<Event>> appended = store->Append({Start(first->id, 5, "n0")});
  ASSERT_FALSE(appended.ok());
  EXPECT_EQ(appended.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(fenced.load(), 1);  // told once
  // Nothing of the fenced writes is stored.
  std::unique_ptr<Store> reader = OpenOrDie(url);
  ASSERT_NE(reader, nullptr);
  Result<Snapshot> snap = reader->Load();
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  ASSERT_EQ(snap->jobs.size(), 1u);
  EXPECT_EQ(snap->jobs[0].spec.name, "first");
  EXPECT_EQ(snap->jobs[0].status.state, job::JobState::kPending);
  EXPECT_EQ(snap->last_seq, 1u);
  EXPECT_EQ(pg->Sql(DbName(url), "SELECT count(*) FROM events"), "1");
}

// A leader that stalls in the middle of a batch (a stopped process) holds the leader row, FOR
// SHARE, in a transaction that never ends. The server that takes the lock next ends that session
// rather than waiting for it, raises the epoch, and leads.
TEST(PostgresStore, ALeaderStalledMidBatchDoesNotKeepTheNextFromLeading) {
  PostgresInstance* pg = Server();
  ASSERT_NE(pg, nullptr);
  const std::string url = pg->NewDatabase();
  { ASSERT_NE(OpenOrDie(url), nullptr); }  // migrated
  pg->Sql(DbName(url), "UPDATE leader SET epoch = 4, holder = 'stalled' WHERE id = 1");
  Result<std::unique_ptr<pg::Conn>> stalled = pg::Conn::Connect(url, "test", "stalled-writer");
  ASSERT_TRUE(stalled.ok()) << stalled.status().message();
  ASSERT_TRUE((*stalled)->Exec("BEGIN", {}, "begin").ok());
  Result<pg::Rows> fence =
      (*stalled)->Exec("SELECT epoch FROM leader WHERE id = 1 FOR SHARE", {}, "the fence");
  ASSERT_TRUE(fence.ok()) << fence.status().message();
  LeaderOptions options;
  options.url = url;
  options.id = "next";
  options.address = "http://next:1";
  Result<std::unique_ptr<LeaderElection>> election = LeaderElection::Open(options);
  ASSERT_TRUE(election.ok()) << election.status().message();
  Result<LeaderView> view = (*election)->Campaign();
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_TRUE(view->leading);
  EXPECT_EQ(view->epoch, 5u);
  EXPECT_EQ(pg->Sql(DbName(url), "SELECT holder FROM leader"), "next");
  // The stalled batch was rolled back with its session.
  Result<pg::Rows> after = (*stalled)->Exec("SELECT 1", {}, "after the takeover");
  EXPECT_FALSE(after.ok());
  EXPECT_TRUE((*stalled)->broken());
}

TEST(PostgresStore, ATerminatedSessionFailsItsBatchAndTheStoreReconnects) {
  PostgresInstance* pg = Server();
  ASSERT_NE(pg, nullptr);
  std::unique_ptr<Store> store = OpenOrDie(pg->NewDatabase());
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Submit(Spec("a")).ok());
  EXPECT_EQ(pg->Terminate("arbiter-store-writer"), 1);
  Result<Submitted> lost = store->Submit(Spec("b"));
  ASSERT_FALSE(lost.ok());
  EXPECT_EQ(lost.status().code(), StatusCode::kUnavailable) << lost.status().message();
  EXPECT_NE(lost.status().message().find("connection to PostgreSQL was lost"), std::string::npos)
      << lost.status().message();
  // The next batch connects again; nothing of the lost one was written.
  Result<Submitted> c = store->Submit(Spec("c"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->id, 2u);
  EXPECT_EQ(c->seq, 2u);
  // Reads connect again too (every session of the server ended this time).
  EXPECT_GE(pg->Terminate("*"), 2);
  Result<std::optional<StoredJob>> job = store->GetJob(2);
  ASSERT_TRUE(job.ok()) << job.status().message();
  ASSERT_TRUE(job->has_value());
  EXPECT_EQ((*job)->spec.name, "c");
  Result<Snapshot> snap = store->Load();
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  EXPECT_EQ(snap->jobs.size(), 2u);
}

TEST(PostgresStore, AStatementTheServerRefusesFailsOnlyItsCall) {
  PostgresInstance* pg = Server();
  ASSERT_NE(pg, nullptr);
  const std::string url = pg->NewDatabase();
  std::unique_ptr<Store> store = OpenOrDie(url);
  ASSERT_NE(store, nullptr);
  pg->Sql(DbName(url), "ALTER TABLE jobs ADD CONSTRAINT not_bad CHECK (name <> 'bad')");
  // Queued together (most likely one batch): the refused insert aborts the pipeline, the batch
  // is run again without it.
  std::vector<std::promise<Result<Submitted>>> answers(5);
  for (int i = 0; i < 5; ++i) {
    store->SubmitAsync(Spec(i == 2 ? "bad" : "good-" + std::to_string(i)),
                       [&, i](Result<Submitted> r) { answers[i].set_value(std::move(r)); });
  }
  std::vector<JobId> ids;
  for (int i = 0; i < 5; ++i) {
    Result<Submitted> r = answers[i].get_future().get();
    if (i == 2) {
      ASSERT_FALSE(r.ok());
      EXPECT_EQ(r.status().code(), StatusCode::kInternal);
      EXPECT_NE(r.status().message().find("store: insert a job: new row for relation \"jobs\" "
                                          "violates check constraint \"not_bad\""),
                std::string::npos)
          << r.status().message();
      EXPECT_NE(r.status().message().find("(SQLSTATE 23514)"), std::string::npos);
    } else {
      ASSERT_TRUE(r.ok()) << r.status().message();
      ids.push_back(r->id);
    }
  }
  EXPECT_EQ(ids, (std::vector<JobId>{1, 2, 3, 4}));
  Result<Snapshot> snap = store->Load();
  ASSERT_TRUE(snap.ok());
  ASSERT_EQ(snap->jobs.size(), 4u);
  EXPECT_EQ(snap->last_seq, 4u);
}

TEST(PostgresStore, ACorruptRowIsAnErrorNamingTheJob) {
  PostgresInstance* pg = Server();
  ASSERT_NE(pg, nullptr);
  const std::string url = pg->NewDatabase();
  std::unique_ptr<Store> store = OpenOrDie(url);
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(store->Submit(Spec("j" + std::to_string(i))).ok());
  pg->Sql(DbName(url), "UPDATE jobs SET spec = substring(spec from 1 for 1) WHERE id = 2");
  Result<Snapshot> snap = store->Load();
  ASSERT_FALSE(snap.ok());
  EXPECT_EQ(snap.status().message(), "store: job 2: spec.name: record cut short at byte 2");
  Result<std::optional<StoredJob>> job = store->GetJob(2);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().message(), snap.status().message());
  EXPECT_TRUE(store->GetJob(1).ok());
}

TEST(PostgresStore, RefusesANewerSchemaAndAForeignDatabase) {
  PostgresInstance* pg = Server();
  ASSERT_NE(pg, nullptr);
  const std::string url = pg->NewDatabase();
  { ASSERT_NE(OpenOrDie(url), nullptr); }
  pg->Sql(DbName(url), "UPDATE schema_version SET version = 3");
  Result<std::unique_ptr<Store>> store = OpenPostgresStore(PgOptions(url));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().message(),
            "store: PostgreSQL database " + DbName(url) +
                " has schema version 3, newer than this build's 2: it was written by a newer "
                "Arbiter; run that version (or a newer one), or restore a backup");
  pg->Sql(DbName(url), "UPDATE schema_version SET version = 2");
  EXPECT_NE(OpenOrDie(url), nullptr);

  const std::string other = pg->NewDatabase();
  pg->Sql(DbName(other), "CREATE TABLE accounts (id int)");
  store = OpenPostgresStore(PgOptions(other));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().message(),
            "store: PostgreSQL database " + DbName(other) +
                " is not an Arbiter store (it has tables but no schema_version)");
}

TEST(PostgresStore, ServersStartingTogetherMigrateOnce) {
  PostgresInstance* pg = Server();
  ASSERT_NE(pg, nullptr);
  const std::string url = pg->NewDatabase();
  constexpr int kServers = 6;
  std::vector<std::unique_ptr<Store>> stores(kServers);
  std::vector<std::thread> threads;
  std::atomic<int> ready{0};
  for (int i = 0; i < kServers; ++i) {
    threads.emplace_back([&, i] {
      ++ready;
      while (ready.load() < kServers) std::this_thread::yield();
      stores[i] = OpenOrDie(url);
    });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& s : stores) EXPECT_NE(s, nullptr);
  EXPECT_EQ(pg->Sql(DbName(url), "SELECT count(*) FROM schema_version"), "1");
  EXPECT_EQ(pg->Sql(DbName(url), "SELECT count(*) FROM leader"), "1");
  EXPECT_EQ(pg->Sql(DbName(url), "SELECT count(*) FROM counters"), "1");
  EXPECT_EQ(pg->Sql(DbName(url), "SELECT string_agg(version::text, ',') FROM schema_version"), "2");
  // The leader's tables, as the lease expects them.
  EXPECT_EQ(pg->Sql(DbName(url), "SELECT epoch || ':' || holder || ':' || address FROM leader"),
            "0::");
  EXPECT_EQ(pg->Sql(DbName(url), "SELECT count(*) FROM secrets"), "0");
}

TEST(PostgresStore, ErrorsNameWhatFailedAndNeverThePassword) {
  PostgresInstance* pg = Server();
  ASSERT_NE(pg, nullptr);
  std::string url = pg->url_for("no_such_db");
  url += "&password=hunter2";
  Result<std::unique_ptr<Store>> store = OpenPostgresStore(PgOptions(url));
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store.status().message().rfind("store: connect to PostgreSQL: cannot connect: ", 0), 0u)
      << store.status().message();
  EXPECT_NE(store.status().message().find("no_such_db"), std::string::npos);
  EXPECT_EQ(store.status().message().find("hunter2"), std::string::npos);
  EXPECT_FALSE(OpenPostgresStore(PgOptions("")).ok());

  EXPECT_TRUE(IsPostgresUrl("postgresql://db.example/arbiter"));
  EXPECT_TRUE(IsPostgresUrl("postgres://u@db/arbiter?sslmode=verify-full"));
  EXPECT_FALSE(IsPostgresUrl("/var/lib/arbiter"));
  EXPECT_FALSE(IsPostgresUrl("host=/run/postgresql dbname=arbiter"));
}

TEST(PostgresWrapper, RowsAndErrors) {
  PostgresInstance* pg = Server();
  ASSERT_NE(pg, nullptr);
  Result<std::unique_ptr<pg::Conn>> conn = pg::Conn::Connect(pg->url(), "test", "wrapper-test");
  ASSERT_TRUE(conn.ok()) << conn.status().message();
  Result<pg::Rows> rows = (*conn)->Exec("SELECT $1::bigint, $2::text, NULL::text, 2.5::float8",
                                        {"-42", std::nullopt}, "a select");
  ASSERT_TRUE(rows.ok()) << rows.status().message();
  EXPECT_EQ(rows->rows(), 1);
  EXPECT_EQ(rows->columns(), 4);
  EXPECT_EQ(rows->Int(0, 0), -42);
  EXPECT_TRUE(rows->IsNull(0, 1));
  EXPECT_EQ(rows->Text(0, 1), "");
  EXPECT_EQ(rows->Double(0, 3), 2.5);
  // Binary results read the same.
  pg::Params params;
  params.Int(-7).Bytes(std::string_view("a\0b", 3)).Int(70000);
  Result<pg::Rows> binary = (*conn)->Exec("SELECT $1::bigint, $2::bytea, $3::int4, 0.25::float8",
                                          params, "a binary select", true);
  ASSERT_TRUE(binary.ok()) << binary.status().message();
  EXPECT_EQ(binary->Int(0, 0), -7);
  EXPECT_EQ(binary->Text(0, 1), std::string_view("a\0b", 3));
  EXPECT_EQ(binary->Int(0, 2), 70000);
  EXPECT_EQ(binary->Double(0, 3), 0.25);
  // Errors name what failed, the server's message and its SQLSTATE.
  Result<pg::Rows> bad = (*conn)->Exec("SELEC 1", {}, "a typo");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInternal);
  EXPECT_EQ(bad.status().message(), "a typo: syntax error at or near \"SELEC\" (SQLSTATE 42601)");
  // A terminated session is unavailable, and says so.
  EXPECT_EQ(pg->Terminate("wrapper-test"), 1);
  Result<pg::Rows> gone = (*conn)->Exec("SELECT 1", {}, "after termination");
  ASSERT_FALSE(gone.ok());
  EXPECT_EQ(gone.status().code(), StatusCode::kUnavailable) << gone.status().message();
  EXPECT_TRUE((*conn)->broken());
}

// The race after a lease ran out (the database was down or stalled for longer): one server has
// just taken the lock, its raised epoch not yet visible, while another still reads the expired
// row. That other must not end the new winner's session (it is not the session of the holder the
// row names); the expired holder's own session, still holding the lock, it does end.
TEST(PostgresStore, AStandbyEndsOnlyTheExpiredHoldersSessionNeverANewWinner) {
  PostgresInstance* pg = Server();
  ASSERT_NE(pg, nullptr);
  const std::string url = pg->NewDatabase();
  { ASSERT_NE(OpenOrDie(url), nullptr); }  // migrated
  const std::string lock = fmt::format("SELECT pg_try_advisory_lock({})", pg::kLeaderLockKey);
  pg->Sql(DbName(url),
          "UPDATE leader SET epoch = 3, holder = 'old', renewed_at = now() - interval '1 hour'");
  // The winner: holds the lock, has not updated the row yet.
  Result<std::unique_ptr<pg::Conn>> winner =
      pg::Conn::Connect(url, "test", LeaseSessionName("winner"));
  ASSERT_TRUE(winner.ok()) << winner.status().message();
  Result<pg::Rows> took = (*winner)->Exec(lock, {}, "take the lock");
  ASSERT_TRUE(took.ok()) << took.status().message();
  ASSERT_EQ(took->Text(0, 0), "t");
  Result<std::unique_ptr<LeaderElection>> standby = LeaderElection::Open(Leader(url, "standby"));
  ASSERT_TRUE(standby.ok()) << standby.status().message();
  Result<LeaderView> view = (*standby)->Campaign();
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_FALSE(view->leading);
  EXPECT_EQ(view->holder, "old");
  EXPECT_EQ(view->address, "");  // expired: no leader to send clients to
  Result<pg::Rows> alive = (*winner)->Exec("SELECT 1", {}, "the winner after the campaign");
  EXPECT_TRUE(alive.ok()) << alive.status().message();
  ASSERT_TRUE((*winner)->Exec("SELECT pg_advisory_unlock_all()", {}, "unlock").ok());

  // The expired holder's session itself, lingering with the lock, is ended.
  Result<std::unique_ptr<pg::Conn>> old = pg::Conn::Connect(url, "test", LeaseSessionName("old"));
  ASSERT_TRUE(old.ok()) << old.status().message();
  ASSERT_EQ((*old)->Exec(lock, {}, "take the lock")->Text(0, 0), "t");
  view = (*standby)->Campaign();
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_FALSE(view->leading);
  EXPECT_FALSE((*old)->Exec("SELECT 1", {}, "the old holder after the campaign").ok());
  view = (*standby)->Campaign();  // the lock is free now
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_TRUE(view->leading);
  EXPECT_EQ(view->epoch, 4u);
}

// A standby follows the store: the jobs that events after a seq name, as they are now, with the
// stream's position, in one snapshot.
TEST(PostgresStore, JobsChangedSinceASeqAreEveryJobItsEventsName) {
  PostgresInstance* pg = Server();
  ASSERT_NE(pg, nullptr);
  const std::string url = pg->NewDatabase();
  std::unique_ptr<Store> store = OpenOrDie(url);
  ASSERT_NE(store, nullptr);
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(store->Submit(Spec("j" + std::to_string(i))).ok());
  Result<Snapshot> snap = store->Load();
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  const std::uint64_t seq = snap->last_seq;
  Result<JobChanges> none = store->JobsChangedSince(seq);
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_TRUE(none->jobs.empty());
  EXPECT_EQ(none->last_seq, seq);
  ASSERT_TRUE(store->Append({Start(2, 2000, "n0")}).ok());
  ASSERT_TRUE(store->Append({JobEvent(2, EventKind::kCompleted, 3000)}).ok());
  ASSERT_TRUE(store->Submit(Spec("j3")).ok());
  Result<JobChanges> changed = store->JobsChangedSince(seq);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  ASSERT_EQ(changed->jobs.size(), 2u);
  EXPECT_EQ(changed->jobs[0].id, 2u);
  EXPECT_EQ(changed->jobs[0].status.state, job::JobState::kCompleted);
  EXPECT_EQ(changed->jobs[1].id, 4u);
  EXPECT_EQ(changed->jobs[1].spec.name, "j3");
  EXPECT_EQ(changed->last_seq, seq + 3);
  // A read-only store (a standby's) reads the same, and writes nothing.
  PostgresOptions options = PgOptions(url);
  options.read_only = true;
  Result<std::unique_ptr<Store>> reader = OpenPostgresStore(options);
  ASSERT_TRUE(reader.ok()) << reader.status().message();
  Result<JobChanges> read = (*reader)->JobsChangedSince(seq);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->jobs.size(), 2u);
  EXPECT_EQ(read->last_seq, seq + 3);
  EXPECT_FALSE((*reader)->Submit(Spec("refused")).ok());
  EXPECT_EQ(pg->Sql(DbName(url), "SELECT count(*) FROM jobs"), "4");
}

// A database path that hangs without any TCP error (a proxy or pooler that stops forwarding):
// a renewal fails by its deadline rather than waiting for TCP, and a campaign by a lease.
TEST(PostgresStore, ARenewalWithNoAnswerFailsByItsDeadline) {
  PostgresInstance* pg = Server();
  ASSERT_NE(pg, nullptr);
  const std::string url = pg->NewDatabase();
  std::unique_ptr<FaultProxy> proxy = ProxyFor(pg);
  Result<std::unique_ptr<LeaderElection>> election =
      LeaderElection::Open(Leader(UrlThrough(*proxy, DbName(url)), "hung"));
  ASSERT_TRUE(election.ok()) << election.status().message();
  Result<LeaderView> view = (*election)->Campaign();
  ASSERT_TRUE(view.ok()) << view.status().message();
  ASSERT_TRUE(view->leading);
  ASSERT_TRUE((*election)->Renew(Clock::now() + std::chrono::seconds(5)).ok());
  proxy->Hang();
  const Clock::time_point start = Clock::now();
  const Status renewed = (*election)->Renew(start + std::chrono::milliseconds(300));
  const auto waited = Clock::now() - start;
  ASSERT_FALSE(renewed.ok());
  EXPECT_EQ(renewed.code(), StatusCode::kUnavailable);
  EXPECT_NE(renewed.message().find("no answer from the database within"), std::string::npos)
      << renewed.message();
  EXPECT_LT(waited, std::chrono::seconds(5));  // TCP alone would wait far longer
  Result<LeaderView> again = (*election)->Campaign();
  EXPECT_FALSE(again.ok());
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(10));
}

// A leader that loses its lease severs its term's connections: a call blocked on a database
// path that hangs fails at once, and no later call connects.
TEST(PostgresStore, SeveringFailsACallHeldOnAHungPathAtOnce) {
  PostgresInstance* pg = Server();
  ASSERT_NE(pg, nullptr);
  const std::string url = pg->NewDatabase();
  std::unique_ptr<FaultProxy> proxy = ProxyFor(pg);
  PostgresOptions options = PgOptions(UrlThrough(*proxy, DbName(url)));
  options.severance = std::make_shared<Severance>();
  Result<std::unique_ptr<Store>> store = OpenPostgresStore(options);
  ASSERT_TRUE(store.ok()) << store.status().message();
  ASSERT_TRUE((*store)->Submit(Spec("before")).ok());
  proxy->Hang();
  std::future<Result<Submitted>> held =
      std::async(std::launch::async, [&] { return (*store)->Submit(Spec("held")); });
  EXPECT_EQ(held.wait_for(std::chrono::milliseconds(500)), std::future_status::timeout);
  options.severance->Sever();
  ASSERT_EQ(held.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  Result<Submitted> got = held.get();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable);
  proxy->Resume();
  Result<Submitted> after = (*store)->Submit(Spec("after"));
  ASSERT_FALSE(after.ok());
  EXPECT_NE(after.status().message().find("this server no longer leads"), std::string::npos)
      << after.status().message();
  EXPECT_EQ(pg->Sql(DbName(url), "SELECT count(*) FROM jobs"), "1");
}

}  // namespace
}  // namespace arbiter::store
