// The PostgreSQL store: the SQLite store's schema ideas and answers on a database that several
// servers share, one leading. docs/design/store.md ("PostgreSQL") explains the choices.
//
// Writes: group commit (store/group_commit.h). The writer thread owns one connection
// (application_name arbiter-store-writer) in libpq's pipeline mode: a batch is one transaction,
// each call inside a savepoint, and the statements that need no answer (inserts with the ids the
// store assigned) are sent without waiting, so a whole batch of submissions costs one round trip
// and one commit. A call that reads (an idempotency key, the jobs an Append changes) waits for
// its answer, which flushes what is queued before it. A refused call is rolled back to its
// savepoint; a statement the server refuses aborts the pipeline, so the batch is rolled back and
// run again without that call. Callers are woken only after COMMIT returned.
//
// Fencing: with an epoch, each batch first reads the leader row FOR SHARE, so a server that took
// the lease (which updates that row) waits for the batch, and a batch of a deposed leader writes
// nothing.
//
// Reads use a second connection under a mutex; Load reads one REPEATABLE READ snapshot through a
// cursor, in binary, a batch at a time (store/job_batches.h).
#include <fmt/format.h>
#include <libpq-fe.h>

#include <algorithm>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "store/binary.h"
#include "store/codec.h"
#include "store/group_commit.h"
#include "store/internal.h"
#include "store/job_batches.h"
#include "store/pg.h"
#include "store/store.h"

namespace arbiter::store {
namespace {

using pg::Conn;
using pg::Params;
using pg::Rows;

constexpr const char* kJobColumns =
    "id, spec, priority_class, state, allocation, start_time, first_start_time, last_checkpoint, "
    "stop_at, evictions, end_time, message, retries";
constexpr const char* kEventColumns =
    "seq, time, kind, job, target, actor, message, priority_class, allocation, stop_at, state";
constexpr const char* kActive = "state IN ('pending', 'held', 'running')";
constexpr std::string_view kWriterName = "arbiter-store-writer";

// The writer's prepared statements.
struct Statement {
  const char* name;
  const char* sql;
};
constexpr Statement kStatements[] = {
    {"begin", "BEGIN"},
    {"commit", "COMMIT"},
    {"rollback", "ROLLBACK"},
    {"savepoint", "SAVEPOINT op"},
    {"release", "RELEASE op"},
    {"rollback_to", "ROLLBACK TO op"},
    {"fence", "SELECT epoch FROM leader WHERE id = 1 FOR SHARE"},
    {"counters", "SELECT last_job_id, last_seq FROM counters WHERE id = 1 FOR UPDATE"},
    {"set_counters", "UPDATE counters SET last_job_id = $1, last_seq = $2 WHERE id = 1"},
    {"find_key", "SELECT id FROM jobs WHERE user_name = $1 AND idempotency_key = $2"},
    {"insert_job",
     "INSERT INTO jobs (id, name, user_name, queue, priority_class, submit_time, "
     "idempotency_key, spec, state) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'pending')"},
    {"insert_event",
     "INSERT INTO events (seq, time, kind, job, target, actor, message, priority_class, "
     "allocation, stop_at, state) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"},
    {"select_status",
     "SELECT id, state, priority_class, start_time, first_start_time, last_checkpoint, stop_at, "
     "evictions, end_time, message, retries FROM jobs WHERE id = ANY($1::bigint[])"},
    {"update_status",
     "UPDATE jobs SET state = $2, priority_class = $3, start_time = $4, first_start_time = $5, "
     "last_checkpoint = $6, stop_at = $7, evictions = $8, end_time = $9, message = $10, "
     "retries = $11 WHERE id = $1"},
    {"update_status_allocation",
     "UPDATE jobs SET state = $2, priority_class = $3, start_time = $4, first_start_time = $5, "
     "last_checkpoint = $6, stop_at = $7, evictions = $8, end_time = $9, message = $10, "
     "retries = $11, allocation = $12 WHERE id = $1"},
    {"upsert_quota",
     "INSERT INTO queue_quotas (queue, quota, time, actor) VALUES ($1, $2, $3, $4) "
     "ON CONFLICT (queue) DO UPDATE SET quota = excluded.quota, time = excluded.time, "
     "actor = excluded.actor"},
    {"delete_quota", "DELETE FROM queue_quotas WHERE queue = $1"},
    {"upsert_node",
     "INSERT INTO node_states (node, state, reason, time, actor) VALUES ($1, $2, $3, $4, $5) "
     "ON CONFLICT (node) DO UPDATE SET state = excluded.state, reason = excluded.reason, "
     "time = excluded.time, actor = excluded.actor"},
    {"clear_usage", "DELETE FROM queue_usage"},
    {"insert_usage", "INSERT INTO queue_usage (queue, usage, time) VALUES ($1, $2, $3)"},
};

std::string EvictionsText(const std::vector<Millis>& evictions) {
  return fmt::format("[{}]", fmt::join(evictions, ","));
}

std::string AllocationText(const job::StoredAllocation& a) {
  return a.empty() ? std::string() : Dump(AllocationToJson(a));
}

std::string AllocationRecord(const job::StoredAllocation& a) {
  return a.empty() ? std::string() : EncodeAllocationBinary(a);
}

// One row of a result, as ReadJobColumns reads it.
struct RowOf {
  const Rows& rows;
  int row;
  bool IsNull(int col) const { return rows.IsNull(row, col); }
  std::string_view Text(int col) const { return rows.Text(row, col); }
  std::int64_t Int(int col) const { return rows.Int(row, col); }
};

// One tuple of a binary COPY: each field's bytes (NULL: `null`), integers big-endian.
struct CopyRow {
  static constexpr int kMax = 16;
  std::string_view fields[kMax];
  bool null[kMax] = {};
  int count = 0;
  bool IsNull(int col) const { return null[col]; }
  std::string_view Text(int col) const { return fields[col]; }
  std::int64_t Int(int col) const {
    std::uint64_t u = 0;
    for (const char c : fields[col]) u = (u << 8) | static_cast<unsigned char>(c);
    switch (fields[col].size()) {
      case 2:
        return static_cast<std::int16_t>(u);
      case 4:
        return static_cast<std::int32_t>(u);
      default:
        return static_cast<std::int64_t>(u);
    }
  }
};

std::uint32_t BigEndian(const char* p, int bytes) {
  std::uint32_t u = 0;
  for (int i = 0; i < bytes; ++i) u = (u << 8) | static_cast<unsigned char>(p[i]);
  return u;
}

// Parses one CopyData message of a binary COPY into `row` (views into `data`); the file's header
// comes before the first tuple. Sets `end` on the trailer. Errors name the byte.
Status ParseCopyTuple(std::string_view data, bool& header, CopyRow& row, bool& end) {
  std::size_t at = 0;
  auto need = [&](std::size_t n) { return data.size() - at >= n; };
  auto bad = [&] {
    return Status::Internal(
        fmt::format("store: read jobs: malformed COPY data at byte {}", at + 1));
  };
  if (header) {
    constexpr std::string_view kSignature("PGCOPY\n\377\r\n\0", 11);
    if (!need(19) || data.substr(0, 11) != kSignature) return bad();
    at = 15;
    const std::uint32_t extension = BigEndian(data.data() + at, 4);
    at += 4;
    if (!need(extension)) return bad();
    at += extension;
    header = false;
    if (at == data.size()) {
      row.count = 0;
      return Status::Ok();
    }
  }
  if (!need(2)) return bad();
  const auto fields = static_cast<std::int16_t>(BigEndian(data.data() + at, 2));
  at += 2;
  if (fields == -1) {
    end = true;
    return Status::Ok();
  }
  if (fields < 0 || fields > CopyRow::kMax) return bad();
  row.count = fields;
  for (int f = 0; f < fields; ++f) {
    if (!need(4)) return bad();
    const auto length = static_cast<std::int32_t>(BigEndian(data.data() + at, 4));
    at += 4;
    if (length < 0) {
      row.null[f] = true;
      row.fields[f] = {};
      continue;
    }
    if (!need(static_cast<std::size_t>(length))) return bad();
    row.null[f] = false;
    row.fields[f] = data.substr(at, static_cast<std::size_t>(length));
    at += static_cast<std::size_t>(length);
  }
  return Status::Ok();
}

// One row of kJobColumns into `job`, all but the binary records (columns 1 and 4).
template <typename Row>
Status ReadJobColumns(const Row& r, StoredJob& job) {
  job.id = static_cast<JobId>(r.Int(0));
  JobStatus& st = job.status;
  st.priority_class = std::string(r.Text(2));
  std::optional<job::JobState> state = job::ParseJobState(r.Text(3));
  if (!state) {
    return JobError(job.id, Status::Internal(fmt::format("state: unknown '{}'", r.Text(3))));
  }
  st.state = *state;
  auto time = [&](int col) -> Millis { return r.IsNull(col) ? -1 : r.Int(col); };
  st.start_time = time(5);
  st.first_start_time = time(6);
  st.last_checkpoint = time(7);
  st.stop_at = time(8);
  if (r.Text(9) != "[]") {
    Result<std::vector<Millis>> evictions = DecodeMillisList(r.Text(9), "evictions");
    if (!evictions.ok()) return JobError(job.id, evictions.status());
    st.evictions = std::move(evictions).value();
  }
  st.end_time = time(10);
  st.message = std::string(r.Text(11));
  st.retries = static_cast<std::int32_t>(r.Int(12));
  return Status::Ok();
}

Result<Event> ReadEvent(const Rows& r, int row) {
  Event e;
  e.seq = static_cast<std::uint64_t>(r.Int(row, 0));
  auto fail = [&](const Status& st) {
    return Status::Internal(fmt::format("store: event {}: {}", e.seq, st.message()));
  };
  e.time = r.Int(row, 1);
  std::optional<EventKind> kind = ParseEventKind(r.Text(row, 2));
  if (!kind) return fail(Status::Internal(fmt::format("kind: unknown '{}'", r.Text(row, 2))));
  e.kind = *kind;
  e.job = static_cast<JobId>(r.Int(row, 3));
  e.target = std::string(r.Text(row, 4));
  e.actor = std::string(r.Text(row, 5));
  e.message = std::string(r.Text(row, 6));
  e.priority_class = std::string(r.Text(row, 7));
  if (!r.IsNull(row, 8)) {
    Result<job::StoredAllocation> alloc = DecodeAllocation(r.Text(row, 8), "allocation");
    if (!alloc.ok()) return fail(alloc.status());
    e.allocation = std::move(alloc).value();
  }
  e.stop_at = r.TimeOrNever(row, 9);
  if (!r.IsNull(row, 10)) {
    std::optional<job::JobState> state = job::ParseJobState(r.Text(row, 10));
    if (!state) return fail(Status::Internal(fmt::format("state: unknown '{}'", r.Text(row, 10))));
    e.state = *state;
  }
  return e;
}

class PostgresStore final : public Store {
 public:
  static Result<std::unique_ptr<Store>> Open(const PostgresOptions& options);
  ~PostgresStore() override;

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
  Result<JobChanges> JobsChangedSince(std::uint64_t seq) override;
  Result<Snapshot> Load(const LoadOptions& options) override;

 private:
  using Op = GroupCommit::Op;

  // A statement sent in the pipeline whose answer is not read yet.
  struct Pending {
    int op;  // the index of the Op that sent it in the batch; -1: the batch's own
    std::string_view what;
    bool sync = false;  // a sync point, not a statement
  };
  // The first statement of the batch that failed, and whose it was.
  struct Failure {
    int op;
    Status status;
  };

  PostgresStore() = default;

  Status Execute(std::function<Status(std::uint64_t& seq)> body) {
    return group_.Execute(std::move(body));
  }
  void ExecuteAsync(std::function<Status(std::uint64_t& seq)> body,
                    std::function<void(Status)> done) {
    group_.ExecuteAsync(std::move(body), std::move(done));
  }

  // ---- The writer's connection and pipeline (writer thread only) ----
  Status ConnectWriter();
  // Sends a prepared statement without waiting for its answer.
  void Send(const char* statement, const Params& params, std::string_view what);
  // Sends a prepared statement and waits for its rows (and every answer before them).
  Result<Rows> Query(const char* statement, const Params& params, std::string_view what);
  // Reads the answers of everything sent; `keep` takes the last one's rows.
  void Drain(Rows* keep = nullptr);
  // Sends a sync point and reads every answer up to it.
  void Sync();
  void RunBatch(std::span<Op* const> batch);
  // One attempt at the batch's live Ops: true when it is finished (committed or failed for
  // all), false to run again (an Op was excluded).
  bool TryBatch(std::span<Op* const> batch);
  void EndAttempt();

  // Writer-thread helpers (inside the batch's transaction).
  // InsertJobs, for the group commit's submissions.
  GroupCommit::InsertJobs Inserter();
  Status InsertJobs(const std::vector<job::JobSpec>& specs, const std::vector<std::string>& encoded,
                    std::vector<Submitted>& out, std::uint64_t& seq);
  // Assigns e.seq and sends its insert; `allocation` is e.allocation's JSON text.
  void InsertEvent(Event& e, std::string_view allocation);
  Status AppendEvents(std::vector<Event>& events, const std::vector<std::string>& allocations,
                      const std::vector<std::string>& records, std::uint64_t& seq);
  Result<Event> WriteAdmin(std::function<void()> write, Event e);

  // ---- Reads ----
  Status ConnectReader();  // under read_mu_
  // A REPEATABLE READ, READ ONLY transaction on the reader's connection (under read_mu_), rolled
  // back by an EndSnapshot when it goes out of scope.
  Status BeginSnapshot() {
    Result<Rows> r =
        Read("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", {}, "store: begin a read");
    return r.ok() ? Status::Ok() : r.status();
  }
  struct EndSnapshot {
    PostgresStore* store;
    ~EndSnapshot() {
      if (store->rconn_ != nullptr && !store->rconn_->broken()) {
        store->rconn_->Exec("ROLLBACK", {}, "store: end a read").ok();
      }
    }
  };
  // Load's parts, inside its snapshot (under read_mu_).
  Status LoadJobs(Conn& conn, const LoadOptions& options, Snapshot& snap);
  Status LoadRest(Conn& conn, Snapshot& snap);
  Result<Rows> Read(std::string_view sql, const Params& params, std::string_view what);

  std::string url_;
  std::uint64_t epoch_ = 0;
  std::function<void()> on_fenced_;
  bool told_fenced_ = false;
  std::shared_ptr<Severance> severance_;  // the leader's term, when given

  // Writer thread only.
  std::unique_ptr<Conn> wconn_;
  std::deque<Pending> pending_;
  std::optional<Failure> failure_;
  int current_op_ = -1;
  std::int64_t last_job_id_ = 0;  // as assigned so far in the batch
  std::int64_t last_seq_ = 0;
  std::vector<Event> committing_;  // the events of the batch being written

  std::mutex read_mu_;
  std::unique_ptr<Conn> rconn_;

  GroupCommit group_;
};

Result<std::unique_ptr<Store>> PostgresStore::Open(const PostgresOptions& options) {
  if (options.url.empty()) {
    return Status::InvalidArgument("store: the PostgreSQL URL is not given", "url");
  }
  std::unique_ptr<PostgresStore> store(new PostgresStore());
  store->url_ = options.url;
  store->epoch_ = options.epoch;
  store->on_fenced_ = options.on_fenced;
  store->severance_ = options.severance;
  {
    std::lock_guard lock(store->read_mu_);
    if (Status s = store->ConnectReader(); !s.ok()) return s;
    if (options.read_only) return std::unique_ptr<Store>(std::move(store));  // no writer
    if (Status s = pg::Migrate(*store->rconn_); !s.ok()) return s;
    Result<Rows> last =
        store->Read("SELECT last_seq FROM counters WHERE id = 1", {}, "store: read the last event");
    if (!last.ok()) return last.status();
    if (last->rows() == 1) store->PublishEvents({}, static_cast<std::uint64_t>(last->Int(0, 0)));
  }
  if (Status s = store->ConnectWriter(); !s.ok()) return s;
  store->group_.Start(options.max_batch,
                      [s = store.get()](std::span<Op* const> batch) { s->RunBatch(batch); });
  return std::unique_ptr<Store>(std::move(store));
}

PostgresStore::~PostgresStore() {
  group_.Stop();  // the writer commits what is queued before it stops
}

// ---- The writer's pipeline ----

Status PostgresStore::ConnectWriter() {
  wconn_.reset();
  Result<std::unique_ptr<Conn>> conn =
      Conn::Connect(url_, "store: connect the writer to PostgreSQL", kWriterName, severance_);
  if (!conn.ok()) return conn.status();
  // Acknowledged means flushed to the server's disk, whatever the database's default says.
  if (Result<Rows> r = (*conn)->Exec("SET synchronous_commit = on", {}, "store: writer setup");
      !r.ok()) {
    return r.status();
  }
  for (const Statement& s : kStatements) {
    Rows prepared(PQprepare((*conn)->raw(), s.name, s.sql, 0, nullptr));
    const ExecStatusType st =
        prepared.raw() == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(prepared.raw());
    if (st != PGRES_COMMAND_OK) {
      return (*conn)->Error(prepared.raw(), fmt::format("store: prepare \"{}\"", s.sql));
    }
  }
  if (PQenterPipelineMode((*conn)->raw()) != 1) {
    return (*conn)->Error(nullptr, "store: enter pipeline mode");
  }
  wconn_ = std::move(conn).value();
  return Status::Ok();
}

void PostgresStore::Send(const char* statement, const Params& params, std::string_view what) {
  if (failure_ && wconn_->broken()) return;
  Params::Arrays a;
  params.Fill(a);
  if (PQsendQueryPrepared(wconn_->raw(), statement, static_cast<int>(params.size()),
                          a.values.data(), a.lengths.data(), a.formats.data(), 1) != 1) {
    if (!failure_) failure_ = Failure{current_op_, wconn_->Error(nullptr, what)};
    return;
  }
  pending_.push_back({current_op_, what, false});
}

void PostgresStore::Drain(Rows* keep) {
  PGconn* c = wconn_->raw();
  while (!pending_.empty()) {
    const Pending p = pending_.front();
    pending_.pop_front();
    if (wconn_->broken()) {
      if (!failure_) failure_ = Failure{p.op, wconn_->Error(nullptr, p.what)};
      continue;
    }
    for (int nulls = 0;;) {
      Rows r(PQgetResult(c));
      if (r.raw() == nullptr) {
        if (wconn_->broken()) {
          if (!failure_) failure_ = Failure{p.op, wconn_->Error(nullptr, p.what)};
        } else if (p.sync && ++nulls < 3) {
          continue;  // a sync point's answer is a result of its own
        } else if (p.sync && !failure_) {
          failure_ = Failure{p.op, Status::Internal("store: sync: no answer")};
        }
        break;
      }
      const ExecStatusType st = PQresultStatus(r.raw());
      if (st == PGRES_PIPELINE_SYNC) break;  // no null after a sync point's result
      if (st == PGRES_FATAL_ERROR || st == PGRES_NONFATAL_ERROR || st == PGRES_BAD_RESPONSE) {
        if (!failure_) failure_ = Failure{p.op, wconn_->Error(r.raw(), p.what)};
      } else if (st == PGRES_PIPELINE_ABORTED) {
        if (!failure_) {
          failure_ =
              Failure{p.op, Status::Internal(fmt::format("{}: the pipeline was aborted", p.what))};
        }
      } else if (keep != nullptr && pending_.empty()) {
        *keep = std::move(r);
      }
      if (wconn_->broken()) {
        if (!failure_) failure_ = Failure{p.op, wconn_->Error(nullptr, p.what)};
        break;
      }
    }
  }
}

Result<Rows> PostgresStore::Query(const char* statement, const Params& params,
                                  std::string_view what) {
  Send(statement, params, what);
  if (!failure_ && (PQsendFlushRequest(wconn_->raw()) != 1 || PQflush(wconn_->raw()) != 0)) {
    failure_ = Failure{current_op_, wconn_->Error(nullptr, what)};
  }
  Rows rows;
  Drain(&rows);
  if (failure_) return failure_->status;
  return rows;
}

void PostgresStore::Sync() {
  if (PQpipelineSync(wconn_->raw()) != 1) {
    if (!failure_) failure_ = Failure{current_op_, wconn_->Error(nullptr, "store: sync")};
    pending_.clear();
    return;
  }
  pending_.push_back({current_op_, "store: sync", true});
  Drain();
}

void PostgresStore::EndAttempt() {
  // After a failure the transaction is aborted (or gone with the connection): roll it back.
  if (wconn_ == nullptr) return;
  if (wconn_->broken()) {
    wconn_.reset();  // the next batch connects again
    return;
  }
  const std::optional<Failure> failure = std::move(failure_);
  failure_.reset();
  Send("rollback", {}, "store: rollback");
  Sync();
  if (failure_ || wconn_->broken()) wconn_.reset();
  failure_ = failure;
}

void PostgresStore::RunBatch(std::span<Op* const> batch) {
  for (Op* op : batch) op->excluded = false;
  // Each failed attempt excludes one Op, so this ends.
  while (!TryBatch(batch)) {
  }
}

bool PostgresStore::TryBatch(std::span<Op* const> batch) {
  auto fail_live = [&](const Status& s) {
    for (Op* op : batch) {
      // A call refused on its own keeps its answer (it would have been refused anyway).
      if (!op->excluded && (op->status.ok() || op->status.code() == StatusCode::kUnavailable ||
                            op->status.code() == StatusCode::kInternal)) {
        op->status = s;
      }
    }
  };
  failure_.reset();
  pending_.clear();
  committing_.clear();
  current_op_ = -1;
  for (Op* op : batch) {
    if (!op->excluded) op->status = Status::Ok();
  }
  if (wconn_ == nullptr || wconn_->broken()) {
    if (Status s = ConnectWriter(); !s.ok()) {
      fail_live(s);
      return true;
    }
  }
  Send("begin", {}, "store: begin");
  if (epoch_ != 0) {
    Result<Rows> leader = Query("fence", {}, "store: read the leader's epoch");
    if (leader.ok()) {
      const std::int64_t theirs = leader->rows() == 1 ? leader->Int(0, 0) : 0;
      if (theirs != static_cast<std::int64_t>(epoch_)) {
        EndAttempt();
        fail_live(Status::Unavailable(fmt::format(
            "store: fenced: this server's epoch {} is not the leader's {}; another server leads",
            epoch_, theirs)));
        if (!told_fenced_) {
          told_fenced_ = true;
          if (on_fenced_) on_fenced_();
        }
        return true;
      }
    }
  }
  if (!failure_) {
    Result<Rows> counters = Query("counters", {}, "store: read the counters");
    if (counters.ok() && counters->rows() == 1) {
      last_job_id_ = counters->Int(0, 0);
      last_seq_ = counters->Int(0, 1);
    } else if (counters.ok()) {
      failure_ = Failure{-1, Status::Internal("store: the counters row is missing")};
    }
  }
  for (std::size_t i = 0; i < batch.size() && !failure_; ++i) {
    Op* op = batch[i];
    if (op->excluded) continue;
    current_op_ = static_cast<int>(i);
    const std::int64_t job_before = last_job_id_, seq_before = last_seq_;
    const std::size_t events_before = committing_.size();
    Send("savepoint", {}, "store: savepoint");
    std::uint64_t seq = 0;
    op->status = op->body(seq);
    if (failure_) break;
    if (!op->status.ok()) {
      Send("rollback_to", {}, "store: rollback to savepoint");
      last_job_id_ = job_before;
      last_seq_ = seq_before;
      committing_.resize(events_before);
    }
    Send("release", {}, "store: release savepoint");
    // Read the answers now and then: a pipeline whose answers are never read could fill both
    // sides' buffers.
    if (pending_.size() > 2048) {
      if (PQsendFlushRequest(wconn_->raw()) != 1 || PQflush(wconn_->raw()) != 0) {
        failure_ = Failure{current_op_, wconn_->Error(nullptr, "store: flush")};
      }
      Drain();
    }
  }
  current_op_ = -1;
  if (!failure_) {
    Send("set_counters", Params().Int(last_job_id_).Int(last_seq_), "store: write the counters");
    Send("commit", {}, "store: commit");
  }
  Sync();
  if (!failure_) {
    PublishEvents(committing_);
    committing_.clear();
    return true;
  }
  const Failure failure = *failure_;
  const bool lost = wconn_ == nullptr || wconn_->broken();
  EndAttempt();
  if (lost) {
    fail_live(Status::Unavailable(
        fmt::format("{} (the connection to PostgreSQL was lost; the batch's calls are not "
                    "acknowledged)",
                    failure.status.message())));
    return true;
  }
  if (failure.op < 0) {
    fail_live(failure.status);
    return true;
  }
  // A statement of one call was refused: that call fails, the others run again without it.
  Op* op = batch[static_cast<std::size_t>(failure.op)];
  op->status = failure.status;
  op->excluded = true;
  return false;
}

// ---- Writes ----

void PostgresStore::InsertEvent(Event& e, std::string_view allocation) {
  e.seq = static_cast<std::uint64_t>(++last_seq_);
  Params p;
  p.Int(last_seq_)
      .Int(e.time)
      .Text(EventKindName(e.kind))
      .Int(static_cast<std::int64_t>(e.job))
      .Text(e.target)
      .Text(e.actor)
      .Text(e.message)
      .Text(e.priority_class)
      .TextOrNull(allocation)
      .TimeOrNull(e.stop_at);
  if (IsJobEvent(e.kind)) {
    p.Text(job::JobStateName(e.state));
  } else {
    p.Null();
  }
  Send("insert_event", p, "store: insert an event");
  committing_.push_back(e);
}

Status PostgresStore::InsertJobs(const std::vector<job::JobSpec>& specs,
                                 const std::vector<std::string>& encoded,
                                 std::vector<Submitted>& out, std::uint64_t& seq) {
  out.clear();
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const job::JobSpec& spec = specs[i];
    if (!spec.idempotency_key.empty()) {
      Result<Rows> found = Query("find_key", Params().Text(spec.user).Text(spec.idempotency_key),
                                 "store: look up an idempotency key");
      if (!found.ok()) return found.status();
      if (found->rows() > 0) {
        out.push_back({static_cast<JobId>(found->Int(0, 0)), 0, true});
        continue;
      }
    }
    const std::int64_t id = ++last_job_id_;
    Send("insert_job",
         Params()
             .Int(id)
             .Text(spec.name)
             .Text(spec.user)
             .Text(spec.queue)
             .Text(spec.priority_class)
             .Int(spec.submit_time)
             .TextOrNull(spec.idempotency_key)
             .Bytes(encoded[i]),
         "store: insert a job");
    Event e = internal::SubmittedEvent(spec);
    e.job = static_cast<JobId>(id);
    InsertEvent(e, {});
    out.push_back({e.job, e.seq, false});
    seq = e.seq;
  }
  return Status::Ok();
}

GroupCommit::InsertJobs PostgresStore::Inserter() {
  return [this](const std::vector<job::JobSpec>& specs, const std::vector<std::string>& encoded,
                std::vector<Submitted>& out,
                std::uint64_t& seq) { return InsertJobs(specs, encoded, out, seq); };
}

Result<Submitted> PostgresStore::Submit(job::JobSpec spec) {
  return group_.Submit(std::move(spec), Inserter());
}

void PostgresStore::SubmitAsync(job::JobSpec spec, std::function<void(Result<Submitted>)> done) {
  group_.SubmitAsync(std::move(spec), Inserter(), std::move(done));
}

Result<std::vector<Submitted>> PostgresStore::SubmitBatch(std::vector<job::JobSpec> specs) {
  return group_.SubmitBatch(std::move(specs), Inserter());
}

Status PostgresStore::AppendEvents(std::vector<Event>& events,
                                   const std::vector<std::string>& allocations,
                                   const std::vector<std::string>& records, std::uint64_t& seq) {
  // One read for every job the events touch, then the events applied in order in memory, then
  // one update per job and one insert per event, sent without waiting.
  std::string ids = "{";
  for (std::size_t i = 0; i < events.size(); ++i) {
    if (i > 0) ids += ',';
    ids += std::to_string(events[i].job);
  }
  ids += '}';
  Result<Rows> rows = Query("select_status", Params().Text(ids), "store: read jobs' status");
  if (!rows.ok()) return rows.status();
  struct Touched {
    JobStatus status;
    bool allocation_changed = false;
    std::string_view record;  // the allocation's record when changed (empty: NULL)
    bool changed = false;
  };
  std::map<JobId, Touched> jobs;
  for (int r = 0; r < rows->rows(); ++r) {
    const auto id = static_cast<JobId>(rows->Int(r, 0));
    JobStatus& status = jobs[id].status;
    std::optional<job::JobState> state = job::ParseJobState(rows->Text(r, 1));
    if (!state) {
      return Status::Internal(
          fmt::format("store: job {}: unknown state '{}'", id, rows->Text(r, 1)));
    }
    status.state = *state;
    status.priority_class = std::string(rows->Text(r, 2));
    status.start_time = rows->TimeOrNever(r, 3);
    status.first_start_time = rows->TimeOrNever(r, 4);
    status.last_checkpoint = rows->TimeOrNever(r, 5);
    status.stop_at = rows->TimeOrNever(r, 6);
    Result<std::vector<Millis>> evictions = DecodeMillisList(rows->Text(r, 7), "evictions");
    if (!evictions.ok()) {
      return Status::Internal(fmt::format("store: job {}: {}", id, evictions.status().message()));
    }
    status.evictions = std::move(evictions).value();
    status.end_time = rows->TimeOrNever(r, 8);
    status.message = std::string(rows->Text(r, 9));
    status.retries = static_cast<std::int32_t>(rows->Int(r, 10));
  }
  for (std::size_t i = 0; i < events.size(); ++i) {
    Event& e = events[i];
    auto it = jobs.find(e.job);
    if (it == jobs.end()) {
      return Status::NotFound(fmt::format("no job {}", e.job), fmt::format("events[{}]", i));
    }
    Touched& t = it->second;
    const job::JobState from = t.status.state;
    if (Status st = ApplyEvent(t.status, e); !st.ok()) {
      return internal::EventError(i, e, st.message());
    }
    e.state = t.status.state;
    t.changed = true;
    // The allocation column changes only when the job starts or stops running.
    if (e.kind == EventKind::kStarted) {
      t.allocation_changed = true;
      t.record = records[i];
    } else if (from == job::JobState::kRunning && t.status.state != job::JobState::kRunning) {
      t.allocation_changed = true;
      t.record = {};
    }
  }
  for (auto& [id, t] : jobs) {
    if (!t.changed) continue;
    const std::string evictions = EvictionsText(t.status.evictions);
    Params p;
    p.Int(static_cast<std::int64_t>(id))
        .Text(job::JobStateName(t.status.state))
        .Text(t.status.priority_class)
        .TimeOrNull(t.status.start_time)
        .TimeOrNull(t.status.first_start_time)
        .TimeOrNull(t.status.last_checkpoint)
        .TimeOrNull(t.status.stop_at)
        .Text(evictions)
        .TimeOrNull(t.status.end_time)
        .Text(t.status.message)
        .Int(t.status.retries);
    if (t.allocation_changed) p.BytesOrNull(t.record);
    Send(t.allocation_changed ? "update_status_allocation" : "update_status", p,
         "store: update a job");
  }
  for (std::size_t i = 0; i < events.size(); ++i) {
    InsertEvent(events[i], allocations[i]);
    seq = events[i].seq;
  }
  return Status::Ok();
}

Result<std::vector<Event>> PostgresStore::Append(std::vector<Event> events) {
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
    return AppendEvents(out, allocations, records, seq);
  });
  if (!s.ok()) return s;
  return out;
}

Result<Event> PostgresStore::WriteAdmin(std::function<void()> write, Event e) {
  Status s = Execute([&](std::uint64_t& seq) {
    write();
    InsertEvent(e, {});
    seq = e.seq;
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return e;
}

Result<Event> PostgresStore::SetQueueQuota(QueueQuotaOverride quota) {
  if (Status s = internal::ValidateQuota(quota); !s.ok()) return s;
  const std::string text = Dump(QuotaToJson(quota.quota));
  return WriteAdmin(
      [&] {
        Send("upsert_quota",
             Params().Text(quota.queue).Text(text).Int(quota.time).Text(quota.actor),
             "store: write a queue quota");
      },
      internal::QuotaEvent(quota));
}

Result<Event> PostgresStore::ResetQueueQuota(const std::string& queue, Millis time,
                                             const std::string& actor) {
  if (Status s = internal::ValidateQuota({queue, {}, time, actor}); !s.ok()) return s;
  return WriteAdmin(
      [&] { Send("delete_quota", Params().Text(queue), "store: reset a queue quota"); },
      internal::QuotaResetEvent(queue, time, actor));
}

Result<Event> PostgresStore::SetNodeState(NodeAdmin node) {
  if (Status s = internal::ValidateNode(node); !s.ok()) return s;
  return WriteAdmin(
      [&] {
        // Schedulable is kept too: it overrides a cordon of the configuration.
        Send("upsert_node",
             Params()
                 .Text(node.node)
                 .Text(NodeAdminStateName(node.state))
                 .Text(node.reason)
                 .Int(node.time)
                 .Text(node.actor),
             "store: write a node state");
      },
      internal::NodeEvent(node));
}

Result<std::vector<Event>> PostgresStore::RecordNodeHealth(std::vector<Event> events) {
  if (Status s = internal::ValidateNodeHealth(events); !s.ok()) return s;
  Status s = Execute([&](std::uint64_t& seq) {
    for (Event& e : events) {
      InsertEvent(e, {});
      seq = e.seq;
    }
    return Status::Ok();
  });
  if (!s.ok()) return s;
  return events;
}

Status PostgresStore::SaveQueueUsage(std::vector<QueueUsage> usage) {
  return Execute([&](std::uint64_t&) {
    Send("clear_usage", {}, "store: clear the queues' usage");
    for (const QueueUsage& u : usage) {
      Send("insert_usage", Params().Text(u.queue).Double(u.usage).Int(u.time),
           "store: write a queue's usage");
    }
    return Status::Ok();
  });
}

// ---- Reads ----

Status PostgresStore::ConnectReader() {
  rconn_.reset();
  Result<std::unique_ptr<Conn>> conn =
      Conn::Connect(url_, "store: connect to PostgreSQL", {}, severance_);
  if (!conn.ok()) return conn.status();
  rconn_ = std::move(conn).value();
  return Status::Ok();
}

Result<Rows> PostgresStore::Read(std::string_view sql, const Params& params,
                                 std::string_view what) {
  if (rconn_ == nullptr || rconn_->broken()) {
    if (Status s = ConnectReader(); !s.ok()) return s;
  }
  Result<Rows> rows = rconn_->Exec(sql, params, what, /*binary=*/true);
  // A session that was gone before this read (the server restarted, an administrator ended it):
  // a read changes nothing, so it is tried once more on a new connection.
  if (!rows.ok() && rconn_->broken() && PQtransactionStatus(rconn_->raw()) != PQTRANS_INTRANS) {
    if (Status s = ConnectReader(); !s.ok()) return s;
    rows = rconn_->Exec(sql, params, what, /*binary=*/true);
  }
  return rows;
}

Result<std::vector<Event>> PostgresStore::EventsSince(std::uint64_t cursor, std::size_t limit) {
  std::lock_guard lock(read_mu_);
  const std::string sql =
      fmt::format("SELECT {} FROM events WHERE seq > $1 ORDER BY seq LIMIT $2", kEventColumns);
  Result<Rows> rows =
      Read(sql,
           Params()
               .Int(static_cast<std::int64_t>(std::min<std::uint64_t>(cursor, INT64_MAX)))
               .Int(static_cast<std::int64_t>(std::min<std::size_t>(limit, INT64_MAX))),
           "store: read events");
  if (!rows.ok()) return rows.status();
  std::vector<Event> out;
  out.reserve(static_cast<std::size_t>(rows->rows()));
  for (int r = 0; r < rows->rows(); ++r) {
    Result<Event> e = ReadEvent(*rows, r);
    if (!e.ok()) return e.status();
    out.push_back(std::move(e).value());
  }
  return out;
}

Result<std::optional<StoredJob>> PostgresStore::GetJob(JobId id) {
  std::lock_guard lock(read_mu_);
  Result<Rows> rows = Read(fmt::format("SELECT {} FROM jobs WHERE id = $1", kJobColumns),
                           Params().Int(static_cast<std::int64_t>(id)), "store: read a job");
  if (!rows.ok()) return rows.status();
  if (rows->rows() == 0) return std::optional<StoredJob>();
  std::optional<StoredJob> job(std::in_place);
  if (Status st = ReadJobColumns(RowOf{*rows, 0}, *job); !st.ok()) return st;
  if (Status st = DecodeJobRecords(rows->Text(0, 1), rows->Text(0, 4), *job); !st.ok()) return st;
  return job;
}

Result<std::vector<StoredJob>> PostgresStore::RecentFinished(std::size_t limit) {
  std::lock_guard lock(read_mu_);
  Result<Rows> rows =
      Read(fmt::format("SELECT {} FROM jobs WHERE NOT ({}) ORDER BY id DESC LIMIT $1", kJobColumns,
                       kActive),
           Params().Int(static_cast<std::int64_t>(std::min<std::size_t>(limit, INT64_MAX))),
           "store: read the recent finished jobs");
  if (!rows.ok()) return rows.status();
  std::vector<StoredJob> out(static_cast<std::size_t>(rows->rows()));
  for (int r = 0; r < rows->rows(); ++r) {
    StoredJob& job = out[static_cast<std::size_t>(r)];
    if (Status st = ReadJobColumns(RowOf{*rows, r}, job); !st.ok()) return st;
    if (Status st = DecodeJobRecords(rows->Text(r, 1), rows->Text(r, 4), job); !st.ok()) return st;
  }
  return out;
}

Result<Snapshot> PostgresStore::Load(const LoadOptions& options) {
  std::lock_guard lock(read_mu_);
  // One snapshot: every table as of the same commit.
  if (Status s = BeginSnapshot(); !s.ok()) return s;
  const EndSnapshot end{this};
  Conn& conn = *rconn_;

  Snapshot snap;
  if (options.include_jobs) {
    if (Status s = LoadJobs(conn, options, snap); !s.ok()) return s;
  }
  if (Status s = LoadRest(conn, snap); !s.ok()) return s;
  return snap;
}

Status PostgresStore::LoadJobs(Conn& conn, const LoadOptions& options, Snapshot& snap) {
  const std::string where = options.include_finished ? "" : fmt::format(" WHERE {}", kActive);
  if (!options.each_batch) {
    // Reserve first: moving a million records as the vector grows costs as much as reading them.
    Result<Rows> count =
        conn.Exec(fmt::format("SELECT count(*) FROM jobs{}", where), {}, "store: count jobs");
    if (!count.ok()) return count.status();
    snap.jobs.reserve(static_cast<std::size_t>(count->Int(0, 0)));
  }
  // The rows stream (COPY, binary): the server produces the next rows while this process reads
  // and decodes the last ones, with no round trip per batch.
  const std::string copy = fmt::format(
      "COPY (SELECT {} FROM jobs{} ORDER BY id) TO STDOUT (FORMAT binary)", kJobColumns, where);
  {
    Rows started(PQexec(conn.raw(), copy.c_str()));
    if (started.raw() == nullptr || PQresultStatus(started.raw()) != PGRES_COPY_OUT) {
      return conn.Error(started.raw(), "store: read jobs");
    }
  }
  bool copying = true, header = true;
  struct Abandon {  // a COPY not read to its end leaves the connection unusable: drop it
    PostgresStore* store;
    const bool& copying;
    ~Abandon() {
      if (copying) store->rconn_.reset();
    }
  } abandon{this, copying};
  auto fill = [&](JobBatch& b) {
    b.arena.reserve(kJobBatch * 256);
    CopyRow row;
    while (b.jobs.size() < kJobBatch) {
      char* data = nullptr;
      const int n = PQgetCopyData(conn.raw(), &data, 0);
      if (n < 0) {
        if (n == -2) {
          b.status = conn.Error(nullptr, "store: read jobs");
          return;
        }
        copying = false;
        Rows done(PQgetResult(conn.raw()));
        if (done.raw() == nullptr || PQresultStatus(done.raw()) != PGRES_COMMAND_OK) {
          b.status = conn.Error(done.raw(), "store: read jobs");
          return;
        }
        while (PGresult* extra = PQgetResult(conn.raw())) PQclear(extra);
        b.last = true;
        return;
      }
      bool trailer = false;
      Status st =
          ParseCopyTuple(std::string_view(data, static_cast<std::size_t>(n)), header, row, trailer);
      if (st.ok() && !trailer && row.count > 0) {
        if (row.count != 13) {
          st = Status::Internal(fmt::format("store: read jobs: {} columns, not 13", row.count));
        } else {
          st = ReadJobColumns(row, b.jobs.emplace_back());
          if (st.ok()) b.AddRecords(row.Text(1), row.Text(4));
        }
      }
      PQfreemem(data);
      if (!st.ok()) {
        b.status = std::move(st);
        return;
      }
    }
  };
  return ReadJobBatches(fill, options, snap.jobs);
}

Status PostgresStore::LoadRest(Conn& conn, Snapshot& snap) {
  Result<Rows> quotas =
      conn.Exec("SELECT queue, quota, time, actor FROM queue_quotas ORDER BY queue", Params(),
                "store: read queue quotas", true);
  if (!quotas.ok()) return quotas.status();
  for (int r = 0; r < quotas->rows(); ++r) {
    QueueQuotaOverride q;
    q.queue = std::string(quotas->Text(r, 0));
    const std::string field = fmt::format("queue_quotas.{}", q.queue);
    Result<std::map<std::string, QuotaSpec>> quota = DecodeQuota(quotas->Text(r, 1), field);
    if (!quota.ok()) return Status::Internal("store: " + quota.status().message());
    q.quota = std::move(quota).value();
    q.time = quotas->Int(r, 2);
    q.actor = std::string(quotas->Text(r, 3));
    snap.queue_quotas.push_back(std::move(q));
  }
  Result<Rows> usage = conn.Exec("SELECT queue, usage, time FROM queue_usage ORDER BY queue",
                                 Params(), "store: read the queues' usage", true);
  if (!usage.ok()) return usage.status();
  for (int r = 0; r < usage->rows(); ++r) {
    snap.queue_usage.push_back(
        {std::string(usage->Text(r, 0)), usage->Double(r, 1), usage->Int(r, 2)});
  }
  Result<Rows> nodes =
      conn.Exec("SELECT node, state, reason, time, actor FROM node_states ORDER BY node", Params(),
                "store: read node states", true);
  if (!nodes.ok()) return nodes.status();
  for (int r = 0; r < nodes->rows(); ++r) {
    NodeAdmin n;
    n.node = std::string(nodes->Text(r, 0));
    const std::string_view state = nodes->Text(r, 1);
    if (state == "schedulable") {
      n.state = NodeAdminState::kSchedulable;
    } else if (state == "cordoned") {
      n.state = NodeAdminState::kCordoned;
    } else if (state == "draining") {
      n.state = NodeAdminState::kDraining;
    } else {
      return Status::Internal(
          fmt::format("store: node_states.{}: unknown state '{}'", n.node, state));
    }
    n.reason = std::string(nodes->Text(r, 2));
    n.time = nodes->Int(r, 3);
    n.actor = std::string(nodes->Text(r, 4));
    snap.nodes.push_back(std::move(n));
  }
  Result<Rows> counters = conn.Exec("SELECT last_job_id, last_seq FROM counters WHERE id = 1",
                                    Params(), "store: read the counters", true);
  if (!counters.ok()) return counters.status();
  if (counters->rows() == 1) {
    snap.last_job_id = static_cast<JobId>(counters->Int(0, 0));
    snap.last_seq = static_cast<std::uint64_t>(counters->Int(0, 1));
  }
  return Status::Ok();
}

Result<JobChanges> PostgresStore::JobsChangedSince(std::uint64_t seq) {
  std::lock_guard lock(read_mu_);
  // One snapshot: the stream's position and the jobs as of it.
  if (Status s = BeginSnapshot(); !s.ok()) return s;
  const EndSnapshot end{this};
  JobChanges out;
  Result<Rows> counters = rconn_->Exec("SELECT last_seq FROM counters WHERE id = 1", Params(),
                                       "store: read the counters", true);
  if (!counters.ok()) return counters.status();
  out.last_seq = counters->rows() == 1 ? static_cast<std::uint64_t>(counters->Int(0, 0)) : seq;
  if (out.last_seq <= seq) return out;
  Result<Rows> rows = rconn_->Exec(
      fmt::format("SELECT {} FROM jobs WHERE id IN (SELECT job FROM events WHERE seq > $1 AND "
                  "seq <= $2 AND job <> 0) ORDER BY id",
                  kJobColumns),
      Params().Int(static_cast<std::int64_t>(seq)).Int(static_cast<std::int64_t>(out.last_seq)),
      "store: read the changed jobs", true);
  if (!rows.ok()) return rows.status();
  out.jobs.resize(static_cast<std::size_t>(rows->rows()));
  for (int r = 0; r < rows->rows(); ++r) {
    StoredJob& job = out.jobs[static_cast<std::size_t>(r)];
    if (Status st = ReadJobColumns(RowOf{*rows, r}, job); !st.ok()) return st;
    if (Status st = DecodeJobRecords(rows->Text(r, 1), rows->Text(r, 4), job); !st.ok()) return st;
  }
  return out;
}

}  // namespace

Result<std::unique_ptr<Store>> OpenPostgresStore(const PostgresOptions& options) {
  return PostgresStore::Open(options);
}

bool IsPostgresUrl(std::string_view store) {
  return store.starts_with("postgresql://") || store.starts_with("postgres://");
}

}  // namespace arbiter::store
