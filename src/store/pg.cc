#include "store/pg.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <utility>

#include "store/store.h"

namespace arbiter::store::pg {
namespace {

// The schema of a new database, at store::kSchemaVersion (2). PostgreSQL databases start at
// version 2 (version 1 was SQLite's JSON records only); a later version adds a step to
// kPgMigrations rather than editing this.
constexpr const char* kCreateSchema = R"sql(
CREATE TABLE schema_version (version integer NOT NULL);
-- The ids the store assigned last (one row): the writer assigns job ids and event seqs from it
-- inside its transaction, so they are gapless, never reused, and known before the statements
-- that insert them are sent (a whole batch goes in one round trip).
CREATE TABLE counters (
  id integer PRIMARY KEY CHECK (id = 1),
  last_job_id bigint NOT NULL,
  last_seq bigint NOT NULL
);
INSERT INTO counters VALUES (1, 0, 0);
CREATE TABLE jobs (
  id bigint PRIMARY KEY,
  name text NOT NULL,
  user_name text NOT NULL,
  queue text NOT NULL,
  priority_class text NOT NULL,
  submit_time bigint NOT NULL,
  idempotency_key text,
  spec bytea NOT NULL,
  state text NOT NULL,
  allocation bytea,
  start_time bigint,
  first_start_time bigint,
  last_checkpoint bigint,
  stop_at bigint,
  evictions text NOT NULL DEFAULT '[]',
  end_time bigint,
  message text NOT NULL DEFAULT '',
  retries integer NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX jobs_idempotency ON jobs (user_name, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobs_active ON jobs (id) WHERE state IN ('pending', 'held', 'running');
CREATE TABLE events (
  seq bigint PRIMARY KEY,
  time bigint NOT NULL,
  kind text NOT NULL,
  job bigint NOT NULL DEFAULT 0,
  target text NOT NULL DEFAULT '',
  actor text NOT NULL DEFAULT '',
  message text NOT NULL DEFAULT '',
  priority_class text NOT NULL DEFAULT '',
  allocation text,
  stop_at bigint,
  state text
);
CREATE TABLE queue_quotas (
  queue text PRIMARY KEY,
  quota text NOT NULL,
  time bigint NOT NULL,
  actor text NOT NULL
);
CREATE TABLE node_states (
  node text PRIMARY KEY,
  state text NOT NULL,
  reason text NOT NULL,
  time bigint NOT NULL,
  actor text NOT NULL
);
CREATE TABLE queue_usage (
  queue text PRIMARY KEY,
  usage double precision NOT NULL,
  time bigint NOT NULL
);
CREATE TABLE leader (
  id integer PRIMARY KEY CHECK (id = 1),
  epoch bigint NOT NULL,
  holder text NOT NULL,
  address text NOT NULL,
  renewed_at timestamptz NOT NULL
);
INSERT INTO leader VALUES (1, 0, '', '', now());
CREATE TABLE secrets (
  name text PRIMARY KEY,
  value text NOT NULL
);
)sql";

// Step k takes a PostgreSQL database from version kPgMigrations[k].from to from + 1. Never edit
// a released step; add one.
struct Step {
  int from;
  const char* sql;
};
constexpr Step kPgMigrations[] = {{-1, ""}};  // none yet: every database was created at 2

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.remove_suffix(1);
  return s;
}

}  // namespace

// ---- Rows ----

Rows& Rows::operator=(Rows&& other) noexcept {
  if (this != &other) {
    PQclear(result_);
    result_ = other.result_;
    other.result_ = nullptr;
  }
  return *this;
}

Rows::~Rows() { PQclear(result_); }

int Rows::rows() const { return result_ == nullptr ? 0 : PQntuples(result_); }
int Rows::columns() const { return result_ == nullptr ? 0 : PQnfields(result_); }

bool Rows::IsNull(int row, int col) const { return PQgetisnull(result_, row, col) != 0; }

std::string_view Rows::Text(int row, int col) const {
  if (IsNull(row, col)) return {};
  return {PQgetvalue(result_, row, col), static_cast<std::size_t>(PQgetlength(result_, row, col))};
}

std::int64_t Rows::Int(int row, int col) const {
  if (IsNull(row, col)) return 0;
  const std::string_view v = Text(row, col);
  if (PQfformat(result_, col) == 1) {
    std::uint64_t u = 0;
    for (const char c : v) u = (u << 8) | static_cast<unsigned char>(c);
    switch (v.size()) {
      case 2:
        return static_cast<std::int16_t>(u);
      case 4:
        return static_cast<std::int32_t>(u);
      default:
        return static_cast<std::int64_t>(u);
    }
  }
  std::int64_t out = 0;
  std::from_chars(v.data(), v.data() + v.size(), out);
  return out;
}

double Rows::Double(int row, int col) const {
  if (IsNull(row, col)) return 0;
  const std::string_view v = Text(row, col);
  if (PQfformat(result_, col) == 1 && v.size() == 8) {
    std::uint64_t u = 0;
    for (const char c : v) u = (u << 8) | static_cast<unsigned char>(c);
    double d;
    std::memcpy(&d, &u, sizeof d);
    return d;
  }
  double out = 0;
  std::from_chars(v.data(), v.data() + v.size(), out);
  return out;
}

std::int64_t Rows::Affected() const {
  const char* n = result_ == nullptr ? "" : PQcmdTuples(result_);
  std::int64_t out = 0;
  std::from_chars(n, n + std::strlen(n), out);
  return out;
}

// ---- Params ----

Params& Params::Text(std::string_view v) {
  values_.push_back({{}, v, false, false, false});
  return *this;
}

Params& Params::Bytes(std::string_view v) {
  values_.push_back({{}, v, false, true, false});
  return *this;
}

Params& Params::Int(std::int64_t v) {
  Value& value = values_.emplace_back();
  value.owned = fmt::format("{}", v);
  value.uses_owned = true;
  return *this;
}

Params& Params::Double(double v) {
  Value& value = values_.emplace_back();
  value.owned = fmt::format("{}", v);  // the shortest text that reads back the same double
  value.uses_owned = true;
  return *this;
}

Params& Params::Null() {
  values_.push_back({{}, {}, true, false, false});
  return *this;
}

void Params::Fill(Arrays& out) const {
  out.values.clear();
  out.lengths.clear();
  out.formats.clear();
  for (const Value& v : values_) {
    const std::string_view bytes = v.uses_owned ? std::string_view(v.owned) : v.view;
    // An empty value must not be a null pointer (that is NULL): point at a constant.
    out.values.push_back(v.null ? nullptr : bytes.empty() ? "" : bytes.data());
    out.lengths.push_back(static_cast<int>(bytes.size()));
    out.formats.push_back(v.binary ? 1 : 0);
  }
}

// ---- Severance ----

}  // namespace arbiter::store::pg

namespace arbiter::store {

void Severance::Sever() {
  std::lock_guard lock(mu_);
  severed_ = true;
  for (const int fd : fds_) ::shutdown(fd, SHUT_RDWR);
}

bool Severance::severed() const {
  std::lock_guard lock(mu_);
  return severed_;
}

bool Severance::Add(int fd) {
  std::lock_guard lock(mu_);
  if (severed_) {
    ::shutdown(fd, SHUT_RDWR);
    return false;
  }
  fds_.insert(fd);
  return true;
}

void Severance::Remove(int fd) {
  std::lock_guard lock(mu_);
  fds_.erase(fd);
}

}  // namespace arbiter::store

namespace arbiter::store::pg {

// ---- Conn ----

bool IsConnectionSqlState(std::string_view sqlstate) {
  return sqlstate.substr(0, 2) == "08" || sqlstate == "57P01" || sqlstate == "57P02" ||
         sqlstate == "57P03";
}

Result<std::unique_ptr<Conn>> Conn::Connect(const std::string& url, std::string_view what,
                                            std::string_view application_name,
                                            std::shared_ptr<Severance> severance) {
  constexpr std::string_view kSevered = "this server no longer leads";
  if (severance && severance->severed()) {
    return Status::Unavailable(fmt::format("{}: {}", what, kSevered));
  }
  const std::string app(application_name);
  // Defaults first (the URL's own words override them: libpq lets an expanded dbname override
  // what comes before it), then the URL, then what overrides it; the fallback name applies only
  // when the URL names none. Over TCP, a database that stops answering (a network that drops
  // everything) fails a call within about 30 s rather than never; unix sockets ignore these.
  std::vector<const char*> keys = {
      "connect_timeout",  "keepalives",       "keepalives_idle", "keepalives_interval",
      "keepalives_count", "tcp_user_timeout", "dbname",          "fallback_application_name"};
  std::vector<const char*> values = {"10", "1", "10", "5", "3", "30000", url.c_str(), "arbiter"};
  if (!app.empty()) {
    keys.push_back("application_name");
    values.push_back(app.c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  PGconn* conn = PQconnectdbParams(keys.data(), values.data(), /*expand_dbname=*/1);
  if (conn == nullptr) {
    return Status::Unavailable(fmt::format("{}: cannot connect: out of memory", what));
  }
  if (PQstatus(conn) != CONNECTION_OK) {
    Status s = Status::Unavailable(
        fmt::format("{}: cannot connect: {}", what, Trim(PQerrorMessage(conn))));
    PQfinish(conn);
    return s;
  }
  std::unique_ptr<Conn> out(new Conn(conn));
  if (severance) {
    if (!severance->Add(PQsocket(conn))) {
      return Status::Unavailable(fmt::format("{}: {}", what, kSevered));
    }
    out->registered_fd_ = PQsocket(conn);
    out->severance_ = std::move(severance);
  }
  return out;
}

Conn::~Conn() {
  // Out of the severance before the descriptor is closed (and perhaps reused).
  if (severance_) severance_->Remove(registered_fd_);
  PQfinish(conn_);
}

bool Conn::broken() const { return PQstatus(conn_) == CONNECTION_BAD; }

Status Conn::Error(const PGresult* result, std::string_view what) const {
  const std::string_view label = what.empty() ? std::string_view("postgres") : what;
  const char* state = result != nullptr ? PQresultErrorField(result, PG_DIAG_SQLSTATE) : nullptr;
  // The server's one-line message (its position and hints are left out), else libpq's.
  const char* primary =
      result != nullptr ? PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY) : nullptr;
  std::string_view message = Trim(primary != nullptr  ? primary
                                  : result != nullptr ? PQresultErrorMessage(result)
                                                      : PQerrorMessage(conn_));
  if (message.empty()) message = Trim(PQerrorMessage(conn_));
  if (message.starts_with("ERROR:  ")) message.remove_prefix(8);
  if (message.starts_with("FATAL:  ")) message.remove_prefix(8);
  if (message.empty()) message = "no answer from the server";
  const bool gone = broken() || (state != nullptr && IsConnectionSqlState(state));
  // libpq's own messages run over several lines ("server closed the connection unexpectedly\n\t
  // This probably means..."): one line, for logs and answers.
  std::string one_line;
  for (const char c : message) {
    if (c == '\n' || c == '\t' || c == '\r') {
      if (!one_line.empty() && one_line.back() != ' ') one_line += ' ';
    } else if (c != ' ' || one_line.empty() || one_line.back() != ' ') {
      one_line += c;
    }
  }
  std::string text = state != nullptr ? fmt::format("{}: {} (SQLSTATE {})", label, one_line, state)
                                      : fmt::format("{}: {}", label, one_line);
  if (gone) return Status::Unavailable(std::move(text));
  return Status::Internal(std::move(text));
}

namespace {

// Text parameters (nullopt: NULL).
Params TextParams(std::initializer_list<std::optional<std::string_view>> params) {
  Params p;
  for (const std::optional<std::string_view>& v : params) {
    if (v) {
      p.Text(*v);
    } else {
      p.Null();
    }
  }
  return p;
}

}  // namespace

Result<Rows> Conn::Exec(std::string_view sql,
                        std::initializer_list<std::optional<std::string_view>> params,
                        std::string_view what) {
  return Exec(sql, TextParams(params), what);
}

Result<Rows> Conn::Exec(std::string_view sql, const Params& params, std::string_view what,
                        bool binary) {
  const std::string text(sql);
  Params::Arrays a;
  params.Fill(a);
  Rows rows(PQexecParams(conn_, text.c_str(), static_cast<int>(params.size()), nullptr,
                         a.values.data(), a.lengths.data(), a.formats.data(), binary ? 1 : 0));
  const ExecStatusType st = rows.raw() == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(rows.raw());
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return Error(rows.raw(), what);
  return rows;
}

Result<Rows> Conn::ExecBefore(std::chrono::steady_clock::time_point deadline, std::string_view sql,
                              std::initializer_list<std::optional<std::string_view>> params,
                              std::string_view what) {
  using Clock = std::chrono::steady_clock;
  const Params p = TextParams(params);
  const std::string text(sql);
  Params::Arrays a;
  p.Fill(a);
  const Clock::time_point start = Clock::now();
  if (PQsendQueryParams(conn_, text.c_str(), static_cast<int>(p.size()), nullptr, a.values.data(),
                        a.lengths.data(), a.formats.data(), 0) != 1) {
    return Error(nullptr, what);
  }
  // Waits until the socket is ready for `events`, or the deadline; false past the deadline.
  auto wait = [&](short events) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd fd{PQsocket(conn_), events, 0};
    const int n = ::poll(&fd, 1, static_cast<int>(std::min<long long>(left.count(), 1 << 30)));
    return n != 0;  // ready, or an error that the next libpq call reports
  };
  auto timed_out = [&] {
    // The answer may still come, out of order with anything sent later: the connection is shut.
    ::shutdown(PQsocket(conn_), SHUT_RDWR);
    PQconsumeInput(conn_);
    const long long waited =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    return Status::Unavailable(fmt::format("{}: no answer from the database within {} ms",
                                           what.empty() ? std::string_view("postgres") : what,
                                           waited));
  };
  for (;;) {  // send
    const int flushed = PQflush(conn_);
    if (flushed == 0) break;
    if (flushed < 0) return Error(nullptr, what);
    if (!wait(POLLOUT | POLLIN)) return timed_out();
    if (PQconsumeInput(conn_) != 1) return Error(nullptr, what);
  }
  Rows last;
  for (;;) {  // every result up to the null that ends them
    while (PQisBusy(conn_) != 0) {
      if (!wait(POLLIN)) return timed_out();
      if (PQconsumeInput(conn_) != 1) return Error(nullptr, what);
    }
    PGresult* r = PQgetResult(conn_);
    if (r == nullptr) break;
    last = Rows(r);
  }
  const ExecStatusType st = last.raw() == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(last.raw());
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return Error(last.raw(), what);
  return last;
}

Status Conn::ExecScript(std::string_view sql, std::string_view what) {
  const std::string text(sql);
  // PQexec runs several statements; their last result is the one returned (or the first error).
  Rows rows(PQexec(conn_, text.c_str()));
  const ExecStatusType st = rows.raw() == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(rows.raw());
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) return Error(rows.raw(), what);
  return Status::Ok();
}

// ---- Migrate ----

Status Migrate(Conn& conn) {
  constexpr std::string_view kWhat = "store: migrate the PostgreSQL schema";
  if (Status s = conn.ExecScript("BEGIN", kWhat); !s.ok()) return s;
  auto fail = [&](Status s) {
    if (!conn.broken()) conn.ExecScript("ROLLBACK", kWhat).ok();
    return s;
  };
  // Servers that start together wait here for the first to finish, then find it done.
  Result<Rows> locked = conn.Exec(fmt::format("SELECT pg_advisory_xact_lock({})", kMigrateLockKey),
                                  {}, "store: take the migration lock");
  if (!locked.ok()) return fail(locked.status());
  Result<Rows> tables = conn.Exec(
      "SELECT count(*), count(*) FILTER (WHERE c.relname = 'schema_version') FROM pg_class c "
      "WHERE c.relkind IN ('r', 'p') AND c.relnamespace = current_schema()::regnamespace",
      {}, "store: read the schema");
  if (!tables.ok()) return fail(tables.status());
  const std::int64_t count = tables->Int(0, 0);
  const bool has_version = tables->Int(0, 1) > 0;
  const std::string db = PQdb(conn.raw()) != nullptr ? PQdb(conn.raw()) : "";
  if (count > 0 && !has_version) {
    return fail(Status::InvalidArgument(
        fmt::format("store: PostgreSQL database {} is not an Arbiter store (it has tables but no "
                    "schema_version)",
                    db)));
  }
  int version = 0;
  if (has_version) {
    Result<Rows> v =
        conn.Exec("SELECT max(version) FROM schema_version", {}, "store: read the schema version");
    if (!v.ok()) return fail(v.status());
    if (v->IsNull(0, 0)) {
      return fail(Status::Internal(
          fmt::format("store: PostgreSQL database {}: schema_version is empty", db)));
    }
    version = static_cast<int>(v->Int(0, 0));
  }
  if (version > kSchemaVersion) {
    return fail(Status::Conflict(fmt::format(
        "store: PostgreSQL database {} has schema version {}, newer than this build's {}: it was "
        "written by a newer Arbiter; run that version (or a newer one), or restore a backup",
        db, version, kSchemaVersion)));
  }
  if (version == kSchemaVersion) return conn.ExecScript("COMMIT", "store: end the migration");
  if (version == 0) {
    if (Status s = conn.ExecScript(kCreateSchema, "store: create the PostgreSQL schema"); !s.ok()) {
      return fail(s);
    }
  } else {
    for (int v = version; v < kSchemaVersion; ++v) {
      const Step* step = nullptr;
      for (const Step& candidate : kPgMigrations) {
        if (candidate.from == v) step = &candidate;
      }
      if (step == nullptr) {
        return fail(Status::Internal(fmt::format(
            "store: PostgreSQL database {}: no migration from schema version {}", db, v)));
      }
      if (Status s =
              conn.ExecScript(step->sql, fmt::format("store: migrate {} from version {}", db, v));
          !s.ok()) {
        return fail(s);
      }
    }
  }
  const std::string set =
      fmt::format("DELETE FROM schema_version; INSERT INTO schema_version (version) VALUES ({})",
                  kSchemaVersion);
  if (Status s = conn.ExecScript(set, "store: record the schema version"); !s.ok()) {
    return fail(s);
  }
  return conn.ExecScript("COMMIT", "store: commit the migration");
}

}  // namespace arbiter::store::pg
