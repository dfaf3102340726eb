// A small RAII wrapper over libpq (the C API of PostgreSQL's client library), for the PostgreSQL
// store and the leader's lease. libpq directly rather than libpqxx: pipeline mode (many
// statements per round trip, which group commit needs) and binary parameters and results
// (records as bytea without hex escaping), which Debian's libpqxx 6.4 does not offer.
// docs/design/store.md ("PostgreSQL") explains the schema and how the store uses them.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "arbiter/status.h"

namespace arbiter::store {
class Severance;  // store/store.h
}

namespace arbiter::store::pg {

// Advisory lock keys (bigint) shared by every Arbiter server on a database.
inline constexpr std::int64_t kMigrateLockKey = 0x4172626974657201;  // held while migrating
inline constexpr std::int64_t kLeaderLockKey = 0x4172626974657202;   // held by the leader's session

// The result of one statement (owns a PGresult). Values are read by row and column; a text
// result's values are the server's text forms, a binary result's the types' binary forms
// (Exec's results are text; Params-based calls may ask for binary).
class Rows {
 public:
  Rows() = default;
  explicit Rows(PGresult* result) : result_(result) {}
  Rows(Rows&& other) noexcept : result_(other.result_) { other.result_ = nullptr; }
  Rows& operator=(Rows&& other) noexcept;
  Rows(const Rows&) = delete;
  Rows& operator=(const Rows&) = delete;
  ~Rows();

  int rows() const;
  int columns() const;
  bool IsNull(int row, int col) const;
  // The value's bytes: the text form ("" when NULL) in a text result, the binary form in a
  // binary one (a bytea's bytes, a text's UTF-8).
  std::string_view Text(int row, int col) const;
  // An integer column: parsed from the text form, or the binary int2/int4/int8 (0 when NULL).
  std::int64_t Int(int row, int col) const;
  // A double precision column (text or binary form; 0 when NULL).
  double Double(int row, int col) const;
  // A time in milliseconds stored as bigint, -1 when NULL (never).
  std::int64_t TimeOrNever(int row, int col) const { return IsNull(row, col) ? -1 : Int(row, col); }
  // The number of rows a command touched (INSERT, UPDATE, DELETE), 0 when not given.
  std::int64_t Affected() const;

  PGresult* raw() const { return result_; }

 private:
  PGresult* result_ = nullptr;
};

// Parameters of one statement ($1, $2, ...), each text, binary or NULL. Values given as views
// must outlive the call that sends them.
class Params {
 public:
  Params& Text(std::string_view v);
  Params& TextOrNull(std::string_view v) { return v.empty() ? Null() : Text(v); }
  Params& Bytes(std::string_view v);  // a bytea, sent binary
  Params& BytesOrNull(std::string_view v) { return v.empty() ? Null() : Bytes(v); }
  Params& Int(std::int64_t v);
  Params& Double(double v);
  Params& TimeOrNull(std::int64_t ms) { return ms < 0 ? Null() : Int(ms); }
  Params& Null();
  void Clear() { values_.clear(); }
  std::size_t size() const { return values_.size(); }

  // libpq's arrays, valid until the next change.
  struct Arrays {
    std::vector<const char*> values;
    std::vector<int> lengths;
    std::vector<int> formats;
  };
  void Fill(Arrays& out) const;

 private:
  struct Value {
    std::string owned;  // numbers' text
    std::string_view view;
    bool null = false;
    bool binary = false;
    bool uses_owned = false;
  };
  std::vector<Value> values_;
};

// One connection (owns a PGconn). Not thread-safe: one user at a time.
class Conn {
 public:
  // Connects; errors are kUnavailable naming `what` and libpq's message (never the password).
  // `application_name` is what pg_stat_activity shows for the session (empty: the URL's, else
  // "arbiter"). Unless the URL says otherwise: connect_timeout=10, and over TCP keep-alives
  // (idle 10 s, every 5 s, 3 tries) and tcp_user_timeout=30000, so that a database that stops
  // answering fails a call in about 30 s.
  // With a `severance`, the connection is registered with it: Severance::Sever() ends it at
  // once, and connecting fails once it is severed.
  static Result<std::unique_ptr<Conn>> Connect(const std::string& url, std::string_view what,
                                               std::string_view application_name = {},
                                               std::shared_ptr<Severance> severance = nullptr);
  ~Conn();
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // One statement, text parameters ($1, $2, ...; nullopt is NULL). Errors: kUnavailable when the
  // connection is broken (connection lost, server shut down, admin terminated the backend), else
  // kInternal, each naming `what` and the server's message with its SQLSTATE.
  Result<Rows> Exec(std::string_view sql,
                    std::initializer_list<std::optional<std::string_view>> params = {},
                    std::string_view what = {});
  // As Exec, with typed parameters; `binary` asks for binary results.
  Result<Rows> Exec(std::string_view sql, const Params& params, std::string_view what,
                    bool binary = false);
  // As Exec, but waits for the answer only until `deadline`: past it the connection is shut (it
  // is broken() from then on) and the error is kUnavailable, "no answer within N ms". For the
  // leader's lease, whose database path may hang without any TCP error (a proxy that stops
  // forwarding), where a blocking call would wait for TCP's own timeouts.
  Result<Rows> ExecBefore(std::chrono::steady_clock::time_point deadline, std::string_view sql,
                          std::initializer_list<std::optional<std::string_view>> params,
                          std::string_view what);
  // Several statements in one text (no parameters), e.g. a migration.
  Status ExecScript(std::string_view sql, std::string_view what);

  bool broken() const;  // PQstatus is CONNECTION_BAD
  PGconn* raw() { return conn_; }

  // The error of a result that is not a success (or of the connection when `result` is null):
  // kUnavailable when the connection is broken or the server is going away, else kInternal.
  Status Error(const PGresult* result, std::string_view what) const;

 private:
  explicit Conn(PGconn* conn) : conn_(conn) {}
  PGconn* conn_ = nullptr;
  std::shared_ptr<Severance> severance_;
  int registered_fd_ = -1;  // the socket registered with severance_
};

// Whether a SQLSTATE means the session is gone or going (class 08, admin or crash shutdown).
bool IsConnectionSqlState(std::string_view sqlstate);

// Creates or migrates every table to store::kSchemaVersion inside one transaction under
// pg_advisory_xact_lock(kMigrateLockKey): the store's tables and these two, used for leadership:
//   leader  (id int PRIMARY KEY CHECK (id = 1), epoch bigint NOT NULL, holder text NOT NULL,
//            address text NOT NULL, renewed_at timestamptz NOT NULL)  -- one row: (1, 0, '', '',
//            now())
//   secrets (name text PRIMARY KEY, value text NOT NULL)
// Refuses a database with a newer schema version, naming both versions.
Status Migrate(Conn& conn);

}  // namespace arbiter::store::pg
