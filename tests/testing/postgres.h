// A private PostgreSQL 15 server for tests and benchmarks: `initdb` into a fresh temporary
// directory, `pg_ctl start` with its unix socket in that directory and no TCP listener
// (listen_addresses=''), fsync on; stopped (`pg_ctl stop -m immediate`) and removed at the end.
// As root (CI), the server runs as the `postgres` system user (initdb refuses root), through
// `runuser -u postgres --`, the directory given to it. A watchdog process stops the server and
// removes the directory when the process that started it ends without doing so (a crash).
//
// One server per process (Shared()), a fresh database per test (NewDatabase()): starting a
// server takes a second or two, a database a few tens of milliseconds.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace arbiter::testing {

class PostgresInstance {
 public:
  // Starts a server; on failure returns null and sets `error` (e.g. the binaries are missing:
  // "PostgreSQL 15 is not installed (no /usr/lib/postgresql/15/bin/initdb): run
  // scripts/install-deps.sh"). ARBITER_PG_BIN overrides the binaries' folder.
  static std::unique_ptr<PostgresInstance> Start(std::string* error = nullptr);
  // The process's server, started on first use and stopped at exit; null (with `error` set)
  // when it cannot start.
  static PostgresInstance* Shared(std::string* error = nullptr);

  ~PostgresInstance();  // stops the server (immediate) and removes its directory
  PostgresInstance(const PostgresInstance&) = delete;
  PostgresInstance& operator=(const PostgresInstance&) = delete;

  // A libpq URL (postgresql://...) for database "arbiter" (created by Start) / for `db`.
  std::string url() const { return url_for("arbiter"); }
  std::string url_for(std::string_view db) const;
  // Creates an empty database; aborts the process (with the server's message) on failure.
  void CreateDatabase(std::string_view name);
  // A new empty database with a unique name; returns its URL.
  std::string NewDatabase();
  // Ends the sessions (pg_terminate_backend, waiting up to 5 s for each to go) whose
  // application_name is `application_name`, or every client session but the caller's when it is
  // empty or "*". Returns how many were ended.
  int Terminate(std::string_view application_name);
  // Runs one SQL statement on database `db` as the superuser; aborts the process on failure.
  // Returns the first column of the first row as text ("" when none).
  std::string Sql(std::string_view db, std::string_view sql);

  const std::string& socket_dir() const { return dir_; }
  int port() const { return port_; }

 private:
  PostgresInstance() = default;
  bool Run(const std::string& bin, const std::vector<std::string>& args, std::string* error);
  void StartWatchdog();

  std::string bin_dir_;
  std::string dir_;   // the temporary directory: the socket, the log
  std::string data_;  // dir_ + "/data"
  int port_ = 5432;   // names the socket file only (no TCP)
  bool as_postgres_ = false;
  bool started_ = false;
  int databases_ = 0;
  int watchdog_fd_ = -1;
};

}  // namespace arbiter::testing
