#include "store/copy_store.h"

#include <fmt/format.h>
#include <libpq-fe.h>
#include <sqlite3.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "store/pg.h"
#include "store/store.h"

namespace arbiter::store {

namespace {

// How a column goes from SQLite to PostgreSQL's COPY text format.
enum class Column {
  kText,         // NULL stays NULL
  kTextNotNull,  // NULL becomes '' (PostgreSQL's column is NOT NULL DEFAULT '')
  kInt,          // NULL stays NULL
  kIntNotNull,   // NULL becomes 0
  kReal,
  kBytes,  // a binary record: bytea in hex
};

struct Table {
  const char* name;    // PostgreSQL's table
  const char* select;  // from SQLite, the columns in `columns`' order
  const char* copy_columns;
  std::vector<Column> columns;
};

const Table kTables[] = {
    {"jobs",
     "SELECT id, name, user, queue, priority_class, submit_time, idempotency_key, spec, state, "
     "allocation, start_time, first_start_time, last_checkpoint, stop_at, evictions, end_time, "
     "message, retries FROM jobs ORDER BY id",
     "id, name, user_name, queue, priority_class, submit_time, idempotency_key, spec, state, "
     "allocation, start_time, first_start_time, last_checkpoint, stop_at, evictions, end_time, "
     "message, retries",
     {Column::kIntNotNull, Column::kTextNotNull, Column::kTextNotNull, Column::kTextNotNull,
      Column::kTextNotNull, Column::kIntNotNull, Column::kText, Column::kBytes,
      Column::kTextNotNull, Column::kBytes, Column::kInt, Column::kInt, Column::kInt, Column::kInt,
      Column::kTextNotNull, Column::kInt, Column::kTextNotNull, Column::kIntNotNull}},
    {"events",
     "SELECT seq, time, kind, job, target, actor, message, priority_class, allocation, stop_at, "
     "state FROM events ORDER BY seq",
     "seq, time, kind, job, target, actor, message, priority_class, allocation, stop_at, state",
     {Column::kIntNotNull, Column::kIntNotNull, Column::kTextNotNull, Column::kIntNotNull,
      Column::kTextNotNull, Column::kTextNotNull, Column::kTextNotNull, Column::kTextNotNull,
      Column::kText, Column::kInt, Column::kText}},
    {"queue_quotas",
     "SELECT queue, quota, time, actor FROM queue_quotas ORDER BY queue",
     "queue, quota, time, actor",
     {Column::kTextNotNull, Column::kTextNotNull, Column::kIntNotNull, Column::kTextNotNull}},
    {"node_states",
     "SELECT node, state, reason, time, actor FROM node_states ORDER BY node",
     "node, state, reason, time, actor",
     {Column::kTextNotNull, Column::kTextNotNull, Column::kTextNotNull, Column::kIntNotNull,
      Column::kTextNotNull}},
    {"queue_usage",
     "SELECT queue, usage, time FROM queue_usage ORDER BY queue",
     "queue, usage, time",
     {Column::kTextNotNull, Column::kReal, Column::kIntNotNull}},
};

// COPY's text format: `\N` for NULL, and backslash, tab, newline and carriage return escaped.
void AppendEscaped(std::string& out, std::string_view v) {
  for (char c : v) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        out += c;
    }
  }
}

void AppendField(std::string& out, sqlite3_stmt* s, int i, Column kind) {
  const bool null = sqlite3_column_type(s, i) == SQLITE_NULL;
  switch (kind) {
    case Column::kText:
    case Column::kTextNotNull:
      if (null) {
        out += kind == Column::kText ? "\\N" : "";
        return;
      }
      AppendEscaped(out, std::string_view(reinterpret_cast<const char*>(sqlite3_column_text(s, i)),
                                          static_cast<std::size_t>(sqlite3_column_bytes(s, i))));
      return;
    case Column::kInt:
    case Column::kIntNotNull:
      if (null) {
        out += kind == Column::kInt ? "\\N" : "0";
        return;
      }
      out += std::to_string(sqlite3_column_int64(s, i));
      return;
    case Column::kReal:
      out += null ? std::string("0") : fmt::format("{}", sqlite3_column_double(s, i));
      return;
    case Column::kBytes: {
      if (null) {
        out += "\\N";
        return;
      }
      static constexpr char kHex[] = "0123456789abcdef";
      const auto* bytes = static_cast<const unsigned char*>(sqlite3_column_blob(s, i));
      const int n = sqlite3_column_bytes(s, i);
      out += "\\\\x";  // bytea's hex form, its backslash escaped for COPY
      for (int k = 0; k < n; ++k) {
        out += kHex[bytes[k] >> 4];
        out += kHex[bytes[k] & 15];
      }
      return;
    }
  }
}

struct SqliteCloser {
  void operator()(sqlite3* db) const { sqlite3_close(db); }
};
struct StmtCloser {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};

// Copies one table; returns its rows.
Result<std::uint64_t> CopyTable(sqlite3* from, pg::Conn& to, const Table& t) {
  sqlite3_stmt* raw = nullptr;
  if (sqlite3_prepare_v2(from, t.select, -1, &raw, nullptr) != SQLITE_OK) {
    return Status::Internal(fmt::format("read {} from SQLite: {}", t.name, sqlite3_errmsg(from)));
  }
  std::unique_ptr<sqlite3_stmt, StmtCloser> s(raw);
  PGconn* conn = to.raw();
  {
    PGresult* r =
        PQexec(conn, fmt::format("COPY {} ({}) FROM STDIN", t.name, t.copy_columns).c_str());
    const bool ok = PQresultStatus(r) == PGRES_COPY_IN;
    std::string error = PQerrorMessage(conn);
    PQclear(r);
    if (!ok) return Status::Unavailable(fmt::format("copy {} into PostgreSQL: {}", t.name, error));
  }
  std::string buffer;
  std::uint64_t rows = 0;
  auto flush = [&]() -> bool {
    const bool ok = PQputCopyData(conn, buffer.data(), static_cast<int>(buffer.size())) == 1;
    buffer.clear();
    return ok;
  };
  int rc;
  bool sent = true;
  while ((rc = sqlite3_step(s.get())) == SQLITE_ROW) {
    for (std::size_t i = 0; i < t.columns.size(); ++i) {
      if (i > 0) buffer += '\t';
      AppendField(buffer, s.get(), static_cast<int>(i), t.columns[i]);
    }
    buffer += '\n';
    ++rows;
    if (buffer.size() >= (1 << 20) && !(sent = flush())) break;
  }
  if (sent && !buffer.empty()) sent = flush();
  if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
    PQputCopyEnd(conn, "the SQLite read failed");
    while (PGresult* r = PQgetResult(conn)) PQclear(r);
    return Status::Internal(fmt::format("read {} from SQLite: {}", t.name, sqlite3_errmsg(from)));
  }
  std::string error;
  if (!sent || PQputCopyEnd(conn, nullptr) != 1) error = PQerrorMessage(conn);
  while (PGresult* r = PQgetResult(conn)) {
    if (PQresultStatus(r) != PGRES_COMMAND_OK && error.empty()) {
      error = PQresultErrorMessage(r);
    }
    PQclear(r);
  }
  if (!error.empty()) {
    return Status::Unavailable(fmt::format("copy {} into PostgreSQL: {}", t.name, error));
  }
  return rows;
}

}  // namespace

Result<CopyCounts> CopySqliteToPostgres(const std::string& dir, const std::string& url,
                                        const std::function<void(std::string_view)>& progress) {
  // Opening the store migrates it to this build's schema and takes the directory's lock (a
  // running server holds it), kept until the copy is done.
  Result<std::unique_ptr<Store>> held = OpenSqliteStore({.dir = dir});
  if (!held.ok()) return held.status();
  const std::string path = (std::filesystem::path(dir) / "arbiter.db").string();
  sqlite3* raw = nullptr;
  if (sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    std::unique_ptr<sqlite3, SqliteCloser> closer(raw);
    return Status::FromCode(StatusCode::kUnavailable,
                            fmt::format("{}: cannot open: {}", path, sqlite3_errmsg(raw)),
                            "--from");
  }
  std::unique_ptr<sqlite3, SqliteCloser> from(raw);

  Result<std::unique_ptr<pg::Conn>> conn = pg::Conn::Connect(url, "--to", "arbiter-migrate-store");
  if (!conn.ok()) return conn.status();
  pg::Conn& to = **conn;
  if (Status st = pg::Migrate(to); !st.ok()) return st;
  // No server may lead on the database meanwhile: take the leader's lock for the session.
  Result<pg::Rows> lock = to.Exec("SELECT pg_try_advisory_lock($1)",
                                  {std::to_string(pg::kLeaderLockKey)}, "take the leader's lock");
  if (!lock.ok()) return lock.status();
  if (lock->Text(0, 0) != "t") {
    return Status::FromCode(StatusCode::kConflict,
                            "a server leads on this database: stop every server first", "--to");
  }
  // One read transaction on SQLite (one consistent commit), one write transaction on PostgreSQL.
  if (sqlite3_exec(from.get(), "BEGIN", nullptr, nullptr, nullptr) != SQLITE_OK) {
    return Status::Internal(fmt::format("{}: begin a read: {}", path, sqlite3_errmsg(from.get())));
  }
  if (Result<pg::Rows> r = to.Exec("BEGIN", {}, "begin"); !r.ok()) return r.status();
  Result<pg::Rows> existing = to.Exec(
      "SELECT (SELECT count(*) FROM jobs) + (SELECT count(*) FROM events)", {}, "count rows");
  if (!existing.ok()) return existing.status();
  if (existing->Int(0, 0) != 0) {
    to.Exec("ROLLBACK", {}, "rollback").ok();
    return Status::FromCode(StatusCode::kConflict,
                            "the PostgreSQL store already holds jobs or events: migrate into an "
                            "empty database",
                            "--to");
  }
  CopyCounts counts;
  std::uint64_t* count_of[] = {&counts.jobs, &counts.events, &counts.queue_quotas,
                               &counts.node_states, &counts.queue_usage};
  std::size_t k = 0;
  for (const Table& t : kTables) {
    if (progress) progress(t.name);
    Result<std::uint64_t> rows = CopyTable(from.get(), to, t);
    if (!rows.ok()) {
      to.Exec("ROLLBACK", {}, "rollback").ok();
      return rows.status();
    }
    *count_of[k++] = *rows;
  }
  // The counters the store assigns from: the last job id and event seq SQLite ever gave.
  std::int64_t last_job = 0, last_seq = 0;
  {
    sqlite3_stmt* s = nullptr;
    sqlite3_prepare_v2(from.get(), "SELECT name, seq FROM sqlite_sequence", -1, &s, nullptr);
    std::unique_ptr<sqlite3_stmt, StmtCloser> owned(s);
    while (s && sqlite3_step(s) == SQLITE_ROW) {
      const std::string name = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
      if (name == "jobs") last_job = sqlite3_column_int64(s, 1);
      if (name == "events") last_seq = sqlite3_column_int64(s, 1);
    }
  }
  Result<pg::Rows> counters =
      to.Exec("UPDATE counters SET last_job_id = $1, last_seq = $2 WHERE id = 1",
              {std::to_string(last_job), std::to_string(last_seq)}, "set the counters");
  if (!counters.ok()) return counters.status();
  // The node key, so that every node's credential stays valid.
  const std::string key_path = (std::filesystem::path(dir) / "node-credentials.key").string();
  if (std::ifstream in(key_path); in) {
    std::stringstream text;
    text << in.rdbuf();
    std::string key = text.str();
    while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
    Result<pg::Rows> secret = to.Exec(
        "INSERT INTO secrets (name, value) VALUES ('node-credentials.key', $1) "
        "ON CONFLICT (name) DO UPDATE SET value = excluded.value",
        {key}, "copy the node key");
    if (!secret.ok()) return secret.status();
  }
  if (Result<pg::Rows> r = to.Exec("COMMIT", {}, "commit"); !r.ok()) return r.status();
  sqlite3_exec(from.get(), "END", nullptr, nullptr, nullptr);
  return counts;
}

}  // namespace arbiter::store
