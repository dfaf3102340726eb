// The SQLite store: one database under the data directory, WAL mode, synchronous=FULL, a
// versioned schema, and group commit. docs/design/store.md explains the choices.
//
// Writes: every write call becomes an Op queued for the one writer thread (store/group_commit.h),
// which owns the write connection. The writer takes every queued Op (up to max_batch), runs them
// in one transaction, each inside a savepoint so that a failing Op is undone alone, commits (one
// fsync of the WAL) and only then wakes the callers. Reads use a second connection; WAL lets them
// run beside the writer and see only committed transactions.
#include <fcntl.h>
#include <fmt/format.h>
#include <sqlite3.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "store/binary.h"
#include "store/codec.h"
#include "store/group_commit.h"
#include "store/internal.h"
#include "store/job_batches.h"
#include "store/store.h"

namespace arbiter::store {
namespace {

// Migration k takes the schema from version k to k + 1. Never edit a released migration; add one.
constexpr const char* kMigrations[] = {
    // 0 -> 1
    R"sql(
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE jobs (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL,
  user TEXT NOT NULL,
  queue TEXT NOT NULL,
  priority_class TEXT NOT NULL,
  submit_time INTEGER NOT NULL,
  idempotency_key TEXT,
  spec TEXT NOT NULL,
  state TEXT NOT NULL,
  allocation TEXT,
  start_time INTEGER,
  first_start_time INTEGER,
  last_checkpoint INTEGER,
  stop_at INTEGER,
  evictions TEXT NOT NULL DEFAULT '[]',
  end_time INTEGER,
  message TEXT NOT NULL DEFAULT ''
);
CREATE UNIQUE INDEX jobs_idempotency ON jobs (user, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobs_active ON jobs (id) WHERE state IN ('pending', 'held', 'running');
CREATE TABLE events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT,
  time INTEGER NOT NULL,
  kind TEXT NOT NULL,
  job INTEGER NOT NULL DEFAULT 0,
  target TEXT NOT NULL DEFAULT '',
  actor TEXT NOT NULL DEFAULT '',
  message TEXT NOT NULL DEFAULT '',
  priority_class TEXT NOT NULL DEFAULT '',
  allocation TEXT,
  stop_at INTEGER,
  state TEXT
);
CREATE TABLE queue_quotas (
  queue TEXT PRIMARY KEY,
  quota TEXT NOT NULL,
  time INTEGER NOT NULL,
  actor TEXT NOT NULL
);
CREATE TABLE node_states (
  node TEXT PRIMARY KEY,
  state TEXT NOT NULL,
  reason TEXT NOT NULL,
  time INTEGER NOT NULL,
  actor TEXT NOT NULL
);
)sql",
    // 1 -> 2: a job's spec and allocation as binary records (store/binary.h) instead of JSON
    // text: recovery decodes every job, and JSON was most of its time. The table is rebuilt
    // with the records converted by the functions RegisterMigrationFunctions adds. Also from
    // version 2 on, node_states keeps 'schedulable' rows: an uncordon through the API overrides a
    // configured cordon (no change of the table). New: jobs.retries (failed runs started again)
    // and queue_usage (the queues' recent usage, for fair share across restarts).
    R"sql(
CREATE TABLE jobs_v2 (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL,
  user TEXT NOT NULL,
  queue TEXT NOT NULL,
  priority_class TEXT NOT NULL,
  submit_time INTEGER NOT NULL,
  idempotency_key TEXT,
  spec BLOB NOT NULL,
  state TEXT NOT NULL,
  allocation BLOB,
  start_time INTEGER,
  first_start_time INTEGER,
  last_checkpoint INTEGER,
  stop_at INTEGER,
  evictions TEXT NOT NULL DEFAULT '[]',
  end_time INTEGER,
  message TEXT NOT NULL DEFAULT '',
  retries INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE queue_usage (
  queue TEXT PRIMARY KEY,
  usage REAL NOT NULL,
  time INTEGER NOT NULL
);
INSERT INTO jobs_v2 (id, name, user, queue, priority_class, submit_time, idempotency_key, spec,
                     state, allocation, start_time, first_start_time, last_checkpoint, stop_at,
                     evictions, end_time, message)
  SELECT id, name, user, queue, priority_class, submit_time, idempotency_key,
         arbiter_spec_v2(id, spec), state, arbiter_allocation_v2(id, allocation), start_time,
         first_start_time, last_checkpoint, stop_at, evictions, end_time, message
  FROM jobs ORDER BY id;
UPDATE sqlite_sequence SET seq = max(seq, (SELECT seq FROM sqlite_sequence WHERE name = 'jobs'))
  WHERE name = 'jobs_v2';
DROP TABLE jobs;
ALTER TABLE jobs_v2 RENAME TO jobs;
CREATE UNIQUE INDEX jobs_idempotency ON jobs (user, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobs_active ON jobs (id) WHERE state IN ('pending', 'held', 'running');
)sql",
};
static_assert(std::size(kMigrations) == kSchemaVersion);

constexpr const char* kJobColumns =
    "id, spec, priority_class, state, allocation, start_time, first_start_time, last_checkpoint, "
    "stop_at, evictions, end_time, message, retries";
constexpr const char* kEventColumns =
    "seq, time, kind, job, target, actor, message, priority_class, allocation, stop_at, state";

// A prepared statement. Bind, Step, read columns; Reset before the next use (Run does it).
class Stmt {
 public:
  Stmt() = default;
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  ~Stmt() { sqlite3_finalize(stmt_); }

  int Prepare(sqlite3* db, std::string_view sql) {
    return sqlite3_prepare_v3(db, sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &stmt_, nullptr);
  }
  void Finalize() {
    sqlite3_finalize(stmt_);
    stmt_ = nullptr;
  }

  void Bind(int i, std::int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  void Bind(int i, double v) { sqlite3_bind_double(stmt_, i, v); }
  // The text must outlive the step.
  void Bind(int i, std::string_view v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
  }
  void BindBlob(int i, std::string_view v) {
    sqlite3_bind_blob(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC);
  }
  void BindBlobOrNull(int i, std::string_view v) {
    if (v.empty()) {
      BindNull(i);
    } else {
      BindBlob(i, v);
    }
  }
  void BindNull(int i) { sqlite3_bind_null(stmt_, i); }
  // A time, NULL when never (-1).
  void BindTime(int i, Millis t) {
    if (t < 0) {
      BindNull(i);
    } else {
      Bind(i, t);
    }
  }
  void BindTextOrNull(int i, std::string_view v) {
    if (v.empty()) {
      BindNull(i);
    } else {
      Bind(i, v);
    }
  }

  int Step() { return sqlite3_step(stmt_); }
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  std::int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Double(int col) const { return sqlite3_column_double(stmt_, col); }
  Millis Time(int col) const { return IsNull(col) ? -1 : Int(col); }
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  std::string_view Text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    if (p == nullptr) return {};
    return {p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col))};
  }
  std::string_view Blob(int col) const {
    const auto* p = static_cast<const char*>(sqlite3_column_blob(stmt_, col));
    if (p == nullptr) return {};
    return {p, static_cast<std::size_t>(sqlite3_column_bytes(stmt_, col))};
  }

 private:
  sqlite3_stmt* stmt_ = nullptr;
};

// Resets a statement when the scope ends.
class Resetter {
 public:
  explicit Resetter(Stmt& s) : s_(s) {}
  ~Resetter() { s_.Reset(); }
  Resetter(const Resetter&) = delete;
  Resetter& operator=(const Resetter&) = delete;

 private:
  Stmt& s_;
};

Status DbError(sqlite3* db, std::string_view what) {
  return Status::Unavailable(fmt::format("store: {}: {} (SQLite error {})", what,
                                         sqlite3_errmsg(db), sqlite3_extended_errcode(db)));
}

Status Exec(sqlite3* db, const char* sql, std::string_view what) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    Status s =
        Status::Unavailable(fmt::format("store: {}: {}", what, err != nullptr ? err : "error"));
    sqlite3_free(err);
    return s;
  }
  return Status::Ok();
}

// Runs a statement that returns no rows (or whose rows do not matter).
Status Run(sqlite3* db, Stmt& s, std::string_view what) {
  Resetter reset(s);
  const int rc = s.Step();
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) return DbError(db, what);
  return Status::Ok();
}

void SyncDirectory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}

std::string EvictionsText(const std::vector<Millis>& evictions) {
  return fmt::format("[{}]", fmt::join(evictions, ","));
}

Result<std::vector<Millis>> ParseEvictions(std::string_view text) {
  return DecodeMillisList(text, "evictions");
}

std::string AllocationText(const job::StoredAllocation& a) {
  return a.empty() ? std::string() : Dump(AllocationToJson(a));
}

Result<job::StoredAllocation> ParseAllocation(std::string_view text, std::string_view field) {
  if (text.empty()) return job::StoredAllocation{};
  return DecodeAllocation(text, field);
}

// The jobs table's record of an allocation (store/binary.h); empty (NULL) when not running.
std::string AllocationRecord(const job::StoredAllocation& a) {
  return a.empty() ? std::string() : EncodeAllocationBinary(a);
}

// The functions of migration 1 -> 2: a version-1 row's JSON as a version-2 binary record.
// arbiter_spec_v2(id, json), arbiter_allocation_v2(id, json or NULL).
void SpecV2(sqlite3_context* ctx, int /*argc*/, sqlite3_value** argv) {
  const auto* p = reinterpret_cast<const char*>(sqlite3_value_text(argv[1]));
  const std::string_view text(p != nullptr ? p : "",
                              static_cast<std::size_t>(sqlite3_value_bytes(argv[1])));
  job::JobSpec spec;
  if (Status st = DecodeJobSpecInto(text, spec, "spec"); !st.ok()) {
    const std::string message =
        fmt::format("job {}: {}", sqlite3_value_int64(argv[0]), st.message());
    sqlite3_result_error(ctx, message.c_str(), static_cast<int>(message.size()));
    return;
  }
  const std::string record = EncodeJobSpecBinary(spec);
  sqlite3_result_blob(ctx, record.data(), static_cast<int>(record.size()), SQLITE_TRANSIENT);
}

void AllocationV2(sqlite3_context* ctx, int /*argc*/, sqlite3_value** argv) {
  if (sqlite3_value_type(argv[1]) == SQLITE_NULL) {
    sqlite3_result_null(ctx);
    return;
  }
  const auto* p = reinterpret_cast<const char*>(sqlite3_value_text(argv[1]));
  const std::string_view text(p != nullptr ? p : "",
                              static_cast<std::size_t>(sqlite3_value_bytes(argv[1])));
  Result<job::StoredAllocation> a = ParseAllocation(text, "allocation");
  if (!a.ok()) {
    const std::string message =
        fmt::format("job {}: {}", sqlite3_value_int64(argv[0]), a.status().message());
    sqlite3_result_error(ctx, message.c_str(), static_cast<int>(message.size()));
    return;
  }
  const std::string record = AllocationRecord(*a);
  if (record.empty()) {
    sqlite3_result_null(ctx);
  } else {
    sqlite3_result_blob(ctx, record.data(), static_cast<int>(record.size()), SQLITE_TRANSIENT);
  }
}

Status RegisterMigrationFunctions(sqlite3* db) {
  constexpr int kFlags = SQLITE_UTF8 | SQLITE_DETERMINISTIC;
  if (sqlite3_create_function(db, "arbiter_spec_v2", 2, kFlags, nullptr, SpecV2, nullptr,
                              nullptr) != SQLITE_OK ||
      sqlite3_create_function(db, "arbiter_allocation_v2", 2, kFlags, nullptr, AllocationV2,
                              nullptr, nullptr) != SQLITE_OK) {
    return DbError(db, "register the migration functions");
  }
  return Status::Ok();
}

// One row of kJobColumns into `job` (a fresh record), all but the binary records of the spec
// (column 1) and the allocation (column 4), which DecodeJobRecords reads.
Status ReadJobColumns(const Stmt& s, StoredJob& job) {
  job.id = static_cast<JobId>(s.Int(0));
  JobStatus& st = job.status;
  st.priority_class = std::string(s.Text(2));
  std::optional<job::JobState> state = job::ParseJobState(s.Text(3));
  if (!state)
    return JobError(job.id, Status::Internal(fmt::format("state: unknown '{}'", s.Text(3))));
  st.state = *state;
  st.start_time = s.Time(5);
  st.first_start_time = s.Time(6);
  st.last_checkpoint = s.Time(7);
  st.stop_at = s.Time(8);
  if (s.Text(9) != "[]") {
    Result<std::vector<Millis>> evictions = ParseEvictions(s.Text(9));
    if (!evictions.ok()) return JobError(job.id, evictions.status());
    st.evictions = std::move(evictions).value();
  }
  st.end_time = s.Time(10);
  st.message = std::string(s.Text(11));
  st.retries = static_cast<std::int32_t>(s.Int(12));
  return Status::Ok();
}

// One row of kJobColumns.
Status ReadJob(const Stmt& s, StoredJob& job) {
  if (Status st = ReadJobColumns(s, job); !st.ok()) return st;
  return DecodeJobRecords(s.Blob(1), s.Blob(4), job);
}

// One row of kEventColumns.
Result<Event> ReadEvent(const Stmt& s) {
  Event e;
  e.seq = static_cast<std::uint64_t>(s.Int(0));
  auto fail = [&](const Status& st) {
    return Status::Internal(fmt::format("store: event {}: {}", e.seq, st.message()));
  };
  e.time = s.Int(1);
  std::optional<EventKind> kind = ParseEventKind(s.Text(2));
  if (!kind) return fail(Status::Internal(fmt::format("kind: unknown '{}'", s.Text(2))));
  e.kind = *kind;
  e.job = static_cast<JobId>(s.Int(3));
  e.target = std::string(s.Text(4));
  e.actor = std::string(s.Text(5));
  e.message = std::string(s.Text(6));
  e.priority_class = std::string(s.Text(7));
  Result<job::StoredAllocation> alloc = ParseAllocation(s.Text(8), "allocation");
  if (!alloc.ok()) return fail(alloc.status());
  e.allocation = std::move(alloc).value();
  e.stop_at = s.Time(9);
  if (!s.IsNull(10)) {
    std::optional<job::JobState> state = job::ParseJobState(s.Text(10));
    if (!state) return fail(Status::Internal(fmt::format("state: unknown '{}'", s.Text(10))));
    e.state = *state;
  }
  return e;
}

class SqliteStore final : public Store {
 public:
  static Result<std::unique_ptr<Store>> Open(const SqliteOptions& options);
  ~SqliteStore() override;

  Result<Submitted> Submit(job::JobSpec spec) override;
  void SubmitAsync(job::JobSpec spec, std::function<void(Result<Submitted>)> done) override;
  Result<std::vector<Submitted>> SubmitBatch(std::vector<job::JobSpec> specs) override;
  Result<std::vector<Event>> Append(std::vector<Event> events) override;
  Result<Event> SetQueueQuota(QueueQuotaOverride quota) override;
  Result<Event> ResetQueueQuota(const std::string& queue, Millis time,
                                const std::string& actor) override;
  Result<Event> SetNodeState(NodeAdmin node) override;
  Result<std::vector<Event>> RecordNodeHealth(std::vector<Event> events) override;
  Status SaveQueueUsage(std::vector<QueueUsage> usage) override;
  Result<std::vector<Event>> EventsSince(std::uint64_t cursor, std::size_t limit) override;
  Result<std::optional<StoredJob>> GetJob(JobId id) override;
  Result<std::vector<StoredJob>> RecentFinished(std::size_t limit) override;
  Result<Snapshot> Load(const LoadOptions& options) override;

 private:
  using Op = GroupCommit::Op;

  SqliteStore() = default;
  Status OpenDatabase(const SqliteOptions& options);
  Status Migrate();
  Status PrepareStatements();

  // Queues `body` for the writer and waits until its transaction has committed (or failed).
  Status Execute(std::function<Status(std::uint64_t& seq)> body) {
    return group_.Execute(std::move(body));
  }
  // Queues `body`; `done` runs on the writer thread once its transaction has committed (or
  // failed).
  void ExecuteAsync(std::function<Status(std::uint64_t& seq)> body,
                    std::function<void(Status)> done) {
    group_.ExecuteAsync(std::move(body), std::move(done));
  }
  void RunBatch(std::span<Op* const> batch);

  // Writer-thread helpers (inside a transaction).
  // InsertJobs, for the group commit's submissions.
  GroupCommit::InsertJobs Inserter();
  Status InsertJobs(const std::vector<job::JobSpec>& specs, const std::vector<std::string>& encoded,
                    std::vector<Submitted>& out, std::uint64_t& seq);
  // Inserts an event; sets e.seq. `allocation` is e.allocation's text. The event is kept in
  // `committing_` until the batch commits (and then published) or is rolled back.
  Status InsertEvent(Event& e, std::string_view allocation);
  // `allocation`: e.allocation's JSON text (the event's), `record` its binary record (the job's).
  Status ApplyToJob(std::size_t index, Event& e, std::string_view allocation,
                    std::string_view record);
  Result<Event> WriteAdmin(std::function<Status(Event&)> write, Event e);

  // Load's jobs: the rows of `sql` handed to options.each_batch, or appended to `jobs`
  // (reserved), their records decoded in parallel. Under read_mu_, inside a read transaction.
  Status ReadJobs(const std::string& sql, const LoadOptions& options, std::vector<StoredJob>& jobs);

  std::string dir_;
  std::string db_path_;
  int lock_fd_ = -1;
  std::size_t max_batch_ = 1024;

  // The write connection and its statements: the writer thread's only.
  sqlite3* wdb_ = nullptr;
  std::vector<Event> committing_;  // the events of the batch being written
  Stmt begin_, commit_, rollback_, savepoint_, release_, rollback_to_;
  Stmt find_key_, insert_job_, insert_event_, select_status_, update_status_;
  Stmt upsert_quota_, delete_quota_, upsert_node_, insert_usage_;

  // The read connection, under read_mu_.
  std::mutex read_mu_;
  sqlite3* rdb_ = nullptr;
  Stmt read_begin_, read_end_, events_since_, get_job_;

  GroupCommit group_;  // the writer thread and its queue
};

Result<std::unique_ptr<Store>> SqliteStore::Open(const SqliteOptions& options) {
  std::unique_ptr<SqliteStore> store(new SqliteStore());
  if (Status s = store->OpenDatabase(options); !s.ok()) return s;
  store->group_.Start(store->max_batch_,
                      [s = store.get()](std::span<Op* const> batch) { s->RunBatch(batch); });
  return std::unique_ptr<Store>(std::move(store));
}

Status SqliteStore::OpenDatabase(const SqliteOptions& options) {
  if (options.dir.empty()) {
    return Status::InvalidArgument("store: the data directory is not given", "dir");
  }
  dir_ = options.dir;
  max_batch_ = std::max<std::size_t>(1, options.max_batch);
  std::error_code ec;
  if (std::filesystem::create_directories(dir_, ec)) {
    // A new directory: make its entry durable too (SQLite syncs the directory's own entries).
    SyncDirectory(std::filesystem::absolute(dir_).parent_path().string());
  }
  if (ec) {
    return Status::Unavailable(
        fmt::format("store: cannot create the data directory {}: {}", dir_, ec.message()));
  }
  // One process at a time: a second server on the same directory would break group commit's
  // assumptions (one writer) and the sequence of events.
  const std::string lock_path = dir_ + "/arbiter.lock";
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) {
    return Status::Unavailable(
        fmt::format("store: cannot open {}: {}", lock_path, std::strerror(errno)));
  }
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    return Status::Conflict(fmt::format(
        "store: the data directory {} is in use (another server, or another store of this "
        "process, has it open)",
        dir_));
  }

  db_path_ = dir_ + "/arbiter.db";
  constexpr int kFlags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(db_path_.c_str(), &wdb_, kFlags, nullptr) != SQLITE_OK) {
    return DbError(wdb_, fmt::format("cannot open {}", db_path_));
  }
  sqlite3_busy_timeout(wdb_, 10'000);
  {
    // journal_mode answers with the mode in force: anything but "wal" is an error.
    Stmt mode;
    if (mode.Prepare(wdb_, "PRAGMA journal_mode=WAL") != SQLITE_OK || mode.Step() != SQLITE_ROW) {
      return DbError(wdb_, fmt::format("{}: cannot set WAL mode", db_path_));
    }
    if (mode.Text(0) != "wal") {
      return Status::Unavailable(
          fmt::format("store: {}: WAL mode refused (journal mode {})", db_path_, mode.Text(0)));
    }
  }
  // FULL: every commit fsyncs the WAL before it returns (NORMAL would not, in WAL mode).
  if (Status s = Exec(wdb_, "PRAGMA synchronous=FULL", "PRAGMA synchronous"); !s.ok()) return s;
  if (Status s = RegisterMigrationFunctions(wdb_); !s.ok()) return s;
  if (Status s = Migrate(); !s.ok()) return s;
  if (Status s = PrepareStatements(); !s.ok()) return s;

  if (sqlite3_open_v2(db_path_.c_str(), &rdb_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    return DbError(rdb_, fmt::format("cannot open {} for reading", db_path_));
  }
  sqlite3_busy_timeout(rdb_, 10'000);
  if (Status s = Exec(rdb_, "PRAGMA query_only=1", "PRAGMA query_only"); !s.ok()) return s;
  const std::string since =
      fmt::format("SELECT {} FROM events WHERE seq > ?1 ORDER BY seq LIMIT ?2", kEventColumns);
  const std::string get = fmt::format("SELECT {} FROM jobs WHERE id = ?1", kJobColumns);
  if (read_begin_.Prepare(rdb_, "BEGIN") != SQLITE_OK ||
      read_end_.Prepare(rdb_, "COMMIT") != SQLITE_OK ||
      events_since_.Prepare(rdb_, since) != SQLITE_OK || get_job_.Prepare(rdb_, get) != SQLITE_OK) {
    return DbError(rdb_, "prepare");
  }

  Stmt last;
  if (last.Prepare(rdb_, "SELECT seq FROM sqlite_sequence WHERE name = 'events'") != SQLITE_OK) {
    return DbError(rdb_, "prepare");
  }
  const int rc = last.Step();
  if (rc == SQLITE_ROW) {
    PublishEvents({}, static_cast<std::uint64_t>(last.Int(0)));
  } else if (rc != SQLITE_DONE) {
    return DbError(rdb_, "read the last event");
  }
  return Status::Ok();
}

Status SqliteStore::Migrate() {
  if (Status s = Exec(wdb_, "BEGIN IMMEDIATE", "begin the migration"); !s.ok()) return s;
  auto fail = [&](Status s) {
    Exec(wdb_, "ROLLBACK", "rollback").ok();
    return s;
  };
  int version = 0;
  {
    Stmt tables;
    if (tables.Prepare(wdb_,
                       "SELECT count(*), sum(name = 'schema_version') FROM sqlite_master "
                       "WHERE type = 'table'") != SQLITE_OK ||
        tables.Step() != SQLITE_ROW) {
      return fail(DbError(wdb_, fmt::format("{}: read the schema", db_path_)));
    }
    const std::int64_t count = tables.Int(0);
    const bool has_version = tables.Int(1) > 0;
    if (count > 0 && !has_version) {
      return fail(Status::InvalidArgument(fmt::format(
          "store: {} is not an Arbiter store (it has tables but no schema_version)", db_path_)));
    }
    if (has_version) {
      Stmt v;
      if (v.Prepare(wdb_, "SELECT max(version) FROM schema_version") != SQLITE_OK ||
          v.Step() != SQLITE_ROW || v.IsNull(0)) {
        return fail(Status::Internal(fmt::format("store: {}: schema_version is empty", db_path_)));
      }
      version = static_cast<int>(v.Int(0));
    }
  }
  if (version > kSchemaVersion) {
    return fail(Status::Conflict(fmt::format(
        "store: {} has schema version {}, newer than this build's {}: it was written by a newer "
        "Arbiter; run that version (or a newer one), or restore a backup",
        db_path_, version, kSchemaVersion)));
  }
  if (version == kSchemaVersion) {
    return Exec(wdb_, "COMMIT", "commit the migration");
  }
  for (int v = version; v < kSchemaVersion; ++v) {
    if (Status s =
            Exec(wdb_, kMigrations[v], fmt::format("migrate {} from version {}", db_path_, v));
        !s.ok()) {
      return fail(s);
    }
  }
  const std::string set =
      fmt::format("DELETE FROM schema_version; INSERT INTO schema_version (version) VALUES ({})",
                  kSchemaVersion);
  if (Status s = Exec(wdb_, set.c_str(), "record the schema version"); !s.ok()) return fail(s);
  if (Status s = Exec(wdb_, "COMMIT", "commit the migration"); !s.ok()) return s;
  // A migration may rewrite every job (1 -> 2 does): copy the log into the database now and give
  // its space back, rather than leave a log as large as the database until the next checkpoint.
  if (version > 0) {
    return Exec(wdb_, "PRAGMA wal_checkpoint(TRUNCATE)", "checkpoint after the migration");
  }
  return Status::Ok();
}

Status SqliteStore::PrepareStatements() {
  const std::string select_status =
      "SELECT state, priority_class, start_time, first_start_time, last_checkpoint, stop_at, "
      "evictions, end_time, message, retries FROM jobs WHERE id = ?1";
  struct {
    Stmt* stmt;
    std::string sql;
  } const statements[] = {
      {&begin_, "BEGIN IMMEDIATE"},
      {&commit_, "COMMIT"},
      {&rollback_, "ROLLBACK"},
      {&savepoint_, "SAVEPOINT op"},
      {&release_, "RELEASE op"},
      {&rollback_to_, "ROLLBACK TO op"},
      {&find_key_, "SELECT id FROM jobs WHERE user = ?1 AND idempotency_key = ?2"},
      {&insert_job_,
       "INSERT INTO jobs (name, user, queue, priority_class, submit_time, idempotency_key, spec, "
       "state) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 'pending')"},
      {&insert_event_,
       "INSERT INTO events (time, kind, job, target, actor, message, priority_class, allocation, "
       "stop_at, state) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"},
      {&select_status_, select_status},
      {&update_status_,
       "UPDATE jobs SET state = ?2, priority_class = ?3, "
       "allocation = CASE WHEN ?4 THEN ?5 ELSE allocation END, start_time = ?6, "
       "first_start_time = ?7, last_checkpoint = ?8, stop_at = ?9, evictions = ?10, "
       "end_time = ?11, message = ?12, retries = ?13 WHERE id = ?1"},
      {&upsert_quota_,
       "INSERT INTO queue_quotas (queue, quota, time, actor) VALUES (?1, ?2, ?3, ?4) "
       "ON CONFLICT (queue) DO UPDATE SET quota = excluded.quota, time = excluded.time, "
       "actor = excluded.actor"},
      {&delete_quota_, "DELETE FROM queue_quotas WHERE queue = ?1"},
      {&insert_usage_, "INSERT INTO queue_usage (queue, usage, time) VALUES (?1, ?2, ?3)"},
      {&upsert_node_,
       "INSERT INTO node_states (node, state, reason, time, actor) VALUES (?1, ?2, ?3, ?4, ?5) "
       "ON CONFLICT (node) DO UPDATE SET state = excluded.state, reason = excluded.reason, "
       "time = excluded.time, actor = excluded.actor"},
  };
  for (const auto& s : statements) {
    if (s.stmt->Prepare(wdb_, s.sql) != SQLITE_OK) {
      return DbError(wdb_, fmt::format("prepare \"{}\"", s.sql));
    }
  }
  return Status::Ok();
}

SqliteStore::~SqliteStore() {
  group_.Stop();  // the writer commits what is queued before it stops
  for (Stmt* s : {&begin_, &commit_, &rollback_, &savepoint_, &release_, &rollback_to_, &find_key_,
                  &insert_job_, &insert_event_, &select_status_, &update_status_, &upsert_quota_,
                  &delete_quota_, &upsert_node_, &insert_usage_, &read_begin_, &read_end_,
                  &events_since_, &get_job_}) {
    s->Finalize();
  }
  sqlite3_close(rdb_);
  sqlite3_close(wdb_);  // the last connection: checkpoints the WAL into the database
  if (lock_fd_ >= 0) ::close(lock_fd_);
}

// ---- Group commit ----

void SqliteStore::RunBatch(std::span<Op* const> batch) {
  auto fail_all = [&](const Status& s) {
    for (Op* op : batch) op->status = s;
  };
  committing_.clear();
  if (Status s = Run(wdb_, begin_, "begin"); !s.ok()) return fail_all(s);
  for (Op* op : batch) {
    if (Status s = Run(wdb_, savepoint_, "savepoint"); !s.ok()) {
      op->status = s;
    } else {
      std::uint64_t seq = 0;
      const std::size_t events_before = committing_.size();
      op->status = op->body(seq);
      if (!op->status.ok()) {
        Run(wdb_, rollback_to_, "rollback to savepoint").ok();
        committing_.resize(events_before);
      }
      Run(wdb_, release_, "release savepoint").ok();
    }
    // Some errors (disk full, I/O) make SQLite roll the whole transaction back: nothing of the
    // batch is written, so no Op of it may succeed.
    if (sqlite3_get_autocommit(wdb_) != 0) {
      return fail_all(Status::Unavailable(
          fmt::format("store: the transaction was rolled back ({}); nothing of it was written",
                      op->status.ok() ? std::string(sqlite3_errmsg(wdb_)) : op->status.message())));
    }
  }
  if (Status s = Run(wdb_, commit_, "commit"); !s.ok()) {
    if (sqlite3_get_autocommit(wdb_) == 0) Run(wdb_, rollback_, "rollback").ok();
    for (Op* op : batch) {
      if (op->status.ok()) op->status = s;
    }
    return;
  }
  PublishEvents(committing_);
  committing_.clear();
}

// ---- Writes ----

Status SqliteStore::InsertEvent(Event& e, std::string_view allocation) {
  Stmt& s = insert_event_;
  s.Bind(1, e.time);
  s.Bind(2, std::string_view(EventKindName(e.kind)));
  s.Bind(3, static_cast<std::int64_t>(e.job));
  s.Bind(4, e.target);
  s.Bind(5, e.actor);
  s.Bind(6, e.message);
  s.Bind(7, e.priority_class);
  s.BindTextOrNull(8, allocation);
  s.BindTime(9, e.stop_at);
  if (IsJobEvent(e.kind)) {
    s.Bind(10, std::string_view(job::JobStateName(e.state)));
  } else {
    s.BindNull(10);
  }
  if (Status st = Run(wdb_, s, "insert an event"); !st.ok()) return st;
  e.seq = static_cast<std::uint64_t>(sqlite3_last_insert_rowid(wdb_));
  committing_.push_back(e);
  return Status::Ok();
}

Status SqliteStore::InsertJobs(const std::vector<job::JobSpec>& specs,
                               const std::vector<std::string>& encoded, std::vector<Submitted>& out,
                               std::uint64_t& seq) {
  out.clear();
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const job::JobSpec& spec = specs[i];
    if (!spec.idempotency_key.empty()) {
      Resetter reset(find_key_);
      find_key_.Bind(1, spec.user);
      find_key_.Bind(2, spec.idempotency_key);
      const int rc = find_key_.Step();
      if (rc == SQLITE_ROW) {
        out.push_back({static_cast<JobId>(find_key_.Int(0)), 0, true});
        continue;
      }
      if (rc != SQLITE_DONE) return DbError(wdb_, "look up an idempotency key");
    }
    Stmt& s = insert_job_;
    s.Bind(1, spec.name);
    s.Bind(2, spec.user);
    s.Bind(3, spec.queue);
    s.Bind(4, spec.priority_class);
    s.Bind(5, spec.submit_time);
    s.BindTextOrNull(6, spec.idempotency_key);
    s.BindBlob(7, encoded[i]);
    if (Status st = Run(wdb_, s, "insert a job"); !st.ok()) return st;
    const auto id = static_cast<JobId>(sqlite3_last_insert_rowid(wdb_));
    Event e = internal::SubmittedEvent(spec);
    e.job = id;
    if (Status st = InsertEvent(e, {}); !st.ok()) return st;
    out.push_back({id, e.seq, false});
    seq = e.seq;
  }
  return Status::Ok();
}

GroupCommit::InsertJobs SqliteStore::Inserter() {
  return [this](const std::vector<job::JobSpec>& specs, const std::vector<std::string>& encoded,
                std::vector<Submitted>& out,
                std::uint64_t& seq) { return InsertJobs(specs, encoded, out, seq); };
}

Result<Submitted> SqliteStore::Submit(job::JobSpec spec) {
  return group_.Submit(std::move(spec), Inserter());
}

void SqliteStore::SubmitAsync(job::JobSpec spec, std::function<void(Result<Submitted>)> done) {
  group_.SubmitAsync(std::move(spec), Inserter(), std::move(done));
}

Result<std::vector<Submitted>> SqliteStore::SubmitBatch(std::vector<job::JobSpec> specs) {
  return group_.SubmitBatch(std::move(specs), Inserter());
}

Status SqliteStore::ApplyToJob(std::size_t index, Event& e, std::string_view allocation,
                               std::string_view record) {
  JobStatus status;
  {
    Stmt& s = select_status_;
    Resetter reset(s);
    s.Bind(1, static_cast<std::int64_t>(e.job));
    const int rc = s.Step();
    if (rc == SQLITE_DONE) {
      return Status::NotFound(fmt::format("no job {}", e.job), fmt::format("events[{}]", index));
    }
    if (rc != SQLITE_ROW) return DbError(wdb_, "read a job's status");
    std::optional<job::JobState> state = job::ParseJobState(s.Text(0));
    if (!state)
      return Status::Internal(fmt::format("store: job {}: unknown state '{}'", e.job, s.Text(0)));
    status.state = *state;
    status.priority_class = std::string(s.Text(1));
    status.start_time = s.Time(2);
    status.first_start_time = s.Time(3);
    status.last_checkpoint = s.Time(4);
    status.stop_at = s.Time(5);
    Result<std::vector<Millis>> evictions = ParseEvictions(s.Text(6));
    if (!evictions.ok()) {
      return Status::Internal(
          fmt::format("store: job {}: {}", e.job, evictions.status().message()));
    }
    status.evictions = std::move(evictions).value();
    status.end_time = s.Time(7);
    status.message = std::string(s.Text(8));
    status.retries = static_cast<std::int32_t>(s.Int(9));
  }
  const job::JobState from = status.state;
  if (Status st = ApplyEvent(status, e); !st.ok()) {
    return internal::EventError(index, e, st.message());
  }
  e.state = status.state;
  // The allocation column changes only when the job starts or stops running (it was not read).
  const bool started = e.kind == EventKind::kStarted;
  const bool stopped = from == job::JobState::kRunning && status.state != job::JobState::kRunning;
  Stmt& u = update_status_;
  u.Bind(1, static_cast<std::int64_t>(e.job));
  u.Bind(2, std::string_view(job::JobStateName(status.state)));
  u.Bind(3, status.priority_class);
  u.Bind(4, std::int64_t{started || stopped});
  u.BindBlobOrNull(5, started ? record : std::string_view());
  u.BindTime(6, status.start_time);
  u.BindTime(7, status.first_start_time);
  u.BindTime(8, status.last_checkpoint);
  u.BindTime(9, status.stop_at);
  const std::string evictions = EvictionsText(status.evictions);
  u.Bind(10, evictions);
  u.BindTime(11, status.end_time);
  u.Bind(12, status.message);
  u.Bind(13, std::int64_t{status.retries});
  if (Status st = Run(wdb_, u, "update a job"); !st.ok()) return st;
  return InsertEvent(e, allocation);
}

Result<std::vector<Event>> SqliteStore::Append(std::vector<Event> events) {
  if (Status s = internal::ValidateEvents(events); !s.ok()) return s;
  std::vector<std::string> allocations, records;  // encoded here, outside the writer
  allocations.reserve(events.size());
  records.reserve(events.size());
  for (const Event& e : events) {
    allocations.push_back(AllocationText(e.allocation));
    records.push_back(AllocationRecord(e.allocation));
  }
  std::vector<Event> out;
  Status s = Execute([&](std::uint64_t& seq) {
    out = events;  // a failed attempt leaves `events` as given
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (Status st = ApplyToJob(i, out[i], allocations[i], records[i]); !st.ok()) return st;
      seq = out[i].seq;
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return out;
}

Result<Event> SqliteStore::WriteAdmin(std::function<Status(Event&)> write, Event e) {
  Status s = Execute([&](std::uint64_t& seq) {
    if (Status st = write(e); !st.ok()) return st;
    if (Status st = InsertEvent(e, {}); !st.ok()) return st;
    seq = e.seq;
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return e;
}

Result<Event> SqliteStore::SetQueueQuota(QueueQuotaOverride quota) {
  if (Status s = internal::ValidateQuota(quota); !s.ok()) return s;
  const std::string text = Dump(QuotaToJson(quota.quota));
  return WriteAdmin(
      [&](Event&) {
        upsert_quota_.Bind(1, quota.queue);
        upsert_quota_.Bind(2, text);
        upsert_quota_.Bind(3, quota.time);
        upsert_quota_.Bind(4, quota.actor);
        return Run(wdb_, upsert_quota_, "write a queue quota");
      },
      internal::QuotaEvent(quota));
}

Result<Event> SqliteStore::ResetQueueQuota(const std::string& queue, Millis time,
                                           const std::string& actor) {
  if (Status s = internal::ValidateQuota({queue, {}, time, actor}); !s.ok()) return s;
  return WriteAdmin(
      [&](Event&) {
        delete_quota_.Bind(1, queue);
        return Run(wdb_, delete_quota_, "reset a queue quota");
      },
      internal::QuotaResetEvent(queue, time, actor));
}

Result<Event> SqliteStore::SetNodeState(NodeAdmin node) {
  if (Status s = internal::ValidateNode(node); !s.ok()) return s;
  return WriteAdmin(
      [&](Event&) {
        // Schedulable is kept too: it overrides a cordon of the configuration.
        upsert_node_.Bind(1, node.node);
        upsert_node_.Bind(2, std::string_view(NodeAdminStateName(node.state)));
        upsert_node_.Bind(3, node.reason);
        upsert_node_.Bind(4, node.time);
        upsert_node_.Bind(5, node.actor);
        return Run(wdb_, upsert_node_, "write a node state");
      },
      internal::NodeEvent(node));
}

Result<std::vector<Event>> SqliteStore::RecordNodeHealth(std::vector<Event> events) {
  if (Status s = internal::ValidateNodeHealth(events); !s.ok()) return s;
  Status s = Execute([&](std::uint64_t& seq) {
    for (Event& e : events) {
      if (Status st = InsertEvent(e, {}); !st.ok()) return st;
      seq = e.seq;
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return events;
}

Status SqliteStore::SaveQueueUsage(std::vector<QueueUsage> usage) {
  return Execute([&](std::uint64_t&) {
    if (Status st = Exec(wdb_, "DELETE FROM queue_usage", "clear the queues' usage"); !st.ok())
      return st;
    for (const QueueUsage& u : usage) {
      insert_usage_.Bind(1, u.queue);
      insert_usage_.Bind(2, u.usage);
      insert_usage_.Bind(3, u.time);
      if (Status st = Run(wdb_, insert_usage_, "write a queue's usage"); !st.ok()) return st;
    }
    return Status::Ok();
  });
}

// ---- Reads ----

Result<std::vector<Event>> SqliteStore::EventsSince(std::uint64_t cursor, std::size_t limit) {
  std::lock_guard lock(read_mu_);
  Stmt& s = events_since_;
  Resetter reset(s);
  s.Bind(1, static_cast<std::int64_t>(std::min<std::uint64_t>(cursor, INT64_MAX)));
  s.Bind(2, static_cast<std::int64_t>(std::min<std::size_t>(limit, INT64_MAX)));
  std::vector<Event> out;
  int rc;
  while ((rc = s.Step()) == SQLITE_ROW) {
    Result<Event> e = ReadEvent(s);
    if (!e.ok()) return e.status();
    out.push_back(std::move(e).value());
  }
  if (rc != SQLITE_DONE) return DbError(rdb_, "read events");
  return out;
}

Result<std::optional<StoredJob>> SqliteStore::GetJob(JobId id) {
  std::lock_guard lock(read_mu_);
  Stmt& s = get_job_;
  Resetter reset(s);
  s.Bind(1, static_cast<std::int64_t>(id));
  const int rc = s.Step();
  if (rc == SQLITE_DONE) return std::optional<StoredJob>();
  if (rc != SQLITE_ROW) return DbError(rdb_, "read a job");
  std::optional<StoredJob> job(std::in_place);
  if (Status st = ReadJob(s, *job); !st.ok()) return st;
  return job;
}

Result<std::vector<StoredJob>> SqliteStore::RecentFinished(std::size_t limit) {
  std::lock_guard lock(read_mu_);
  const std::string sql = fmt::format(
      "SELECT {} FROM jobs WHERE state NOT IN ('pending', 'held', 'running') ORDER BY id DESC "
      "LIMIT ?1",
      kJobColumns);
  Stmt s;
  if (s.Prepare(rdb_, sql) != SQLITE_OK) return DbError(rdb_, "read the recent finished jobs");
  s.Bind(1, static_cast<std::int64_t>(std::min<std::size_t>(limit, INT64_MAX)));
  std::vector<StoredJob> out;
  for (;;) {
    const int rc = s.Step();
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) return DbError(rdb_, "read the recent finished jobs");
    if (Status st = ReadJob(s, out.emplace_back()); !st.ok()) return st;
  }
  return out;
}

Status SqliteStore::ReadJobs(const std::string& sql, const LoadOptions& options,
                             std::vector<StoredJob>& jobs) {
  // The pipeline of store/job_batches.h: this fills a batch on its helper thread.
  Stmt s;
  if (s.Prepare(rdb_, sql) != SQLITE_OK) return DbError(rdb_, fmt::format("prepare \"{}\"", sql));
  auto fill = [&](JobBatch& b) {
    while (b.jobs.size() < kJobBatch) {
      const int rc = s.Step();
      if (rc == SQLITE_DONE) {
        b.last = true;
        return;
      }
      if (rc != SQLITE_ROW) {
        b.status = DbError(rdb_, "read jobs");
        return;
      }
      if (Status st = ReadJobColumns(s, b.jobs.emplace_back()); !st.ok()) {
        b.status = std::move(st);
        return;
      }
      b.AddRecords(s.Blob(1), s.Blob(4));
    }
  };
  return ReadJobBatches(fill, options, jobs);
}

Result<Snapshot> SqliteStore::Load(const LoadOptions& options) {
  std::lock_guard lock(read_mu_);
  // One read transaction: every table as of the same commit.
  if (Status s = Run(rdb_, read_begin_, "begin a read"); !s.ok()) return s;
  struct End {
    SqliteStore* store;
    ~End() { Run(store->rdb_, store->read_end_, "end a read").ok(); }
  } end{this};

  Snapshot snap;
  auto each_row = [&](const std::string& sql, const std::function<Status(const Stmt&)>& row) {
    Stmt s;
    if (s.Prepare(rdb_, sql) != SQLITE_OK) return DbError(rdb_, fmt::format("prepare \"{}\"", sql));
    int rc;
    while ((rc = s.Step()) == SQLITE_ROW) {
      if (Status st = row(s); !st.ok()) return st;
    }
    if (rc != SQLITE_DONE) return DbError(rdb_, fmt::format("read \"{}\"", sql));
    return Status::Ok();
  };
  const std::string jobs =
      options.include_finished
          ? fmt::format("SELECT {} FROM jobs ORDER BY id", kJobColumns)
          : fmt::format(
                "SELECT {} FROM jobs WHERE state IN ('pending', 'held', 'running') "
                "ORDER BY id",
                kJobColumns);
  // Reserve first: moving a million records as the vector grows costs as much as reading them.
  Status s = Status::Ok();
  if (options.include_jobs && !options.each_batch) {
    s = each_row(options.include_finished
                     ? "SELECT count(*) FROM jobs"
                     : "SELECT count(*) FROM jobs WHERE state IN ('pending', 'held', 'running')",
                 [&](const Stmt& row) {
                   snap.jobs.reserve(static_cast<std::size_t>(row.Int(0)));
                   return Status::Ok();
                 });
  }
  if (!s.ok()) return s;
  if (options.include_jobs) s = ReadJobs(jobs, options, snap.jobs);
  if (!s.ok()) return s;
  s = each_row("SELECT queue, quota, time, actor FROM queue_quotas ORDER BY queue",
               [&](const Stmt& row) {
                 QueueQuotaOverride q;
                 q.queue = std::string(row.Text(0));
                 const std::string field = fmt::format("queue_quotas.{}", q.queue);
                 Result<std::map<std::string, QuotaSpec>> quota = DecodeQuota(row.Text(1), field);
                 if (!quota.ok()) return Status::Internal("store: " + quota.status().message());
                 q.quota = std::move(quota).value();
                 q.time = row.Int(2);
                 q.actor = std::string(row.Text(3));
                 snap.queue_quotas.push_back(std::move(q));
                 return Status::Ok();
               });
  if (!s.ok()) return s;
  s = each_row("SELECT queue, usage, time FROM queue_usage ORDER BY queue", [&](const Stmt& row) {
    snap.queue_usage.push_back({std::string(row.Text(0)), row.Double(1), row.Int(2)});
    return Status::Ok();
  });
  if (!s.ok()) return s;
  s = each_row("SELECT node, state, reason, time, actor FROM node_states ORDER BY node",
               [&](const Stmt& row) {
                 NodeAdmin n;
                 n.node = std::string(row.Text(0));
                 if (row.Text(1) == "schedulable") {
                   n.state = NodeAdminState::kSchedulable;
                 } else if (row.Text(1) == "cordoned") {
                   n.state = NodeAdminState::kCordoned;
                 } else if (row.Text(1) == "draining") {
                   n.state = NodeAdminState::kDraining;
                 } else {
                   return Status::Internal(fmt::format("store: node_states.{}: unknown state '{}'",
                                                       n.node, row.Text(1)));
                 }
                 n.reason = std::string(row.Text(2));
                 n.time = row.Int(3);
                 n.actor = std::string(row.Text(4));
                 snap.nodes.push_back(std::move(n));
                 return Status::Ok();
               });
  if (!s.ok()) return s;
  s = each_row("SELECT name, seq FROM sqlite_sequence", [&](const Stmt& row) {
    if (row.Text(0) == "events") snap.last_seq = static_cast<std::uint64_t>(row.Int(1));
    if (row.Text(0) == "jobs") snap.last_job_id = static_cast<JobId>(row.Int(1));
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return snap;
}

}  // namespace

Result<std::unique_ptr<Store>> OpenSqliteStore(const SqliteOptions& options) {
  return SqliteStore::Open(options);
}

}  // namespace arbiter::store
