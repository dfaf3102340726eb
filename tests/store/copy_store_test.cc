// `arbiter admin migrate-store`: a SQLite store copied into PostgreSQL reads back the same (jobs
// with their records and statuses, events with their cursor, quotas, node states, usage, the
// node key), and the copy refuses a database that is not empty or on which a server leads.
#include "store/copy_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "store/codec.h"
#include "store/pg.h"
#include "store/store.h"
#include "testing/postgres.h"

namespace arbiter::store {
namespace {

namespace fs = std::filesystem;

class CopyStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    pg_ = testing::PostgresInstance::Shared(&error);
    ASSERT_NE(pg_, nullptr) << error;
    url_ = pg_->NewDatabase();
    std::string pattern = (fs::temp_directory_path() / "arbiter-copy-XXXXXX").string();
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  static job::JobSpec Spec(const std::string& name) {
    job::JobSpec s;
    s.name = name;
    s.user = "alice";
    s.queue = "training";
    s.priority_class = "P1";
    TaskGroup g;
    g.name = "main";
    g.count = 1;
    g.request.gpu = MilliGpu(8000);
    s.groups = {g};
    // COPY's text format escapes backslashes: a command full of them comes back the same.
    s.labels = {{"app", name}};
    s.command = "printf 'a\\tb\\n' | sed 's/\\\\/x/'";
    s.submit_time = 1000;
    s.idempotency_key = "key-" + name;
    return s;
  }
  static Event JobEvent(JobId job, EventKind kind, Millis time) {
    Event e;
    e.job = job;
    e.kind = kind;
    e.time = time;
    e.actor = "scheduler";
    return e;
  }

  testing::PostgresInstance* pg_ = nullptr;
  std::string url_;
  std::string dir_;
};

TEST_F(CopyStoreTest, TheCopyReadsBackTheSameAndGoesOnFromTheSameIds) {
  Snapshot before;
  std::vector<Event> events_before;
  {
    Result<std::unique_ptr<Store>> opened = OpenSqliteStore({.dir = dir_});
    ASSERT_TRUE(opened.ok()) << opened.status().message();
    Store& s = **opened;
    for (int i = 0; i < 20; ++i) {
      Result<Submitted> r = s.Submit(Spec("j" + std::to_string(i)));
      ASSERT_TRUE(r.ok()) << r.status().message();
    }
    Event start = JobEvent(1, EventKind::kStarted, 10);
    start.allocation.gpu_type = "H800";
    start.allocation.tasks.push_back(
        {0, 0, "h800-0", MilliCpu(1000), MemMiB(10), {{3, MilliGpu(1000), GpuMemMiB(0)}}});
    Event evicted = JobEvent(2, EventKind::kCancelled, 30);
    evicted.message = "cancelled by alice \\N";
    ASSERT_TRUE(s.Append({start, JobEvent(1, EventKind::kCheckpointed, 20), evicted}).ok());
    QueueQuotaOverride q;
    q.queue = "training";
    q.quota["gpu"] = QuotaSpec{MilliGpu(16000), std::nullopt, MilliGpu(0), MilliGpu(32000)};
    ASSERT_TRUE(s.SetQueueQuota(q).ok());
    ASSERT_TRUE(s.SetNodeState({"h800-3", NodeAdminState::kCordoned, "ecc", 70, "ops"}).ok());
    ASSERT_TRUE(s.SaveQueueUsage({{"training", 1.5e9, 95}}).ok());
    before = *s.Load();
    events_before = *s.EventsSince(0, 1000);
  }
  std::ofstream(fs::path(dir_) / "node-credentials.key") << std::string(64, 'k') << "\n";

  Result<CopyCounts> copied = CopySqliteToPostgres(dir_, url_, nullptr);
  ASSERT_TRUE(copied.ok()) << copied.status().message();
  EXPECT_EQ(copied->jobs, 20u);
  EXPECT_EQ(copied->events, events_before.size());
  EXPECT_EQ(copied->queue_quotas, 1u);
  EXPECT_EQ(copied->node_states, 1u);
  EXPECT_EQ(copied->queue_usage, 1u);

  PostgresOptions options;
  options.url = url_;
  Result<std::unique_ptr<Store>> pg = OpenPostgresStore(options);
  ASSERT_TRUE(pg.ok()) << pg.status().message();
  Result<Snapshot> after = (*pg)->Load();
  ASSERT_TRUE(after.ok()) << after.status().message();
  ASSERT_EQ(after->jobs.size(), before.jobs.size());
  for (std::size_t i = 0; i < before.jobs.size(); ++i) {
    EXPECT_EQ(after->jobs[i].id, before.jobs[i].id);
    EXPECT_TRUE(after->jobs[i].spec == before.jobs[i].spec) << "job " << before.jobs[i].id;
    EXPECT_TRUE(after->jobs[i].status == before.jobs[i].status) << "job " << before.jobs[i].id;
  }
  ASSERT_EQ(after->queue_quotas.size(), 1u);
  EXPECT_EQ(QuotaToJson(after->queue_quotas[0].quota), QuotaToJson(before.queue_quotas[0].quota));
  ASSERT_EQ(after->nodes.size(), 1u);
  EXPECT_EQ(after->nodes[0].reason, "ecc");
  ASSERT_EQ(after->queue_usage.size(), 1u);
  EXPECT_EQ(after->queue_usage[0].usage, 1.5e9);
  EXPECT_EQ(after->last_seq, before.last_seq);
  EXPECT_EQ(after->last_job_id, before.last_job_id);
  Result<std::vector<Event>> events_after = (*pg)->EventsSince(0, 1000);
  ASSERT_TRUE(events_after.ok());
  EXPECT_TRUE(*events_after == events_before);
  // A repeated submission is still recognised by its key; a new one goes on from the last id.
  Result<Submitted> again = (*pg)->Submit(Spec("j3"));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->duplicate);
  EXPECT_EQ(again->id, 4u);
  Result<Submitted> next = (*pg)->Submit(Spec("new"));
  ASSERT_TRUE(next.ok()) << next.status().message();
  EXPECT_EQ(next->id, 21u);
  EXPECT_EQ(next->seq, before.last_seq + 1);
  // The node key came along: every node's credential stays valid.
  const std::string db = url_.substr(url_.rfind('/') + 1, url_.find('?') - url_.rfind('/') - 1);
  EXPECT_EQ(pg_->Sql(db, "SELECT value FROM secrets WHERE name = 'node-credentials.key'"),
            std::string(64, 'k'));

  // A second copy into the same database is refused, changing nothing.
  Result<CopyCounts> twice = CopySqliteToPostgres(dir_, url_, nullptr);
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("already holds jobs"), std::string::npos)
      << twice.status().message();
  EXPECT_EQ(twice.status().field(), "--to");
}

TEST_F(CopyStoreTest, RefusesWhileAServerLeadsOrHoldsTheDirectory) {
  {
    Result<std::unique_ptr<Store>> opened = OpenSqliteStore({.dir = dir_});
    ASSERT_TRUE(opened.ok());
    ASSERT_TRUE((*opened)->Submit(Spec("a")).ok());
    // A server holds the directory: refused.
    Result<CopyCounts> held = CopySqliteToPostgres(dir_, url_, nullptr);
    ASSERT_FALSE(held.ok());
  }
  // A server leads on the database (holds the leader's lock): refused.
  Result<std::unique_ptr<pg::Conn>> leader = pg::Conn::Connect(url_, "test", "a-leader");
  ASSERT_TRUE(leader.ok()) << leader.status().message();
  ASSERT_TRUE(pg::Migrate(**leader).ok());
  ASSERT_TRUE(
      (*leader)->Exec("SELECT pg_advisory_lock($1)", {std::to_string(pg::kLeaderLockKey)}).ok());
  Result<CopyCounts> leading = CopySqliteToPostgres(dir_, url_, nullptr);
  ASSERT_FALSE(leading.ok());
  EXPECT_NE(leading.status().message().find("a server leads"), std::string::npos)
      << leading.status().message();
  leader->reset();
  Result<CopyCounts> copied = CopySqliteToPostgres(dir_, url_, nullptr);
  ASSERT_TRUE(copied.ok()) << copied.status().message();
  EXPECT_EQ(copied->jobs, 1u);
}

}  // namespace
}  // namespace arbiter::store
