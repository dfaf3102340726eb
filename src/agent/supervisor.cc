#include "agent/supervisor.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>

extern char** environ;

namespace arbiter::agent {
namespace {

namespace fs = std::filesystem;

// ---- Async-signal-safe helpers: the shim and the task's child run them after fork. ----

// What the shim tells the agent (and the task's child tells the shim) over a pipe: a stage that
// failed and its errno, or kOk once the task runs and its record is written.
enum Stage : int { kOk = 0, kChdir = 1, kExec = 2, kFork = 3, kRecord = 4 };
struct Report {
  int stage = kOk;
  int error = 0;
};

void WriteAll(int fd, const void* data, std::size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    size -= static_cast<std::size_t>(n);
  }
}

// Reads exactly `size` bytes unless the other end closes first; returns how many were read.
std::size_t ReadAll(int fd, void* data, std::size_t size) {
  char* p = static_cast<char*>(data);
  std::size_t got = 0;
  while (got < size) {
    ssize_t n = read(fd, p + got, size - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  return got;
}

// Appends v in decimal at p; returns the end.
char* PutInt(char* p, std::int64_t v) {
  char digits[24];
  int n = 0;
  bool negative = v < 0;
  std::uint64_t u = negative ? 0 - static_cast<std::uint64_t>(v) : static_cast<std::uint64_t>(v);
  do {
    digits[n++] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u > 0);
  if (negative) *p++ = '-';
  while (n > 0) *p++ = digits[--n];
  return p;
}

char* PutText(char* p, const char* text) {
  while (*text != '\0') *p++ = *text++;
  return p;
}

std::int64_t NowMs() {
  struct timespec ts {};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

// Field 22 of /proc/PID/stat, the process's start time in clock ticks since boot: a pid with
// another start time is another process (the pid was reused). -1 when there is no such process.
// `state` (field 3) is set when given: 'Z' is a zombie, ended but not reaped.
std::int64_t StartTicks(int pid, char* state = nullptr) {
  char path[40];
  char* end = PutText(path, "/proc/");
  end = PutInt(end, pid);
  end = PutText(end, "/stat");
  *end = '\0';
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[1024];
  std::size_t n = ReadAll(fd, buf, sizeof(buf) - 1);
  close(fd);
  buf[n] = '\0';
  // The command name (field 2) is in parentheses and may hold anything, ')' included.
  char* p = nullptr;
  for (char* q = buf; *q != '\0'; ++q) {
    if (*q == ')') p = q;
  }
  if (p == nullptr) return -1;
  ++p;
  for (int field = 3; field <= 22; ++field) {
    while (*p == ' ') ++p;
    if (*p == '\0') return -1;
    if (field == 3 && state != nullptr) *state = *p;
    if (field == 22) {
      std::int64_t v = 0;
      while (*p >= '0' && *p <= '9') v = v * 10 + (*p++ - '0');
      return v;
    }
    while (*p != ' ' && *p != '\0') ++p;
  }
  return -1;
}

// Replaces `path` with `text` so that a reader sees the old file or the whole new one.
bool WriteAtomically(const char* tmp, const char* path, const char* text, std::size_t size) {
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return false;
  WriteAll(fd, text, size);
  bool ok = close(fd) == 0;
  return ok && rename(tmp, path) == 0;
}

void ResetSignals() {
  // The agent may ignore or block signals (SIGPIPE, say); ignored dispositions and the mask
  // survive exec, and the task must start as from a shell.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig) {
    if (sig != SIGKILL && sig != SIGSTOP) sigaction(sig, &dfl, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);
}

// Everything the shim needs, prepared before fork.
struct ShimPlan {
  const char* program = nullptr;
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  const char* cwd = nullptr;
  const char* task_tmp = nullptr;
  const char* task_path = nullptr;
  const char* exit_tmp = nullptr;
  const char* exit_path = nullptr;
  int status_fd = -1;  // the agent reads one Report from it
  int log_fd = -1;
  int null_fd = -1;
  int max_fd = 1024;
};

[[noreturn]] void RunShim(const ShimPlan& plan) {
  // Its own session: a signal to the agent's process group or terminal does not reach it.
  setsid();
  ResetSignals();
  // fds 0-3 become /dev/null, the log twice and the agent's pipe; nothing else the agent had
  // open (sockets, the state lock) stays open. Copies above 9 first, as any of the originals
  // may sit on 0-3.
  int status_fd = fcntl(plan.status_fd, F_DUPFD, 10);
  int log_fd = fcntl(plan.log_fd, F_DUPFD, 10);
  int null_fd = fcntl(plan.null_fd, F_DUPFD, 10);
  dup2(null_fd, 0);
  dup2(log_fd, 1);
  dup2(log_fd, 2);
  dup2(status_fd, 3);
  if (close_range(4, ~0U, 0) != 0) {
    for (int fd = 4; fd < plan.max_fd; ++fd) close(fd);
  }
  auto fail = [](int stage, int error) {
    Report report{stage, error};
    WriteAll(3, &report, sizeof(report));
    _exit(127);
  };

  // The task's child tells the shim through this pipe why chdir or exec failed; a successful
  // exec closes it.
  int exec_pipe[2];
  if (pipe2(exec_pipe, O_CLOEXEC) != 0) fail(kFork, errno);
  std::int64_t started_ms = NowMs();
  pid_t pid = fork();
  if (pid < 0) fail(kFork, errno);
  if (pid == 0) {
    setpgid(0, 0);
    close(3);
    close(exec_pipe[0]);
    if (chdir(plan.cwd) != 0) {
      Report report{kChdir, errno};
      WriteAll(exec_pipe[1], &report, sizeof(report));
      _exit(127);
    }
    execve(plan.program, plan.argv, plan.envp);
    Report report{kExec, errno};
    WriteAll(exec_pipe[1], &report, sizeof(report));
    _exit(127);
  }
  // Both sides set the group, so it is set whichever runs first.
  setpgid(pid, pid);
  close(exec_pipe[1]);
  Report report;
  if (ReadAll(exec_pipe[0], &report, sizeof(report)) == sizeof(report)) {
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    fail(report.stage, report.error);
  }
  close(exec_pipe[0]);

  char text[160];
  char* end = PutInt(text, pid);
  *end++ = ' ';
  end = PutInt(end, StartTicks(pid));
  *end++ = ' ';
  end = PutInt(end, getpid());
  *end++ = ' ';
  end = PutInt(end, StartTicks(getpid()));
  *end++ = ' ';
  end = PutInt(end, started_ms);
  *end++ = '\n';
  if (!WriteAtomically(plan.task_tmp, plan.task_path, text, static_cast<std::size_t>(end - text))) {
    int error = errno;
    kill(-pid, SIGKILL);
    while (waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    fail(kRecord, error);
  }
  Report ok{kOk, 0};
  WriteAll(3, &ok, sizeof(ok));
  close(3);

  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0) {
    if (errno != EINTR) break;
  }
  std::int64_t ended_ms = NowMs();
  // What the task left behind in its group ends with it, as under a job scheduler's step.
  kill(-pid, SIGKILL);
  if (WIFSIGNALED(wstatus)) {
    end = PutText(text, "signaled ");
    end = PutInt(end, WTERMSIG(wstatus));
  } else {
    end = PutText(text, "exited ");
    end = PutInt(end, WEXITSTATUS(wstatus));
  }
  *end++ = ' ';
  end = PutInt(end, ended_ms);
  *end++ = '\n';
  WriteAtomically(plan.exit_tmp, plan.exit_path, text, static_cast<std::size_t>(end - text));
  _exit(0);
}

// ---- The agent's side. ----

std::string Quote(std::string_view s) { return fmt::format("\"{}\"", s); }

Status CheckKey(const std::string& key) {
  if (key.empty()) return Status::FromCode(StatusCode::kInvalidArgument, "empty", "key");
  for (char c : key) {
    bool fine = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                c == '.' || c == '_' || c == '-';
    if (!fine) {
      return Status::FromCode(
          StatusCode::kInvalidArgument,
          fmt::format("{}: may hold only letters, digits, '.', '_' and '-'", Quote(key)), "key");
    }
  }
  if (key[0] == '.')
    return Status::FromCode(StatusCode::kInvalidArgument,
                            fmt::format("{}: must not start with '.'", Quote(key)), "key");
  return Status::Ok();
}

bool ReadWholeFile(const std::string& path, std::string& out) {
  std::ifstream in(path);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return true;
}

// The program execve runs: argv[0] itself when it has a '/', else the first executable file of
// that name in PATH (resolved here rather than by execvp in the child, which is not
// async-signal-safe, and so that a missing program fails Start with a clear error).
Result<std::string> FindProgram(const std::string& name, const std::string& path) {
  if (name.empty()) return Status::FromCode(StatusCode::kInvalidArgument, "empty", "argv[0]");
  if (name.find('/') != std::string::npos) return name;
  std::size_t from = 0;
  while (from <= path.size()) {
    std::size_t colon = path.find(':', from);
    if (colon == std::string::npos) colon = path.size();
    std::string dir = path.substr(from, colon - from);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    struct stat st {};
    if (stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    from = colon + 1;
  }
  return Status::FromCode(StatusCode::kNotFound, fmt::format("{}: not found in PATH", Quote(name)),
                          "argv[0]");
}

// Closes an fd when it goes out of scope.
struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { Reset(); }
  void Reset() {
    if (fd >= 0) close(fd);
    fd = -1;
  }
};

}  // namespace

Supervisor::~Supervisor() {
  if (lock_fd_ >= 0) close(lock_fd_);
}

Result<std::unique_ptr<Supervisor>> Supervisor::Open(const std::string& state_dir) {
  std::error_code ec;
  fs::create_directories(state_dir, ec);
  if (ec)
    return Status::FromCode(StatusCode::kUnavailable,
                            fmt::format("{}: {}", Quote(state_dir), ec.message()), "state_dir");
  std::string lock_path = state_dir + "/.lock";
  int lock_fd = open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd < 0) {
    return Status::FromCode(StatusCode::kUnavailable,
                            fmt::format("{}: {}", Quote(lock_path), strerror(errno)), "state_dir");
  }
  if (flock(lock_fd, LOCK_EX | LOCK_NB) != 0) {
    close(lock_fd);
    return Status::FromCode(
        StatusCode::kConflict,
        fmt::format("{}: in use by another agent on this node", Quote(state_dir)), "state_dir");
  }
  std::unique_ptr<Supervisor> sup(new Supervisor(state_dir, lock_fd));
  for (const fs::directory_entry& entry : fs::directory_iterator(state_dir, ec)) {
    if (!entry.is_directory()) continue;
    std::string key = entry.path().filename().string();
    if (!CheckKey(key).ok()) continue;
    Task task;
    if (!sup->Load(key, task)) {
      // The agent stopped inside Start, or the shim could not write the record: nothing says
      // whether a task ran.
      task.status.key = key;
      task.status.running = false;
      task.status.lost = true;
      task.status.ended_ms = NowMs();
    }
    sup->tasks_.emplace(key, std::move(task));
  }
  if (ec)
    return Status::FromCode(StatusCode::kUnavailable,
                            fmt::format("{}: {}", Quote(state_dir), ec.message()), "state_dir");
  return sup;
}

bool Supervisor::Load(const std::string& key, Task& task) const {
  std::string text;
  if (!ReadWholeFile(RecordDir(key) + "/task", text)) return false;
  std::istringstream in(text);
  task.status = TaskStatus{};
  task.status.key = key;
  if (!(in >> task.status.pid >> task.task_start_ticks >> task.shim_pid >> task.shim_start_ticks >>
        task.status.started_ms)) {
    return false;
  }
  if (ReadWholeFile(RecordDir(key) + "/exit", text)) {
    std::istringstream exit_in(text);
    std::string how;
    int value = 0;
    std::int64_t ended = 0;
    if (exit_in >> how >> value >> ended) {
      task.status.running = false;
      task.status.ended_ms = ended;
      if (how == "signaled") {
        task.status.signal = value;
      } else {
        task.status.exit_code = value;
      }
    }
  }
  return true;
}

void Supervisor::ReapShim(Task& task) {
  if (task.shim_reaped || task.shim_pid <= 0) return;
  char state = '?';
  if (StartTicks(task.shim_pid, &state) != task.shim_start_ticks) {
    task.shim_reaped = true;  // gone (a restarted agent's init or subreaper reaped it)
    return;
  }
  if (state == 'Z' && waitpid(task.shim_pid, nullptr, WNOHANG) == task.shim_pid) {
    task.shim_reaped = true;
  }
}

void Supervisor::Refresh(Task& task) {
  ReapShim(task);
  if (!task.status.running) return;
  char state = '?';
  bool shim_alive = !task.shim_reaped &&
                    StartTicks(task.shim_pid, &state) == task.shim_start_ticks && state != 'Z';
  // The shim writes the exit record before it ends, so a record missing after the shim is seen
  // gone is missing for good.
  Task loaded;
  if (Load(task.status.key, loaded) && !loaded.status.running) {
    task.status = loaded.status;
    return;
  }
  if (shim_alive) return;
  char task_state = '?';
  if (StartTicks(task.status.pid, &task_state) == task.task_start_ticks && task_state != 'Z') {
    return;  // the shim was killed, the task runs on: it can still be signalled
  }
  task.status.running = false;
  task.status.lost = true;
  task.status.ended_ms = NowMs();
}

Status Supervisor::Start(const TaskLaunch& launch) {
  if (Status st = CheckKey(launch.key); !st.ok()) return st;
  if (launch.argv.empty()) return Status::FromCode(StatusCode::kInvalidArgument, "empty", "argv");
  for (const auto& [name, value] : launch.env) {
    if (name.empty() || name.find('=') != std::string::npos) {
      return Status::FromCode(
          StatusCode::kInvalidArgument,
          fmt::format("{}: a name must be non-empty and hold no '='", Quote(name)), "env");
    }
  }
  std::lock_guard lock(mu_);
  const std::string dir = RecordDir(launch.key);
  if (tasks_.count(launch.key) > 0 || mkdir(dir.c_str(), 0755) != 0) {
    if (tasks_.count(launch.key) > 0 || errno == EEXIST) {
      return Status::FromCode(StatusCode::kConflict,
                              fmt::format("{}: a task with this key exists", Quote(launch.key)),
                              "key");
    }
    return Status::FromCode(StatusCode::kUnavailable,
                            fmt::format("{}: {}", Quote(dir), strerror(errno)), "state_dir");
  }
  bool started = false;
  struct RemoveUnlessStarted {
    const std::string& dir;
    const bool& started;
    ~RemoveUnlessStarted() {
      std::error_code ec;
      if (!started) fs::remove_all(dir, ec);
    }
  } cleanup{dir, started};

  // The environment: the agent's, with the launch's names set over it.
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    std::size_t eq = entry.find('=');
    if (eq == std::string_view::npos) continue;
    env[std::string(entry.substr(0, eq))] = std::string(entry.substr(eq + 1));
  }
  for (const auto& [name, value] : launch.env) env[name] = value;
  auto path_it = env.find("PATH");
  Result<std::string> program =
      FindProgram(launch.argv[0], path_it != env.end() ? path_it->second : "/usr/bin:/bin");
  if (!program.ok()) return program.status();

  std::string log_path = launch.log_path.empty() ? dir + "/log" : launch.log_path;
  std::error_code ec;
  if (fs::path parent = fs::path(log_path).parent_path(); !parent.empty()) {
    fs::create_directories(parent, ec);
    if (ec)
      return Status::FromCode(StatusCode::kUnavailable,
                              fmt::format("{}: {}", Quote(log_path), ec.message()), "log_path");
  }
  Fd log_fd(open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (log_fd.fd < 0) {
    return Status::FromCode(StatusCode::kUnavailable,
                            fmt::format("{}: {}", Quote(log_path), strerror(errno)), "log_path");
  }
  Fd null_fd(open("/dev/null", O_RDWR | O_CLOEXEC));
  if (null_fd.fd < 0)
    return Status::FromCode(StatusCode::kUnavailable,
                            fmt::format("/dev/null: {}", strerror(errno)));

  std::vector<std::string> env_strings;
  for (const auto& [name, value] : env) env_strings.push_back(name + "=" + value);
  std::vector<char*> envp;
  for (std::string& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_strings = launch.argv;
  std::vector<char*> argv;
  for (std::string& s : argv_strings) argv.push_back(s.data());
  argv.push_back(nullptr);
  const std::string cwd = launch.cwd.empty() ? dir : launch.cwd;
  const std::string task_tmp = dir + "/task.tmp", task_path = dir + "/task";
  const std::string exit_tmp = dir + "/exit.tmp", exit_path = dir + "/exit";

  int status_pipe[2];
  if (pipe2(status_pipe, O_CLOEXEC) != 0) {
    return Status::FromCode(StatusCode::kUnavailable,
                            fmt::format("start {}: pipe: {}", Quote(launch.key), strerror(errno)));
  }
  Fd status_read(status_pipe[0]);
  Fd status_write(status_pipe[1]);
  struct rlimit nofile {};
  int max_fd = 65536;
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur != RLIM_INFINITY) {
    max_fd = static_cast<int>(std::min<rlim_t>(nofile.rlim_cur, 1 << 20));
  }
  ShimPlan plan{.program = program->c_str(),
                .argv = argv.data(),
                .envp = envp.data(),
                .cwd = cwd.c_str(),
                .task_tmp = task_tmp.c_str(),
                .task_path = task_path.c_str(),
                .exit_tmp = exit_tmp.c_str(),
                .exit_path = exit_path.c_str(),
                .status_fd = status_write.fd,
                .log_fd = log_fd.fd,
                .null_fd = null_fd.fd,
                .max_fd = max_fd};

  pid_t shim = fork();
  if (shim < 0) {
    return Status::FromCode(StatusCode::kUnavailable,
                            fmt::format("start {}: fork: {}", Quote(launch.key), strerror(errno)));
  }
  if (shim == 0) RunShim(plan);
  status_write.Reset();
  log_fd.Reset();
  null_fd.Reset();
  Report report;
  bool reported = ReadAll(status_read.fd, &report, sizeof(report)) == sizeof(report);
  if (reported && report.stage == kOk) {
    Task task;
    if (!Load(launch.key, task)) {
      return Status::FromCode(
          StatusCode::kInternal,
          fmt::format("start {}: the task record is unreadable", Quote(launch.key)));
    }
    started = true;
    tasks_[launch.key] = std::move(task);
    return Status::Ok();
  }
  // The shim has failed and exits at once.
  while (waitpid(shim, nullptr, 0) < 0 && errno == EINTR) {
  }
  if (!reported) {
    return Status::FromCode(
        StatusCode::kInternal,
        fmt::format("start {}: the shim ended without a word", Quote(launch.key)));
  }
  std::string error = strerror(report.error);
  switch (report.stage) {
    case kChdir:
      return Status::FromCode(StatusCode::kInvalidArgument,
                              fmt::format("{}: {}", Quote(cwd), error), "cwd");
    case kExec:
      return Status::FromCode(StatusCode::kUnavailable,
                              fmt::format("{}: {}", Quote(*program), error), "argv[0]");
    case kFork:
      return Status::FromCode(StatusCode::kUnavailable,
                              fmt::format("start {}: fork: {}", Quote(launch.key), error));
    case kRecord:
      return Status::FromCode(StatusCode::kUnavailable,
                              fmt::format("{}: {}", Quote(task_path), error), "state_dir");
    default:
      return Status::FromCode(StatusCode::kInternal,
                              fmt::format("start {}: the shim failed", Quote(launch.key)));
  }
}

Status Supervisor::Signal(const std::string& key, int signal) {
  std::lock_guard lock(mu_);
  auto it = tasks_.find(key);
  if (it == tasks_.end())
    return Status::FromCode(StatusCode::kNotFound, fmt::format("{}: no such task", Quote(key)),
                            "key");
  Task& task = it->second;
  Refresh(task);
  if (!task.status.running) return Status::Ok();
  // A pid whose start time changed belongs to another process now; the task is gone.
  if (StartTicks(task.status.pid) != task.task_start_ticks) return Status::Ok();
  if (kill(-task.status.pid, signal) != 0 && errno != ESRCH) {
    return Status::FromCode(
        StatusCode::kUnavailable,
        fmt::format("signal {} to task {}: {}", signal, Quote(key), strerror(errno)));
  }
  return Status::Ok();
}

std::vector<TaskStatus> Supervisor::Poll() {
  std::lock_guard lock(mu_);
  std::vector<TaskStatus> out;
  out.reserve(tasks_.size());
  for (auto& [key, task] : tasks_) {
    Refresh(task);
    out.push_back(task.status);
  }
  return out;
}

Status Supervisor::Forget(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = tasks_.find(key);
  if (it == tasks_.end())
    return Status::FromCode(StatusCode::kNotFound, fmt::format("{}: no such task", Quote(key)),
                            "key");
  Refresh(it->second);
  if (it->second.status.running) {
    return Status::FromCode(StatusCode::kConflict,
                            fmt::format("{}: the task is still running", Quote(key)), "key");
  }
  std::error_code ec;
  fs::remove_all(RecordDir(key), ec);
  if (ec) {
    return Status::FromCode(StatusCode::kUnavailable,
                            fmt::format("{}: {}", Quote(RecordDir(key)), ec.message()),
                            "state_dir");
  }
  tasks_.erase(it);
  return Status::Ok();
}

}  // namespace arbiter::agent
