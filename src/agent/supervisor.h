// The node agent's task processes, run so that they outlive the agent: each task runs under a
// small shim process in its own session, which waits for the task and writes how it ended into
// the task's record on disk. An agent that restarts (or crashes and is started again) opens the
// same state directory, adopts the tasks still running and learns how the others ended
// (docs/design/agent.md, "Running tasks").
//
// Thread safety: every method may be called from any thread. The agent may be multithreaded:
// between fork and exec the children only make async-signal-safe calls. The agent must not set
// SIGCHLD to SIG_IGN: Start and Poll reap the shims with waitpid.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "arbiter/status.h"

namespace arbiter::agent {

struct TaskLaunch {
  std::string key;                         // unique per run of a task, [A-Za-z0-9._-]+, not
                                           // starting with '.'
  std::vector<std::string> argv;           // argv[0] looked up in PATH unless it has a '/'
  std::map<std::string, std::string> env;  // set over the agent's own environment
  std::string cwd;                         // empty: the task's record directory
  std::string log_path;                    // stdout and stderr appended here (created with
                                           // parents); empty: "log" in the record directory
};

struct TaskStatus {
  std::string key;
  bool running = true;
  int pid = 0;         // the task's process id = its process group id
  int exit_code = -1;  // exited normally: its code
  int signal = 0;      // killed by a signal: which one
  bool lost = false;   // its end could not be learned (the shim died without writing it)
  std::int64_t started_ms = 0, ended_ms = 0;  // wall clock, Unix ms
};

class Supervisor {
 public:
  // Records live under state_dir/<key>/ (created if missing). A Supervisor opened on a
  // directory with records adopts the tasks still running and reports those that ended. One
  // Supervisor at a time may hold a directory (an error otherwise).
  static Result<std::unique_ptr<Supervisor>> Open(const std::string& state_dir);
  // Leaves the tasks running: a later Supervisor on the same directory adopts them.
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Returns once the task has been exec'd. Fails, leaving no record, when the key is taken or
  // invalid, argv[0] is not found in PATH, the log cannot be opened, or chdir or exec fails
  // (the message names which).
  Status Start(const TaskLaunch& launch);
  // Sends `signal` to the task's whole process group; a no-op when the task has ended. An error
  // for an unknown key.
  Status Signal(const std::string& key, int signal);
  // Every task not forgotten, running or ended, sorted by key.
  std::vector<TaskStatus> Poll();
  // Drops an ended task's record (its log stays, unless it is the record's own). An error for an
  // unknown key or a task still running.
  Status Forget(const std::string& key);

 private:
  struct Task {
    TaskStatus status;
    std::int64_t task_start_ticks = 0;  // field 22 of /proc/PID/stat: tells pid reuse apart
    int shim_pid = 0;
    std::int64_t shim_start_ticks = 0;
    bool shim_reaped = false;
  };

  Supervisor(std::string state_dir, int lock_fd)
      : state_dir_(std::move(state_dir)), lock_fd_(lock_fd) {}
  std::string RecordDir(const std::string& key) const { return state_dir_ + "/" + key; }
  // Loads a task from its record directory (false: no task record yet).
  bool Load(const std::string& key, Task& task) const;
  // Reaps the shim when it has ended and is this process's child.
  void ReapShim(Task& task);
  // Brings a running task's status up to date: its exit record, or whether it is lost.
  void Refresh(Task& task);

  const std::string state_dir_;
  const int lock_fd_;  // holds an flock on state_dir/.lock: one Supervisor per directory
  std::mutex mu_;
  std::map<std::string, Task> tasks_;
};

}  // namespace arbiter::agent
