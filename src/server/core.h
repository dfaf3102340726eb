// The server's core: the engine, the cluster state and the jobs in memory, the durable store
// behind them, and the scheduling loop. Every change is written to the store first and applied
// to memory after the store has committed it, so a crash between the two leaves the store right
// and a restart rebuilds memory from it (docs/design/server.md).
//
// Thread safety: every public method may be called from any thread. `mu_` guards the jobs and
// the cluster state; a submission never takes it (a cycle holds it while the engine runs): it
// checks the job against `probe_` (the configured cluster, empty) under `probe_mu_`, commits, and
// leaves the job in the inbox, which the loop and every reader drain into the jobs first.
// Concurrent submissions therefore commit together (the store's group commit).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "arbiter/engine.h"
#include "config/config.h"
#include "core/state/cluster_state.h"
#include "server/agent_wire.h"
#include "server/auth.h"
#include "server/event_feed.h"
#include "server/metrics.h"
#include "store/store.h"

namespace arbiter::server {

// The outcome of an API operation: a JSON body, or an error Status (its code, field and message).
// Only the HTTP layer (http.cc) turns codes into HTTP statuses and errors into the error body
// {"error": {"code", "field", "message"}} (docs/api.md).
struct Answer {
  Answer() = default;
  Answer(nlohmann::json answer, bool is_new = false)  // NOLINT: implicit by design
      : body(std::move(answer)), created(is_new) {}
  Answer(Status status) : error(std::move(status)) {}  // NOLINT: an error, implicit by design

  Status error;  // ok: the call succeeded and `body` is its answer
  nlohmann::json body;
  bool created = false;  // it created a resource (HTTP 201)
  bool ok() const { return error.ok(); }
};

struct CoreOptions {
  // Run the configured nodes inside the server: a job completes after its runtime estimate
  // (never without one), checkpoints every checkpoint interval.
  bool virtual_nodes = false;
  // Unix time in milliseconds; injectable for tests.
  std::function<Millis()> now;
  // Finished jobs kept in memory for listings (older ones are read from the store by id).
  std::size_t finished_kept = 10000;
  // The leader's term with a shared store (docs/design/ha.md), 0 with a single server: sent with
  // every answer to an agent, which ignores answers of an older term.
  std::uint64_t epoch = 0;
  // Check every cycle's plan against what no cycle may decide (CheckPlan, include/arbiter/
  // engine.h); a violation is printed and stops the process at once (exit 70). For tests.
  bool check_invariants = false;
};

// What `GET /v1/jobs` lists: a job matches when each non-empty list holds its value (the query's
// comma-separated values: `state=pending,running`).
struct JobFilter {
  std::vector<std::string> queues, users;
  std::vector<job::JobState> states;
  std::size_t limit = 1000;
};

// A job event's step in the service that the orders reading it count (attained service, time on
// each GPU model, the last stop; docs/configuration.md): `event`, which leaves the job in state
// `after`, ends the run that began at `run_start` on model `ran_on` when it takes the job back to
// pending, and `ran` sums the runs ended so far. Returns the job's whole run time when the event
// completes it (a Gittins order learns it), else -1. The same step for an event as the server
// applies it and for the store's events replayed at a restart, so both count alike.
Millis CountRun(Job& job, Millis& run_start, Millis& ran, GpuTypeId ran_on,
                const store::Event& event, job::JobState after, const ClusterState* state,
                const OrderingWeights& w);

class Core {
 public:
  // Recovers everything from `store` (queue quotas and node states over the configuration,
  // then the jobs) and starts the scheduling loop. Fails, naming the job, when a stored job no
  // longer resolves against the configuration or its allocation no longer fits.
  //
  // With `warm` (a standby's copy of the active jobs, made from the same configuration), only the
  // jobs changed since it last read are read (docs/design/ha.md, "Warm standbys").
  class Warm;
  static Result<std::unique_ptr<Core>> Open(config::ClusterConfig config,
                                            std::unique_ptr<store::Store> store,
                                            CoreOptions options,
                                            std::unique_ptr<Warm> warm = nullptr);
  ~Core();
  // Stops scheduling: the loop ends after the cycle under way. Requests are still answered (a
  // deposed leader's, until its process exits). Called again by the destructor.
  void Stop();
  Core(const Core&) = delete;
  Core& operator=(const Core&) = delete;

  // ---- Jobs ----
  // `body`: a job spec's JSON text as the codec reads it (store/codec.h), without user and
  // submit time. `done` gets the answer: at once when the job is refused, else once the store
  // has committed it (on the store's writer thread; no thread waits for the commit).
  void Submit(const Caller& caller, std::string_view body, std::function<void(Answer)> done);
  Answer ListJobs(const JobFilter& filter);
  Answer GetJob(JobId id);
  Answer Cancel(const Caller& caller, JobId id);
  Answer SetPriority(const Caller& caller, JobId id, const std::string& priority_class);
  Answer Hold(const Caller& caller, JobId id, bool hold);

  // ---- Queues and nodes ----
  Answer ListQueues();
  // `quota`: {"RESOURCE": {"nominal_milli", ...}}; null resets to the configuration's.
  Answer SetQueueQuota(const Caller& caller, const std::string& queue, const nlohmann::json& quota);
  Answer ListNodes() const;
  // Every node and device at once, compactly (the dashboard's cluster view; docs/api.md "The
  // cluster map"): topology domains, device shapes shared by the nodes that have them, each
  // node's state, and each running job's device shares as runs of devices. `cursor`: the event
  // log's position taken before the map (events after it may already show in it).
  Answer ClusterMap();
  // The queues' GPU usage over the last hours: a sample a minute (kept for 6 hours), and one now.
  Answer QueueUsageHistory();
  Answer SetNodeState(const Caller& caller, const std::string& node, store::NodeAdminState state,
                      const std::string& reason);

  // ---- Node agents (docs/design/agent.md) ----
  // `body`: devices, CPU, memory and addresses as the agent found them; `peer`: the address the
  // request came from (the agent's addresses must be its own). The caller is the node's own
  // credential, or a join token that may join as `node` while no live agent holds the node.
  Answer RegisterAgent(const Caller& caller, const std::string& node, const RegisterBody& body,
                       const std::string& peer);
  // Takes the agent's reports, then answers what changed in the node's tasks since `revision`
  // (docs/api.md, "Sync by difference"). When nothing did and `wake` is given, the answer is
  // left empty with `waiting` set: `wake` runs once (on the thread that made the change, after
  // the core's lock is released) when the node's tasks change, and the caller then asks
  // AgentChanges. A later sync of the same node wakes an earlier one still waiting.
  struct SyncOutcome {
    Answer answer;
    bool waiting = false;
    std::uint64_t ticket = 0;  // for AgentChanges
  };
  SyncOutcome SyncAgent(const Caller& caller, const std::string& node,
                        const std::vector<TaskReport>& reports, const std::string& revision,
                        std::function<void()> wake);
  // The node's changes since `revision` (an empty list when there are none), for the waiting
  // sync `ticket` once woken or timed out (it no longer waits).
  Answer AgentChanges(const std::string& node, const std::string& revision, std::uint64_t ticket);
  // Where a task's log is: the node, its agent's log server and the path there.
  Answer LogSource(JobId id, std::uint32_t rank);

  // ---- Snapshots ----
  // The whole cluster at this moment under one lock (admin; docs/snapshot.md): its YAML text, as
  // a JSON string.
  Answer Snapshot(const Caller& caller);

  // ---- Events and metrics ----
  // The events after `cursor`, at most `limit`, serialized (shared with every other reader):
  // from the feed's window, else from the store.
  Result<std::vector<EventFeed::Item>> Events(std::uint64_t cursor, std::size_t limit) const;
  EventFeed& feed() { return *feed_; }
  // The metrics of the cluster now (quotas, usage, pending jobs, nodes) and the counters and
  // histograms of the server's work, appended to `out` (docs/metrics.md).
  void CollectMetrics(std::vector<prometheus::MetricFamily>& out);
  Metrics& metrics() { return metrics_; }

 private:
  struct Entry {
    store::StoredJob stored;
    Job job;                     // the engine's form, current priority class
    std::string reason;          // pending: why, from the last cycle
    std::string reason_stage;    // the stage that refused it (StageName), for the metrics
    Millis pending_since = -1;   // when it last became pending (-1: its submission)
    bool never = false;          // the reason says it can never fit
    Millis reserved_start = -1;  // a backfill reservation's expected start
    Millis run_start = -1;       // running: when its work starts (after its victims stop)
    Millis ran = 0;              // the time it has run before its current run (kept in memory)
    // Node agents: what each task (by rank) of the current run reported, and where each task
    // ran last (for its log, also once the job has finished).
    std::vector<TaskReport> reports;
    std::vector<std::string> last_nodes;
  };

  // A configured node run by an agent (every node, without --virtual-nodes).
  struct AgentNode {
    bool registered = false;  // an agent registered since the server started
    bool lost = false;        // silent past node_lost_timeout; its jobs were moved off
    Millis last_seen = -1;    // its last registration or sync (or the server's start)
    std::string address;      // where the node is reached (MASTER_ADDR)
    std::string log_url;      // the agent's log server
    std::string problem;      // why its last registration was refused
    nlohmann::json reported;  // devices, CPU and memory as the agent found them
    // What the node runs, as its agent is told (by task key), and the revision of each task's
    // last change; the keys taken off it since the agent's last sync (tombstones), with theirs.
    // A revision below `floor` is older than the tombstones kept: it gets everything.
    struct Task {
      nlohmann::json json;
      std::uint64_t revision = 0;
    };
    std::map<std::string, Task> tasks;
    std::map<std::string, std::uint64_t> removed;
    std::uint64_t floor = 0;
    // A sync waiting for a change, and its ticket.
    std::function<void()> waiter;
    std::uint64_t waiter_ticket = 0;
  };

  Core(config::ClusterConfig config, std::unique_ptr<store::Store> store, CoreOptions options);
  // A submission's checks (the spec, the caller's rights, whether it could ever fit, the user's
  // limits); when it passes, it is handed to the store, and `done` (moved) gets the answer once
  // committed. An error: refused, nothing recorded, `done` untouched.
  Status Admit(const Caller& caller, std::string_view body, std::function<void(Answer)>& done);
  // A committed submission (or the store's refusal) into the inbox; its answer.
  Answer Committed(job::JobSpec spec, Job job, const Result<store::Submitted>& submitted,
                   std::chrono::steady_clock::time_point t0);
  Status Recover(std::unique_ptr<Warm> warm);
  // Stored jobs resolved into entries (each processor a part), into `into` by id (an entry of
  // the same id is replaced). Errors: a job that no longer resolves against `names`.
  static Status ResolveInto(std::span<store::StoredJob> batch, const ClusterState& names,
                            std::map<JobId, Entry>& into);
  // After a recovery, on a thread of its own (the server serves meanwhile): the recent finished
  // jobs read again from the store, in front of any that finished since, up to finished_kept.
  // Until they are in, a listing says it is partial.
  void LoadRecentFinished();
  // Counts again, from the store's events up to `last_seq` (where the jobs were loaded), the
  // service of the jobs in memory (CountRun, the starts' BeginService) and, under a Gittins
  // order, the completed jobs' sizes in order.
  Status ReplayService(const ClusterState& names, std::uint64_t last_seq,
                       std::vector<std::pair<Millis, std::int64_t>>& completions);
  // A state from the configuration (with quota overrides and node states) and the running jobs.
  Status RebuildState(const config::ClusterConfig& config);
  Millis Now() const { return options_.now(); }
  void Loop();
  void CycleLocked(Millis now);
  // The virtual nodes' and draining victims' events due at `now`; returns the next due time.
  Millis DueEventsLocked(Millis now);
  // Writes job events and applies them to the jobs in memory (not to the state).
  Status AppendLocked(std::vector<store::Event> events);
  void ApplyLocked(const store::Event& event);
  // Binds a running job again on its allocation as `job` (e.g. under a new priority class),
  // keeping its start and checkpoint. On error the state is as before.
  Status RebindLocked(const Job& job, Millis now);
  // A state change the store has already recorded cannot be refused: when it is (a broken
  // invariant), it is logged and counted (arbiter_internal_errors_total).
  void Check(const Status& status, std::string_view what);
  void Finish(Entry& entry);
  // Writes the queues' recent usage (fair share) to the store.
  void SaveUsageLocked(Millis now);
  // Adds a sample of every queue's usage to the history (QueueUsageHistory).
  void SampleUsageLocked(Millis now);
  // Where each task of the entry's current allocation runs, kept for its log.
  static void RememberNodes(Entry& entry);
  // Moves the accepted jobs of the inbox into `jobs_`.
  void DrainInboxLocked();
  nlohmann::json JobJson(const Entry& entry) const;
  Answer CheckOwner(const Caller& caller, const Entry& entry, const char* what) const;
  Entry* FindLocked(JobId id);
  // Node agents (agent_service.cc).
  bool agents() const { return !options_.virtual_nodes; }
  void InitAgentsLocked(Millis now);
  // Nodes silent past the timeout are lost: unhealthy, their jobs requeued or failed. Returns
  // the next time one could be.
  Millis LoseSilentNodesLocked(Millis now);
  // The jobs' events that the reports make due (completed, failed, evicted, checkpointed).
  void TakeReportsLocked(const std::string& node, const std::vector<TaskReport>& reports,
                         Millis now);
  // A run that failed: requeued while retries are left, else failed.
  store::Event FailRunLocked(const Entry& entry, Millis now, std::string why);
  nlohmann::json AssignmentsLocked(const std::string& node) const;
  // The nodes whose tasks a change touched: their assignments are computed again when the
  // operation that changed them releases mu_ (Changes), and their waiting syncs woken.
  void TouchNodesLocked(const job::StoredAllocation& allocation);
  // Computes the touched nodes' assignments again; returns the waiting syncs to wake.
  std::vector<std::function<void()>> PublishAssignmentsLocked();
  // The answer to a sync at `revision` (under mu_).
  nlohmann::json ChangesLocked(AgentNode& node, const std::string& revision);
  // mu_, held by an operation that may change what nodes run: on release, the touched nodes'
  // assignments are published and their waiting syncs woken (after the lock is released).
  class Changes {
   public:
    explicit Changes(Core& core) : core_(core), lock_(core.mu_) {}
    ~Changes();
    Changes(const Changes&) = delete;
    Changes& operator=(const Changes&) = delete;

   private:
    Core& core_;
    std::unique_lock<std::mutex> lock_;
  };
  // Every node's health: an agent node is healthy while registered and not lost.
  void ApplyHealthLocked();
  void ApplyHealthLocked(const std::string& node);
  // Records a change of a node's health (node_ready, node_lost) in the store's event log; a
  // refusal is reported on standard error.
  void RecordNodeHealthLocked(store::EventKind kind, const std::string& node, Millis now,
                              const std::string& actor, std::string message);
  // Writes the node health events recorded since the last flush, in one transaction (the loop
  // calls it, so that 10,000 agents registering at a server's start cost a few writes).
  void FlushNodeHealthLocked();
  // Asks the loop for a cycle (after its minimum interval). Called with mu_ held.
  void Wake();

  const CoreOptions options_;
  const config::ClusterConfig base_;  // as configured, before run-time changes
  // The feed outlives the store, whose writer publishes to it until it stops.
  std::unique_ptr<EventFeed> feed_;  // filled by the store's commit listener
  const std::unique_ptr<store::Store> store_;
  Metrics metrics_;

  mutable std::mutex mu_;
  config::ClusterConfig config_;  // GUARDED_BY(mu_); quota overrides and node states applied
  Engine engine_;
  // The submissions' check on the empty cluster: an engine of its own, so that its model of the
  // running shapes (none) does not evict the scheduling loop's from the engine's cache.
  Engine probe_engine_;
  std::optional<ClusterState> state_;  // GUARDED_BY(mu_)
  std::map<JobId, Entry> jobs_;        // GUARDED_BY(mu_): active and recent finished
  std::deque<JobId> finished_;         // GUARDED_BY(mu_): oldest first
  std::map<JobId, Millis> draining_;   // GUARDED_BY(mu_): victims -> stop time
  std::map<std::string, store::NodeAdmin> nodes_admin_;  // GUARDED_BY(mu_)
  std::map<std::string, AgentNode> agent_nodes_;         // GUARDED_BY(mu_)
  std::vector<store::Event> node_health_events_;         // GUARDED_BY(mu_): node_ready, node_lost
  std::set<std::string> touched_nodes_;                  // GUARDED_BY(mu_)
  // Revisions of nodes' tasks: "INCARNATION.N", N from one counter; the incarnation (random,
  // per start) tells a revision of an earlier run of the server, which gets everything.
  std::uint64_t revision_ = 0;     // GUARDED_BY(mu_)
  std::uint64_t next_ticket_ = 1;  // GUARDED_BY(mu_)
  const std::string incarnation_;
  Millis agents_grace_until_ = 0;  // GUARDED_BY(mu_): no node lost before
  Millis next_loss_check_ = 0;     // GUARDED_BY(mu_): LoseSilentNodesLocked looks again then
  Millis last_usage_save_ = 0;     // GUARDED_BY(mu_)
  // The queues' usage, a sample a minute, oldest first: milli-GPU per queue and quota resource
  // (queue * quota_resource_count() + resource).
  struct UsageSample {
    Millis time = 0;
    std::vector<std::int64_t> milli;
  };
  std::deque<UsageSample> usage_samples_;  // GUARDED_BY(mu_)
  Millis last_usage_sample_ = 0;           // GUARDED_BY(mu_)

  bool dirty_ = true;      // GUARDED_BY(mu_): a cycle is wanted
  Millis last_cycle_ = 0;  // GUARDED_BY(mu_)
  // The last plan's stable_until: a cycle before it with nothing changed is skipped.
  Millis stable_until_ = 0;  // GUARDED_BY(mu_)

  // Lock order: mu_, then probe_mu_ or inbox_mu_.
  std::mutex probe_mu_;
  std::optional<ClusterState> probe_;  // GUARDED_BY(probe_mu_): the cluster with nothing running

  std::mutex inbox_mu_;
  std::vector<Entry> inbox_;  // GUARDED_BY(inbox_mu_): committed, not in jobs_
  // A user's active (pending, held, running) jobs and their GPUs, submissions in flight included:
  // what server.max_active_jobs_per_user and max_active_gpus_per_user limit.
  struct Active {
    std::int64_t jobs = 0;
    std::int64_t gpu_milli = 0;
    void Add(const job::JobSpec& spec, int sign);
  };
  std::map<std::string, Active> active_;  // GUARDED_BY(inbox_mu_)
  // Takes `spec` out of its user's active count; forgets a user with nothing active.
  void ReleaseActiveLocked(const job::JobSpec& spec);
  bool wake_ = false;                 // GUARDED_BY(inbox_mu_)
  bool stop_ = false;                 // GUARDED_BY(inbox_mu_)
  bool loop_waits_for_inbox_ = true;  // GUARDED_BY(inbox_mu_): a submission wakes it
  std::condition_variable cv_;        // with inbox_mu_
  std::thread loop_;
  std::atomic<bool> recent_loaded_{false};  // LoadRecentFinished is done
  std::thread recent_;                      // runs LoadRecentFinished
};

// A standby's copy of the active jobs (docs/design/ha.md, "Warm standbys"): read once as a
// recovery reads them, resolved against the configuration, then kept up to date with the jobs
// the store's events name since. A takeover with it reads only what changed since its last
// catch-up, instead of every job. Not thread-safe: one thread loads and catches up, then hands
// it to Core::Open.
class Core::Warm {
 public:
  // Reads every active job of `store` (a read-only store is enough), as a recovery without a
  // copy does too. Errors: a job that no longer resolves, the store's, or "cancelled" once
  // `cancel` holds (checked between batches).
  static Result<std::unique_ptr<Warm>> Load(const config::ClusterConfig& config,
                                            store::Store& store,
                                            const std::atomic<bool>* cancel = nullptr);
  // Reads the jobs changed since the last read: a finished one leaves, the others are resolved
  // again. After an error the copy may be half caught up: drop it.
  Status CatchUp(store::Store& store);
  std::size_t jobs() const { return jobs_.size(); }
  std::uint64_t last_seq() const { return last_seq_; }

 private:
  friend class Core;
  Warm() = default;
  std::optional<ClusterState> names_;  // the configuration's, to resolve jobs with
  std::map<JobId, Entry> jobs_;        // active jobs, by id
  std::uint64_t last_seq_ = 0;         // the store's stream as of the last read
};

}  // namespace arbiter::server
