// The server's durable store: jobs as submitted, every job transition as an event with a sequence
// number (the cursor of the event stream), and the operators' run-time changes (queue quotas, node
// cordon/drain). One interface, two implementations: SQLite in WAL mode under the data directory
// (durable, group commit) and an in-memory store for tests. docs/design/store.md explains the
// schema, the durability argument and recovery.
//
// Jobs are stored by names (queue, priority class, GPU types, topology levels, nodes), never by
// the ids a ClusterState interns, so a restart with an edited configuration still reads them;
// job::ToJob / ToAllocation (src/job/resolve.h) resolve them against the current state.
//
// Every method may be called from any thread. With the SQLite store a write returns only once it
// is durably committed; concurrent writes are committed together (one transaction, one fsync).
// Texts must be UTF-8 (the checks below refuse other bytes, naming the field).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "arbiter/model.h"
#include "arbiter/plan.h"
#include "arbiter/state.h"
#include "arbiter/status.h"
#include "job/spec.h"

namespace arbiter::store {

// The schema version this build writes; a store with a newer version is refused.
inline constexpr int kSchemaVersion = 2;

// ---------------------------------------------------------------------------------------------
// Jobs.

// What the job's events have made of it (ApplyEvent). Times are -1 when they never happened.
struct JobStatus {
  job::JobState state = job::JobState::kPending;
  std::string priority_class;        // current (changed by kPriorityChanged)
  job::StoredAllocation allocation;  // while running
  Millis start_time = -1;            // the current (or last) run's start
  Millis first_start_time = -1;
  Millis last_checkpoint = -1;    // the latest checkpoint of any run
  Millis stop_at = -1;            // running and told to stop (eviction signalled): when
  std::vector<Millis> evictions;  // every eviction, oldest first
  std::int32_t retries = 0;       // failed runs started again (kRetried)
  Millis end_time = -1;           // finished: when
  std::string message;            // finished: why (failure, who cancelled); else empty

  friend bool operator==(const JobStatus&, const JobStatus&);
};

struct StoredJob {
  JobId id = 0;
  job::JobSpec spec;
  JobStatus status;
};

// ---------------------------------------------------------------------------------------------
// Events.

enum class EventKind : std::uint8_t {
  // Job transitions (`job` is set). Pending means pending or held unless said otherwise.
  kSubmitted,          // new job, pending. Written by Submit only.
  kHeld,               // pending -> held
  kReleased,           // held -> pending
  kPriorityChanged,    // pending, held or running; `priority_class` is the new class
  kStarted,            // pending (not held) -> running on `allocation`
  kCheckpointed,       // running: a checkpoint was saved at `time`
  kEvictionSignalled,  // running: told to checkpoint and stop by `stop_at`
  kEvicted,            // running -> pending; counted in JobStatus::evictions
  kRequeued,           // running -> pending, not an eviction (node drained)
  kRetried,            // running -> pending after a failed run; counted in JobStatus::retries
  kCompleted,          // running -> completed
  kFailed,             // pending, held or running -> failed (`message`: why)
  kCancelled,          // pending, held or running -> cancelled
  // Operators' changes (`target` is the queue or node). Written by SetQueueQuota /
  // ResetQueueQuota / SetNodeState only.
  kQueueQuotaChanged,
  kNodeCordoned,
  kNodeDraining,
  kNodeUncordoned,
  // A node's agent: registered, so the node runs work (kNodeReady; `actor` the agent, `message`
  // its address and devices), or silent past the lost timeout (kNodeLost; `message` for how
  // long). Written by the server when the node's health changes.
  kNodeReady,
  kNodeLost,
};
const char* EventKindName(EventKind kind);  // "submitted", "held", ..., "node_lost"
std::optional<EventKind> ParseEventKind(std::string_view name);
inline bool IsJobEvent(EventKind k) { return k <= EventKind::kCancelled; }

struct Event {
  std::uint64_t seq = 0;  // assigned by the store: strictly increasing, never reused
  Millis time = 0;
  EventKind kind = EventKind::kSubmitted;
  JobId job = 0;               // job events
  std::string target;          // operators' changes: the queue or node
  std::string actor;           // who: the user or admin, "scheduler", an agent
  std::string message;         // free text: why it failed, which job evicted it, a cordon reason
  std::string priority_class;  // kPriorityChanged: the new class
  job::StoredAllocation allocation;  // kStarted
  Millis stop_at = -1;               // kEvictionSignalled
  job::JobState state =
      job::JobState::kPending;  // job events: the job's state after it (set by the store)

  friend bool operator==(const Event&, const Event&);
};

// Checks an event given to Store::Append on its own (a job transition, its fields); `field`
// prefixes the errors (e.g. "events[3]").
Status ValidateEvent(const Event& event, std::string_view field = "event");
// Applies a job event to a job's status: the state machine of EventKind. An event the state does
// not allow is an error naming both (e.g. "job is completed; only a pending job can start").
// On error `status` is unchanged.
Status ApplyEvent(JobStatus& status, const Event& event);

// ---------------------------------------------------------------------------------------------
// Operators' run-time changes.

// A queue's quota as changed at run time; it replaces the configuration's quota of the queue
// (every resource) until reset.
struct QueueQuotaOverride {
  std::string queue;
  std::map<std::string, QuotaSpec> quota;
  Millis time = 0;
  std::string actor;
};

enum class NodeAdminState : std::uint8_t {
  kSchedulable,  // as configured
  kCordoned,     // no new tasks
  kDraining,     // no new tasks, and its running jobs are to be moved off
};
const char* NodeAdminStateName(NodeAdminState state);  // "schedulable", "cordoned", "draining"

struct NodeAdmin {
  std::string node;
  NodeAdminState state = NodeAdminState::kSchedulable;
  std::string reason;
  Millis time = 0;
  std::string actor;
};

// A queue's recent usage (the fair-share factor's input, ClusterState::recent_usage) as the
// server last saved it: GPU-milli-milliseconds, decayed, as of `time`.
struct QueueUsage {
  std::string queue;
  double usage = 0;
  Millis time = 0;
};

// ---------------------------------------------------------------------------------------------
// The store.

// What the server rebuilds its state from on start.
struct Snapshot {
  std::vector<StoredJob> jobs;                   // by id
  std::vector<QueueQuotaOverride> queue_quotas;  // by queue name
  // Nodes an operator set a state on, by name: the last word of the API for each (schedulable
  // too, which overrides a cordon of the configuration).
  std::vector<NodeAdmin> nodes;
  std::vector<QueueUsage> queue_usage;  // as last saved, by queue name
  std::uint64_t last_seq = 0;           // the last event's seq: where the stream stands
  JobId last_job_id = 0;                // ids are never reused
};

struct LoadOptions {
  bool include_finished = true;  // false: only pending, held and running jobs
  bool include_jobs = true;      // false: no job at all (the rest of the snapshot)
  // When set, the jobs are handed to it a batch at a time, in id order, instead of collected in
  // Snapshot::jobs (which stays empty): a recovery of a million jobs then never holds them all
  // twice. It may move from the records. An error it returns ends the load with that error.
  // The SQLite store calls it on Load's thread while it reads the next batch on another; it must
  // not call the store.
  std::function<Status(std::span<StoredJob> jobs)> each_batch = nullptr;
};

// The jobs changed since an event's seq, and where that leaves the stream.
struct JobChanges {
  std::vector<StoredJob> jobs;  // each job an event after the seq names, as it is now, by id
  std::uint64_t last_seq = 0;   // the last event's seq when they were read
};

struct Submitted {
  JobId id = 0;
  std::uint64_t seq = 0;   // of its kSubmitted event; 0 for a duplicate
  bool duplicate = false;  // an earlier job with the same (user, idempotency_key)
};

class Store {
 public:
  virtual ~Store() = default;

  // Records a new pending job and its kSubmitted event (time = spec.submit_time, actor =
  // spec.user); returns once durably committed. Errors: ValidateJobSpec's.
  virtual Result<Submitted> Submit(job::JobSpec spec) = 0;
  // As Submit, without waiting: `done` runs once the submission is committed (or refused), on
  // the thread that committed it (the SQLite store's writer), so it must be quick and must not
  // call the store's writes. A caller waiting for its commit holds no thread.
  virtual void SubmitAsync(job::JobSpec spec, std::function<void(Result<Submitted>)> done);
  // As Submit, for several jobs at once: all are recorded in one transaction, or none (an invalid
  // spec is an error naming it, e.g. "jobs[2].queue: must not be empty").
  virtual Result<std::vector<Submitted>> SubmitBatch(std::vector<job::JobSpec> specs) = 0;

  // Records job transitions, all or none, and updates the jobs' status (ApplyEvent, each event
  // seeing the state the ones before it left). Returns the events with `seq` and `state` set.
  // Errors name the event: "events[1] (job 7, started): job is running; only a pending job can
  // start", "events[0]: no job 42".
  virtual Result<std::vector<Event>> Append(std::vector<Event> events) = 0;

  // Replaces a queue's quota / goes back to the configuration's; records a kQueueQuotaChanged.
  virtual Result<Event> SetQueueQuota(QueueQuotaOverride quota) = 0;
  virtual Result<Event> ResetQueueQuota(const std::string& queue, Millis time,
                                        const std::string& actor) = 0;
  // Cordons, drains or uncordons (kSchedulable) a node; records the matching event.
  virtual Result<Event> SetNodeState(NodeAdmin node) = 0;
  // Records changes of nodes' health seen by the server (each event's kind kNodeReady or
  // kNodeLost, its target the node), in one transaction: events only, no other state. Returns
  // them with their seq.
  virtual Result<std::vector<Event>> RecordNodeHealth(std::vector<Event> events) = 0;
  // Replaces the saved recent usage of every queue (no event: a periodic snapshot).
  virtual Status SaveQueueUsage(std::vector<QueueUsage> usage) = 0;

  // Events with seq > cursor, oldest first, at most `limit`. Cursor 0 reads from the start.
  virtual Result<std::vector<Event>> EventsSince(std::uint64_t cursor, std::size_t limit) = 0;
  // One job as it is now, or nullopt.
  virtual Result<std::optional<StoredJob>> GetJob(JobId id) = 0;
  // The finished jobs (completed, failed, cancelled) with the highest ids, at most `limit`,
  // highest first: the recent ones a server lists beside the active jobs, read again after a
  // restart or a takeover.
  virtual Result<std::vector<StoredJob>> RecentFinished(std::size_t limit) = 0;
  // The jobs that events after `seq` name (every change of a job is an event of it), as they are
  // now: a standby follows the store with it (docs/design/ha.md, "Warm standbys"). This base
  // reads EventsSince and GetJob; a store may read both in one snapshot.
  virtual Result<JobChanges> JobsChangedSince(std::uint64_t seq);
  // Everything the server needs to rebuild its state.
  virtual Result<Snapshot> Load(const LoadOptions& options = {}) = 0;

  // The seq of the last committed event.
  std::uint64_t LastSeq() const;
  // Called after every commit that added events, with them in seq order, on the committing
  // thread (in commit order): the server's event feed. It must be quick and must not call the
  // store. Set before the first write.
  void SetCommitListener(std::function<void(std::span<const Event> events)> listener);

 protected:
  // Implementations call this after each commit that added events (in seq order), and once on
  // opening with the last seq stored (no events).
  void PublishEvents(std::span<const Event> events, std::uint64_t last_seq = 0);

 private:
  std::atomic<std::uint64_t> last_seq_{0};  // only grows
  std::function<void(std::span<const Event>)> listener_;
};

struct SqliteOptions {
  std::string dir;  // the data directory (created if missing); the database is DIR/arbiter.db
  // Most write calls committed in one transaction (group commit). 1: one transaction per call.
  std::size_t max_batch = 1024;
};

// Opens (or creates) the store under `options.dir`: WAL mode, synchronous=FULL, the schema
// migrated to kSchemaVersion. Refuses a store written by a newer version, and a directory
// another process holds open.
Result<std::unique_ptr<Store>> OpenSqliteStore(const SqliteOptions& options);
// Same interface, in memory, not durable: for tests of the server.
std::unique_ptr<Store> MakeMemoryStore();

// The connections of a leader's term (its store's, its lease's), which another thread may end at
// once: a leader that loses its lease calls Sever(), and every call blocked on a database path
// that hangs returns an error at once (shutdown(2) of its socket) instead of waiting for TCP to
// give up; no connection registered later lives either. Thread-safe.
class Severance {
 public:
  void Sever();
  bool severed() const;
  // Registers a connected socket; false (and the socket is shut) when already severed. A socket
  // is removed before it is closed, so that Sever never touches a reused descriptor.
  bool Add(int fd);
  void Remove(int fd);

 private:
  mutable std::mutex mu_;
  std::set<int> fds_;     // GUARDED_BY(mu_)
  bool severed_ = false;  // GUARDED_BY(mu_)
};

// A store on PostgreSQL, which several servers share, one leading (docs/design/ha.md).
struct PostgresOptions {
  // A libpq connection string: a URI (postgresql://USER@HOST:PORT/DB?sslmode=verify-full) or
  // key=value words (host=/run/postgresql dbname=arbiter).
  std::string url;
  // Most write calls committed in one transaction (group commit), as SqliteOptions::max_batch.
  std::size_t max_batch = 1024;
  // Fencing. Nonzero: every write transaction first reads the leader row's epoch, locked shared
  // until the transaction ends, and writes only while it is this epoch. Otherwise every call of
  // the batch fails with kUnavailable ("store: fenced: ...": another server leads) and
  // `on_fenced` runs, once, on the writer thread. 0: no check (a single server, and tests).
  std::uint64_t epoch = 0;
  std::function<void()> on_fenced;
  // A leader's term: Sever() fails every call under way and every later one (kUnavailable,
  // "store: this server no longer leads"). Null: none.
  std::shared_ptr<Severance> severance;
  // Reads only (a standby following the store): no writer, no migration; every write fails.
  bool read_only = false;
};

// Connects, migrates the schema to kSchemaVersion on start (under an advisory lock, so servers
// starting together migrate once), refuses a newer schema, and starts the writer.
Result<std::unique_ptr<Store>> OpenPostgresStore(const PostgresOptions& options);
// Whether a --store value names a PostgreSQL database (postgresql:// or postgres://) rather
// than a data directory.
bool IsPostgresUrl(std::string_view store);

}  // namespace arbiter::store
