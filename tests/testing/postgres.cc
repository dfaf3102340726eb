#include "testing/postgres.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "store/pg.h"

namespace arbiter::testing {
namespace {

namespace fs = std::filesystem;

std::string Tail(const std::string& path, std::size_t bytes = 2000) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string all = ss.str();
  return all.size() > bytes ? all.substr(all.size() - bytes) : all;
}

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "postgres test server: %s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace

bool PostgresInstance::Run(const std::string& bin, const std::vector<std::string>& args,
                           std::string* error) {
  std::vector<std::string> argv;
  if (as_postgres_) argv = {"/usr/sbin/runuser", "-u", "postgres", "--"};
  argv.push_back(bin_dir_ + "/" + bin);
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (std::string& a : argv) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  const std::string log = dir_ + "/commands.log";
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (error != nullptr) *error = "cannot open " + log;
    return false;
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::execv(cargv[0], cargv.data());
    std::fprintf(stderr, "cannot run %s\n", cargv[0]);
    ::_exit(127);
  }
  ::close(fd);
  if (pid < 0) {
    if (error != nullptr) *error = "fork failed";
    return false;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return true;
  if (error != nullptr) {
    *error = bin + " failed:\n" + Tail(log) + "\nserver log:\n" + Tail(dir_ + "/server.log");
  }
  return false;
}

std::unique_ptr<PostgresInstance> PostgresInstance::Start(std::string* error) {
  std::unique_ptr<PostgresInstance> pg(new PostgresInstance());
  const char* bin = std::getenv("ARBITER_PG_BIN");
  pg->bin_dir_ = bin != nullptr && *bin != '\0' ? bin : "/usr/lib/postgresql/15/bin";
  for (const char* tool : {"initdb", "pg_ctl"}) {
    if (::access((pg->bin_dir_ + "/" + tool).c_str(), X_OK) != 0) {
      if (error != nullptr) {
        *error = "PostgreSQL 15 is not installed (no " + pg->bin_dir_ + "/" + tool +
                 "): run scripts/install-deps.sh";
      }
      return nullptr;
    }
  }
  std::string pattern = (fs::temp_directory_path() / "arbiter-pg-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    if (error != nullptr) *error = "cannot create a temporary directory";
    return nullptr;
  }
  pg->dir_ = pattern;
  pg->data_ = pg->dir_ + "/data";
  if (::geteuid() == 0) {
    // initdb refuses root: the server runs as Debian's postgres user, which owns the directory.
    const passwd* user = ::getpwnam("postgres");
    if (user == nullptr) {
      if (error != nullptr) {
        *error =
            "running as root, and there is no postgres user to run PostgreSQL as (Debian's "
            "postgresql package creates it): run scripts/install-deps.sh";
      }
      return nullptr;
    }
    if (::chown(pg->dir_.c_str(), user->pw_uid, user->pw_gid) != 0) {
      if (error != nullptr) *error = "cannot give " + pg->dir_ + " to the postgres user";
      return nullptr;
    }
    pg->as_postgres_ = true;
  }
  if (!pg->Run("initdb",
               {"-D", pg->data_, "-U", "arbiter", "--auth=trust", "-E", "UTF8", "--locale=C",
                "--no-sync", "--no-instructions"},
               error)) {
    return nullptr;
  }
  const std::string options = "-c listen_addresses='' -c unix_socket_directories='" + pg->dir_ +
                              "' -c port=" + std::to_string(pg->port_) +
                              " -c fsync=on -c max_connections=200";
  if (!pg->Run("pg_ctl",
               {"start", "-w", "-t", "60", "-D", pg->data_, "-l", pg->dir_ + "/server.log", "-o",
                options},
               error)) {
    return nullptr;
  }
  pg->started_ = true;
  pg->StartWatchdog();
  pg->CreateDatabase("arbiter");
  return pg;
}

void PostgresInstance::StartWatchdog() {
  // A process that outlives this one only to stop the server and remove its directory once this
  // process is gone, however it ended (a crash, an abort, exit without destructors): it waits
  // for the end of a pipe whose writing end only this process holds.
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return;
  std::string stop = bin_dir_ + "/pg_ctl stop -m immediate -D '" + data_ + "'";
  if (as_postgres_) stop = "/usr/sbin/runuser -u postgres -- " + stop;
  const std::string script = "exec >/dev/null 2>&1; read _; " + stop + "; rm -rf '" + dir_ + "'";
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[0], 0);  // dup2 clears close-on-exec on the copy
    ::execl("/bin/sh", "sh", "-c", script.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(fds[0]);
  if (pid < 0) {
    ::close(fds[1]);
    return;
  }
  watchdog_fd_ = fds[1];  // kept open (close-on-exec) until this process ends
}

PostgresInstance* PostgresInstance::Shared(std::string* error) {
  static std::mutex mu;
  static std::unique_ptr<PostgresInstance> shared;
  static std::string failure;
  static bool tried = false;
  std::lock_guard lock(mu);
  if (!tried) {
    tried = true;
    shared = Start(&failure);
  }
  if (shared == nullptr && error != nullptr) *error = failure;
  return shared.get();
}

PostgresInstance::~PostgresInstance() {
  if (started_) Run("pg_ctl", {"stop", "-m", "immediate", "-w", "-D", data_}, nullptr);
  std::error_code ec;
  fs::remove_all(dir_, ec);
  if (watchdog_fd_ >= 0) ::close(watchdog_fd_);  // the watchdog finds nothing left to do
}

std::string PostgresInstance::url_for(std::string_view db) const {
  std::string host;
  for (const char c : dir_) {
    if (c == '/') {
      host += "%2F";
    } else {
      host += c;
    }
  }
  return "postgresql:///" + std::string(db) + "?host=" + host + "&port=" + std::to_string(port_) +
         "&user=arbiter";
}

std::string PostgresInstance::Sql(std::string_view db, std::string_view sql) {
  Result<std::unique_ptr<store::pg::Conn>> conn =
      store::pg::Conn::Connect(url_for(db), "test server", "arbiter-test");
  if (!conn.ok()) Die(conn.status().message());
  Result<store::pg::Rows> rows = (*conn)->Exec(sql, {}, "test server");
  if (!rows.ok()) Die(rows.status().message());
  if (rows->rows() == 0 || rows->columns() == 0) return "";
  return std::string(rows->Text(0, 0));
}

void PostgresInstance::CreateDatabase(std::string_view name) {
  Sql("postgres", "CREATE DATABASE \"" + std::string(name) + "\"");
}

std::string PostgresInstance::NewDatabase() {
  static std::mutex mu;
  std::string name;
  {
    std::lock_guard lock(mu);
    name = "test_" + std::to_string(::getpid()) + "_" + std::to_string(++databases_);
  }
  CreateDatabase(name);
  return url_for(name);
}

int PostgresInstance::Terminate(std::string_view application_name) {
  const bool all = application_name.empty() || application_name == "*";
  std::string sql =
      "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 5000)) FROM pg_stat_activity "
      "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()";
  Result<std::unique_ptr<store::pg::Conn>> conn =
      store::pg::Conn::Connect(url_for("postgres"), "test server", "arbiter-test");
  if (!conn.ok()) Die(conn.status().message());
  Result<store::pg::Rows> rows = all ? (*conn)->Exec(sql, {}, "terminate sessions")
                                     : (*conn)->Exec(sql + " AND application_name = $1",
                                                     {application_name}, "terminate sessions");
  if (!rows.ok()) Die(rows.status().message());
  return static_cast<int>(rows->Int(0, 0));
}

}  // namespace arbiter::testing
