// The stores: the same behaviour from the in-memory, the SQLite and the PostgreSQL store
// (submissions, events and their cursor, transitions, operators' changes, bad input; PostgreSQL on
// a private server, testing/postgres.h), then what only the SQLite store
// promises: recovery after reopening, acknowledged submissions surviving a SIGKILL, the schema
// version check, one process per data directory, and group commit under concurrent submitters.
#include "store/store.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "store/codec.h"
#include "store/fixtures.h"
#include "testing/postgres.h"

namespace arbiter::store {
namespace {

using fixtures::JobEvent;
using fixtures::On;
using fixtures::Spec;
using fixtures::Start;

namespace fs = std::filesystem;

// A fresh directory, removed at the end.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "arbiter-store-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) std::abort();
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::unique_ptr<Store> OpenOrDie(const std::string& dir, std::size_t max_batch = 1024) {
  Result<std::unique_ptr<Store>> store = OpenSqliteStore({dir, max_batch});
  EXPECT_TRUE(store.ok()) << store.status().message();
  return store.ok() ? std::move(store).value() : nullptr;
}

std::string JobName(int thread, int i) {
  return "t" + std::to_string(thread) + "-" + std::to_string(i);
}

// ---- Both stores ----

class StoreTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "memory") {
      store_ = MakeMemoryStore();
    } else if (GetParam() == "postgres") {
      std::string error;
      testing::PostgresInstance* pg = testing::PostgresInstance::Shared(&error);
      ASSERT_NE(pg, nullptr) << "no PostgreSQL server for the test: " << error;
      PostgresOptions options;
      options.url = pg->NewDatabase();
      Result<std::unique_ptr<Store>> store = OpenPostgresStore(options);
      ASSERT_TRUE(store.ok()) << store.status().message();
      store_ = std::move(store).value();
    } else {
      store_ = OpenOrDie(dir_.path());
    }
    ASSERT_NE(store_, nullptr);
  }

  JobId MustSubmit(job::JobSpec spec) {
    Result<Submitted> r = store_->Submit(std::move(spec));
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? r->id : 0;
  }

  std::vector<Event> MustAppend(std::vector<Event> events) {
    Result<std::vector<Event>> r = store_->Append(std::move(events));
    EXPECT_TRUE(r.ok()) << r.status().message();
    return r.ok() ? *r : std::vector<Event>{};
  }

  StoredJob MustGet(JobId id) {
    Result<std::optional<StoredJob>> r = store_->GetJob(id);
    EXPECT_TRUE(r.ok()) << r.status().message();
    EXPECT_TRUE(r.ok() && r->has_value()) << "no job " << id;
    return r.ok() && r->has_value() ? **r : StoredJob{};
  }

  TempDir dir_;
  std::unique_ptr<Store> store_;
};

TEST_P(StoreTest, SubmitRoundTrip) {
  EXPECT_EQ(store_->LastSeq(), 0u);
  job::JobSpec spec = Spec("llama");
  spec.command = "torchrun train.py";
  spec.tolerations = {Toleration{"dedicated", Toleration::Op::kEqual, "training", std::nullopt}};
  Result<Submitted> r = store_->Submit(spec);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->id, 1u);
  EXPECT_EQ(r->seq, 1u);
  EXPECT_FALSE(r->duplicate);
  EXPECT_EQ(store_->LastSeq(), 1u);

  StoredJob job = MustGet(r->id);
  EXPECT_TRUE(job.spec == spec) << JobSpecToJson(job.spec).dump();
  EXPECT_EQ(job.status.state, job::JobState::kPending);
  EXPECT_EQ(job.status.priority_class, "P1");
  EXPECT_EQ(job.status.start_time, -1);

  Result<std::vector<Event>> events = store_->EventsSince(0, 10);
  ASSERT_TRUE(events.ok()) << events.status().message();
  ASSERT_EQ(events->size(), 1u);
  const Event& e = (*events)[0];
  EXPECT_EQ(e.seq, 1u);
  EXPECT_EQ(e.kind, EventKind::kSubmitted);
  EXPECT_EQ(e.job, r->id);
  EXPECT_EQ(e.time, 1000);
  EXPECT_EQ(e.actor, "alice");  // the submitter
  EXPECT_EQ(e.state, job::JobState::kPending);

  Result<std::optional<StoredJob>> missing = store_->GetJob(99);
  ASSERT_TRUE(missing.ok());
  EXPECT_FALSE(missing->has_value());
}

TEST_P(StoreTest, TransitionsUpdateTheJobAndAreEvents) {
  const JobId a = MustSubmit(Spec("a"));
  const JobId b = MustSubmit(Spec("b"));
  std::vector<Event> started = MustAppend({Start(a, 2000, "h800-0"), Start(b, 2000, "h800-1")});
  ASSERT_EQ(started.size(), 2u);
  EXPECT_EQ(started[0].seq, 3u);
  EXPECT_EQ(started[1].seq, 4u);
  EXPECT_EQ(started[0].state, job::JobState::kRunning);

  StoredJob ja = MustGet(a);
  EXPECT_EQ(ja.status.state, job::JobState::kRunning);
  EXPECT_TRUE(ja.status.allocation == On("h800-0"));
  EXPECT_EQ(ja.status.start_time, 2000);

  Event signal = JobEvent(a, EventKind::kEvictionSignalled, 2600);
  signal.stop_at = 2700;
  signal.message = "evicted for job 5";
  Event prio = JobEvent(b, EventKind::kPriorityChanged, 2650, "admin");
  prio.priority_class = "P0";
  MustAppend({JobEvent(a, EventKind::kCheckpointed, 2500), signal, prio,
              JobEvent(a, EventKind::kEvicted, 2700)});
  ja = MustGet(a);
  EXPECT_EQ(ja.status.state, job::JobState::kPending);
  EXPECT_TRUE(ja.status.allocation.empty());
  EXPECT_EQ(ja.status.last_checkpoint, 2500);
  EXPECT_EQ(ja.status.stop_at, -1);
  EXPECT_EQ(ja.status.evictions, std::vector<Millis>{2700});
  EXPECT_EQ(MustGet(b).status.priority_class, "P0");
  EXPECT_EQ(MustGet(b).spec.priority_class, "P1");  // as submitted

  Event fail = JobEvent(b, EventKind::kFailed, 3000, "agent");
  fail.message = "exit code 137";
  MustAppend({JobEvent(a, EventKind::kHeld, 2800, "alice"), fail});
  EXPECT_EQ(MustGet(a).status.state, job::JobState::kHeld);
  StoredJob jb = MustGet(b);
  EXPECT_EQ(jb.status.state, job::JobState::kFailed);
  EXPECT_EQ(jb.status.end_time, 3000);
  EXPECT_EQ(jb.status.message, "exit code 137");
  EXPECT_TRUE(jb.status.allocation.empty());

  Result<std::vector<Event>> events = store_->EventsSince(4, 100);
  ASSERT_TRUE(events.ok()) << events.status().message();
  std::vector<EventKind> kinds;
  for (const Event& e : *events) kinds.push_back(e.kind);
  EXPECT_EQ(kinds, (std::vector<EventKind>{EventKind::kCheckpointed, EventKind::kEvictionSignalled,
                                           EventKind::kPriorityChanged, EventKind::kEvicted,
                                           EventKind::kHeld, EventKind::kFailed}));
  EXPECT_EQ((*events)[1].stop_at, 2700);
  EXPECT_EQ((*events)[1].message, "evicted for job 5");
  EXPECT_EQ((*events)[2].priority_class, "P0");
  EXPECT_EQ((*events)[3].state, job::JobState::kPending);
  EXPECT_EQ((*events)[5].actor, "agent");
  // The started event keeps its allocation.
  Result<std::vector<Event>> first = store_->EventsSince(2, 1);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE((*first)[0].allocation == On("h800-0"));
}

TEST_P(StoreTest, AppendIsAllOrNothing) {
  const JobId a = MustSubmit(Spec("a"));
  const std::uint64_t seq = store_->LastSeq();
  // The second start of the same job is refused: the first is not recorded either.
  Result<std::vector<Event>> r = store_->Append({Start(a, 10, "h800-0"), Start(a, 11, "h800-1")});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "events[1]: job 1 (started): job is running; only a pending job can start");
  EXPECT_EQ(r.status().code(), StatusCode::kConflict);
  EXPECT_EQ(r.status().field(), "events[1]");
  EXPECT_EQ(MustGet(a).status.state, job::JobState::kPending);
  EXPECT_EQ(store_->LastSeq(), seq);
  Result<std::vector<Event>> none = store_->EventsSince(seq, 10);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());

  r = store_->Append({JobEvent(a, EventKind::kHeld, 5), JobEvent(42, EventKind::kHeld, 5)});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "events[1]: no job 42");
  EXPECT_EQ(MustGet(a).status.state, job::JobState::kPending);
  // The store still works after a refused batch.
  MustAppend({Start(a, 12, "h800-2")});
  EXPECT_EQ(MustGet(a).status.state, job::JobState::kRunning);
}

TEST_P(StoreTest, BadInputNamesTheField) {
  job::JobSpec spec = Spec("bad");
  spec.groups[0].count = 0;
  Result<Submitted> r = store_->Submit(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "groups[0].tasks: must be at least 1, got 0");

  job::JobSpec binary = Spec("binary");
  binary.labels["blob"] = "\xff";
  r = store_->Submit(binary);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "labels.blob: is not valid UTF-8");

  job::JobSpec no_queue = Spec("q");
  no_queue.queue.clear();
  Result<std::vector<Submitted>> batch = store_->SubmitBatch({Spec("ok"), no_queue});
  ASSERT_FALSE(batch.ok());
  EXPECT_EQ(batch.status().message(), "jobs[1].queue: must not be empty");
  EXPECT_EQ(store_->LastSeq(), 0u);  // nothing of the batch was recorded

  Result<std::vector<Event>> events = store_->Append({JobEvent(1, EventKind::kSubmitted, 0)});
  ASSERT_FALSE(events.ok());
  EXPECT_EQ(events.status().message(),
            "events[0].kind: 'submitted' is recorded by Submit, not appended");
  events = store_->Append({});
  EXPECT_EQ(events.status().message(), "events: give at least one event");

  QueueQuotaOverride q;
  q.queue = "training";
  q.quota["H800"].nominal = MilliGpu(-8000);
  Result<Event> qe = store_->SetQueueQuota(q);
  ASSERT_FALSE(qe.ok());
  EXPECT_EQ(qe.status().message(), "quota.H800.nominal_milli: must not be negative, got -8000");
  Result<Event> ne = store_->SetNodeState({"", NodeAdminState::kCordoned, "", 0, "admin"});
  ASSERT_FALSE(ne.ok());
  EXPECT_EQ(ne.status().message(), "node: must not be empty");
}

TEST_P(StoreTest, CursorPaging) {
  std::vector<job::JobSpec> specs;
  for (int i = 0; i < 25; ++i) specs.push_back(Spec("job-" + std::to_string(i)));
  Result<std::vector<Submitted>> r = store_->SubmitBatch(specs);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->size(), 25u);
  std::vector<std::size_t> pages;
  std::vector<std::uint64_t> seqs;
  std::uint64_t cursor = 0;
  for (;;) {
    Result<std::vector<Event>> page = store_->EventsSince(cursor, 10);
    ASSERT_TRUE(page.ok()) << page.status().message();
    if (page->empty()) break;
    pages.push_back(page->size());
    for (const Event& e : *page) seqs.push_back(e.seq);
    cursor = page->back().seq;
  }
  EXPECT_EQ(pages, (std::vector<std::size_t>{10, 10, 5}));
  ASSERT_EQ(seqs.size(), 25u);
  for (std::size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ(seqs[i], i + 1);
  // Job ids follow the batch's order.
  for (std::size_t i = 0; i < r->size(); ++i) {
    EXPECT_EQ((*r)[i].id, i + 1);
    EXPECT_EQ(MustGet((*r)[i].id).spec.name, "job-" + std::to_string(i));
  }
  Result<std::vector<Event>> past_end = store_->EventsSince(1000, 10);
  ASSERT_TRUE(past_end.ok());
  EXPECT_TRUE(past_end->empty());
}

TEST_P(StoreTest, IdempotencyKeyRecordsOnce) {
  job::JobSpec spec = Spec("retry");
  spec.idempotency_key = "req-7";
  Result<Submitted> first = store_->Submit(spec);
  ASSERT_TRUE(first.ok()) << first.status().message();
  Result<Submitted> again = store_->Submit(spec);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(again->id, first->id);
  EXPECT_TRUE(again->duplicate);
  EXPECT_EQ(again->seq, 0u);
  // Another user's key is another key.
  job::JobSpec other = spec;
  other.user = "bob";
  Result<Submitted> bob = store_->Submit(other);
  ASSERT_TRUE(bob.ok());
  EXPECT_FALSE(bob->duplicate);
  EXPECT_NE(bob->id, first->id);
  // Within one batch too.
  job::JobSpec fresh = Spec("fresh");
  fresh.idempotency_key = "req-8";
  Result<std::vector<Submitted>> batch = store_->SubmitBatch({fresh, fresh, spec});
  ASSERT_TRUE(batch.ok()) << batch.status().message();
  EXPECT_FALSE((*batch)[0].duplicate);
  EXPECT_TRUE((*batch)[1].duplicate);
  EXPECT_EQ((*batch)[1].id, (*batch)[0].id);
  EXPECT_TRUE((*batch)[2].duplicate);
  EXPECT_EQ((*batch)[2].id, first->id);
  Result<Snapshot> snap = store_->Load();
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->jobs.size(), 3u);
}

TEST_P(StoreTest, QueueQuotasAndNodeStates) {
  QueueQuotaOverride q;
  q.queue = "training";
  q.quota["H800"] = QuotaSpec{MilliGpu(64000), MilliGpu(16000), std::nullopt, std::nullopt};
  q.time = 500;
  q.actor = "admin";
  Result<Event> e = store_->SetQueueQuota(q);
  ASSERT_TRUE(e.ok()) << e.status().message();
  EXPECT_EQ(e->kind, EventKind::kQueueQuotaChanged);
  EXPECT_EQ(e->target, "training");
  EXPECT_EQ(e->message, R"({"H800":{"borrowing_limit_milli":16000,"nominal_milli":64000}})");
  QueueQuotaOverride q2 = q;
  q2.queue = "batch";
  ASSERT_TRUE(store_->SetQueueQuota(q2).ok());
  ASSERT_TRUE(store_->ResetQueueQuota("batch", 600, "admin").ok());

  ASSERT_TRUE(
      store_->SetNodeState({"h800-1", NodeAdminState::kCordoned, "bad fan", 700, "ops"}).ok());
  ASSERT_TRUE(store_->SetNodeState({"h800-2", NodeAdminState::kCordoned, "", 710, "ops"}).ok());
  ASSERT_TRUE(
      store_->SetNodeState({"h800-2", NodeAdminState::kDraining, "reboot", 720, "ops"}).ok());
  ASSERT_TRUE(store_->SetNodeState({"h800-1", NodeAdminState::kSchedulable, "", 730, "ops"}).ok());

  Result<Snapshot> snap = store_->Load();
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  ASSERT_EQ(snap->queue_quotas.size(), 1u);
  EXPECT_EQ(snap->queue_quotas[0].queue, "training");
  EXPECT_EQ(snap->queue_quotas[0].quota.at("H800").nominal, MilliGpu(64000));
  EXPECT_EQ(snap->queue_quotas[0].quota.at("H800").borrowing_limit, MilliGpu(16000));
  EXPECT_EQ(snap->queue_quotas[0].time, 500);
  // Each node's last state, schedulable too: an uncordon must override a configured cordon.
  ASSERT_EQ(snap->nodes.size(), 2u);
  EXPECT_EQ(snap->nodes[0].node, "h800-1");
  EXPECT_EQ(snap->nodes[0].state, NodeAdminState::kSchedulable);
  EXPECT_EQ(snap->nodes[0].time, 730);
  EXPECT_EQ(snap->nodes[0].actor, "ops");
  EXPECT_EQ(snap->nodes[1].node, "h800-2");
  EXPECT_EQ(snap->nodes[1].state, NodeAdminState::kDraining);
  EXPECT_EQ(snap->nodes[1].reason, "reboot");
  EXPECT_EQ(snap->last_seq, 7u);

  Result<std::vector<Event>> events = store_->EventsSince(0, 100);
  ASSERT_TRUE(events.ok());
  std::vector<std::string> seen;
  for (const Event& ev : *events)
    seen.push_back(std::string(EventKindName(ev.kind)) + " " + ev.target);
  EXPECT_EQ(seen, (std::vector<std::string>{
                      "queue_quota_changed training", "queue_quota_changed batch",
                      "queue_quota_changed batch", "node_cordoned h800-1", "node_cordoned h800-2",
                      "node_draining h800-2", "node_uncordoned h800-1"}));
}

// A node's health changes are events only, written in one call, in order, with their seq; a bad
// one names its field and nothing of the call is written.
TEST_P(StoreTest, NodeHealthEventsAreRecorded) {
  Event ready;
  ready.time = 100;
  ready.kind = EventKind::kNodeReady;
  ready.target = "n-0";
  ready.actor = "agent";
  ready.message = "agent at 10.0.0.5 with 8 GPU(s)";
  Event lost = ready;
  lost.time = 200;
  lost.kind = EventKind::kNodeLost;
  lost.target = "n-1";
  lost.actor = "scheduler";
  lost.message = "no word from its agent for 40s";
  Result<std::vector<Event>> written = store_->RecordNodeHealth({ready, lost});
  ASSERT_TRUE(written.ok()) << written.status().message();
  ASSERT_EQ(written->size(), 2u);
  EXPECT_LT((*written)[0].seq, (*written)[1].seq);

  Event job_event = lost;
  job_event.kind = EventKind::kCancelled;
  Result<std::vector<Event>> refused = store_->RecordNodeHealth({ready, job_event});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().field(), "events[1].kind");
  Event unnamed = lost;
  unnamed.target.clear();
  EXPECT_EQ(store_->RecordNodeHealth({unnamed}).status().field(), "events[0].target");

  Result<std::vector<Event>> events = store_->EventsSince(0, 100);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[0].kind, EventKind::kNodeReady);
  EXPECT_EQ((*events)[0].target, "n-0");
  EXPECT_EQ((*events)[0].message, "agent at 10.0.0.5 with 8 GPU(s)");
  EXPECT_EQ((*events)[1].kind, EventKind::kNodeLost);
  EXPECT_EQ((*events)[1].actor, "scheduler");
  EXPECT_EQ((*events)[1].time, 200);
}

TEST_P(StoreTest, LoadWithoutFinishedJobs) {
  const JobId a = MustSubmit(Spec("a"));
  const JobId b = MustSubmit(Spec("b"));
  const JobId c = MustSubmit(Spec("c"));
  MustAppend({Start(a, 10, "n0"), JobEvent(a, EventKind::kCompleted, 20),
              JobEvent(b, EventKind::kCancelled, 15, "alice"), Start(c, 16, "n1")});
  Result<Snapshot> all = store_->Load();
  ASSERT_TRUE(all.ok()) << all.status().message();
  EXPECT_EQ(all->jobs.size(), 3u);
  EXPECT_EQ(all->last_job_id, 3u);
  EXPECT_EQ(all->last_seq, 7u);
  Result<Snapshot> active = store_->Load({.include_finished = false});
  ASSERT_TRUE(active.ok()) << active.status().message();
  ASSERT_EQ(active->jobs.size(), 1u);
  EXPECT_EQ(active->jobs[0].id, c);
  EXPECT_EQ(active->jobs[0].status.state, job::JobState::kRunning);
  EXPECT_TRUE(active->jobs[0].status.allocation == On("n1"));
  EXPECT_EQ(active->last_job_id, 3u);
}

TEST_P(StoreTest, LoadHandsTheJobsOverInBatches) {
  for (int i = 0; i < 5; ++i) MustSubmit(Spec("j" + std::to_string(i)));
  MustAppend({Start(2, 10, "n0"), JobEvent(4, EventKind::kCancelled, 20, "alice")});
  std::vector<StoredJob> seen;
  Result<Snapshot> snap =
      store_->Load({.include_finished = false, .each_batch = [&](std::span<StoredJob> batch) {
                      for (StoredJob& job : batch) seen.push_back(std::move(job));
                      return Status::Ok();
                    }});
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  EXPECT_TRUE(snap->jobs.empty());
  EXPECT_EQ(snap->last_job_id, 5u);
  std::vector<JobId> ids;
  for (const StoredJob& job : seen) ids.push_back(job.id);
  EXPECT_EQ(ids, (std::vector<JobId>{1, 2, 3, 5}));
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_TRUE(seen[0].spec == Spec("j0"));
  EXPECT_TRUE(seen[1].status.allocation == On("n0"));
  // An error of the consumer ends the load with it.
  Result<Snapshot> failed = store_->Load(
      {.each_batch = [](std::span<StoredJob>) { return Status::Unavailable("no room"); }});
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(failed.status().message(), "no room");
}

// Every commit's events reach the commit listener (the server's event feed) once, in seq order;
// a submission made without waiting is answered once committed, its event published.
TEST_P(StoreTest, TheCommitListenerGetsEveryCommittedEventInOrder) {
  std::mutex mu;
  std::vector<std::uint64_t> seen;
  store_->SetCommitListener([&](std::span<const Event> events) {
    std::lock_guard lock(mu);
    for (const Event& e : events) seen.push_back(e.seq);
  });
  MustSubmit(Spec("a"));
  MustSubmit(Spec("b"));
  std::promise<Result<Submitted>> answered;
  store_->SubmitAsync(Spec("c"), [&](Result<Submitted> r) { answered.set_value(std::move(r)); });
  const Result<Submitted> c = answered.get_future().get();
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->seq, 3u);
  std::lock_guard lock(mu);
  EXPECT_EQ(seen, (std::vector<std::uint64_t>{1, 2, 3}));
  EXPECT_EQ(store_->LastSeq(), 3u);
}

TEST_P(StoreTest, ConcurrentSubmittersGetUniqueIncreasingSeqs) {
  constexpr int kThreads = 16;
  constexpr int kPerThread = 100;
  std::vector<std::vector<Submitted>> acks(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        Result<Submitted> r = store_->Submit(Spec(JobName(t, i), "user-" + std::to_string(t)));
        if (!r.ok()) {
          ADD_FAILURE() << r.status().message();
          return;
        }
        acks[t].push_back(*r);
      }
    });
  }
  for (std::thread& t : threads) t.join();

  std::set<JobId> ids;
  std::set<std::uint64_t> seqs;
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_EQ(acks[t].size(), static_cast<std::size_t>(kPerThread));
    for (std::size_t i = 0; i < acks[t].size(); ++i) {
      ids.insert(acks[t][i].id);
      seqs.insert(acks[t][i].seq);
      // One thread's submissions are acknowledged in order.
      if (i > 0) {
        EXPECT_GT(acks[t][i].seq, acks[t][i - 1].seq);
      }
    }
  }
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(kThreads * kPerThread));
  EXPECT_EQ(seqs.size(), static_cast<std::size_t>(kThreads * kPerThread));

  Result<Snapshot> snap = store_->Load();
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  ASSERT_EQ(snap->jobs.size(), static_cast<std::size_t>(kThreads * kPerThread));
  for (const StoredJob& job : snap->jobs) {
    const std::string& user = job.spec.user;
    const int t = std::stoi(user.substr(5));
    const auto it = std::find_if(acks[t].begin(), acks[t].end(),
                                 [&](const Submitted& s) { return s.id == job.id; });
    ASSERT_NE(it, acks[t].end());
    EXPECT_EQ(job.spec.name, JobName(t, static_cast<int>(it - acks[t].begin())));
  }
  Result<std::vector<Event>> events = store_->EventsSince(0, 100'000);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), static_cast<std::size_t>(kThreads * kPerThread));
  for (std::size_t i = 1; i < events->size(); ++i) {
    EXPECT_GT((*events)[i].seq, (*events)[i - 1].seq);
  }
  EXPECT_EQ(store_->LastSeq(), events->back().seq);
}

INSTANTIATE_TEST_SUITE_P(Stores, StoreTest, ::testing::Values("memory", "sqlite", "postgres"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// ---- The SQLite store only ----

// Everything a snapshot holds, compared.
void ExpectSameSnapshot(const Snapshot& a, const Snapshot& b) {
  ASSERT_EQ(a.jobs.size(), b.jobs.size());
  for (std::size_t i = 0; i < a.jobs.size(); ++i) {
    EXPECT_EQ(a.jobs[i].id, b.jobs[i].id);
    EXPECT_TRUE(a.jobs[i].spec == b.jobs[i].spec) << "job " << a.jobs[i].id;
    EXPECT_TRUE(a.jobs[i].status == b.jobs[i].status) << "job " << a.jobs[i].id;
  }
  ASSERT_EQ(a.queue_quotas.size(), b.queue_quotas.size());
  for (std::size_t i = 0; i < a.queue_quotas.size(); ++i) {
    EXPECT_EQ(a.queue_quotas[i].queue, b.queue_quotas[i].queue);
    EXPECT_EQ(QuotaToJson(a.queue_quotas[i].quota), QuotaToJson(b.queue_quotas[i].quota));
  }
  ASSERT_EQ(a.nodes.size(), b.nodes.size());
  for (std::size_t i = 0; i < a.nodes.size(); ++i) {
    EXPECT_EQ(a.nodes[i].node, b.nodes[i].node);
    EXPECT_EQ(a.nodes[i].state, b.nodes[i].state);
    EXPECT_EQ(a.nodes[i].reason, b.nodes[i].reason);
  }
  EXPECT_EQ(a.last_seq, b.last_seq);
  EXPECT_EQ(a.last_job_id, b.last_job_id);
}

TEST(SqliteStore, RecoversEverythingAfterReopening) {
  TempDir dir;
  Snapshot before;
  std::vector<Event> events_before;
  {
    std::unique_ptr<Store> store = OpenOrDie(dir.path());
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < 10; ++i) ASSERT_TRUE(store->Submit(Spec("j" + std::to_string(i))).ok());
    Event prio = JobEvent(4, EventKind::kPriorityChanged, 50, "admin");
    prio.priority_class = "P0";
    ASSERT_TRUE(store
                    ->Append({Start(1, 10, "h800-0"), JobEvent(1, EventKind::kCheckpointed, 20),
                              Start(2, 10, "h800-1"), JobEvent(2, EventKind::kEvicted, 30),
                              JobEvent(3, EventKind::kHeld, 40), prio,
                              JobEvent(5, EventKind::kCancelled, 60, "alice")})
                    .ok());
    QueueQuotaOverride q;
    q.queue = "training";
    q.quota["gpu"] = QuotaSpec{MilliGpu(16000), std::nullopt, MilliGpu(0), MilliGpu(32000)};
    ASSERT_TRUE(store->SetQueueQuota(q).ok());
    ASSERT_TRUE(store->SetNodeState({"h800-3", NodeAdminState::kCordoned, "ecc", 70, "ops"}).ok());
    // A failed run started again, and the queues' fair-share usage.
    ASSERT_TRUE(store->Append({Start(6, 80, "h800-2"), JobEvent(6, EventKind::kRetried, 90)}).ok());
    ASSERT_TRUE(store->SaveQueueUsage({{"training", 1.5e9, 95}, {"batch", 2.5, 95}}).ok());
    Result<Snapshot> snap = store->Load();
    ASSERT_TRUE(snap.ok()) << snap.status().message();
    before = *snap;
    events_before = *store->EventsSince(0, 1000);
  }
  std::unique_ptr<Store> store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  Result<Snapshot> after = store->Load();
  ASSERT_TRUE(after.ok()) << after.status().message();
  ExpectSameSnapshot(before, *after);
  EXPECT_EQ(after->jobs[0].status.state, job::JobState::kRunning);
  EXPECT_EQ(after->jobs[1].status.evictions, std::vector<Millis>{30});
  EXPECT_EQ(after->jobs[3].status.priority_class, "P0");
  EXPECT_EQ(after->jobs[5].status.retries, 1);
  EXPECT_EQ(after->jobs[5].status.state, job::JobState::kPending);
  ASSERT_EQ(after->queue_usage.size(), 2u);
  EXPECT_EQ(after->queue_usage[1].queue, "training");  // by name
  EXPECT_EQ(after->queue_usage[1].usage, 1.5e9);
  EXPECT_EQ(after->queue_usage[1].time, 95);
  EXPECT_EQ(store->LastSeq(), before.last_seq);
  Result<std::vector<Event>> events_after = store->EventsSince(0, 1000);
  ASSERT_TRUE(events_after.ok());
  EXPECT_TRUE(*events_after == events_before);
  // Ids and seqs go on from where they stood.
  Result<Submitted> next = store->Submit(Spec("next"));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->id, 11u);
  EXPECT_EQ(next->seq, before.last_seq + 1);
}

TEST(SqliteStore, LoadsManyJobsExactly) {
  // Enough jobs for Load's parallel decoding of several chunks.
  TempDir dir;
  std::unique_ptr<Store> store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  constexpr int kJobs = 40'000;
  std::vector<job::JobSpec> specs;
  for (int i = 0; i < kJobs; ++i) {
    job::JobSpec s = Spec(JobName(i % 7, i), "user-" + std::to_string(i % 13));
    s.submit_time = i;
    if (i % 3 == 0) s.idempotency_key = "k" + std::to_string(i);
    specs.push_back(std::move(s));
  }
  Result<std::vector<Submitted>> r = store->SubmitBatch(specs);
  ASSERT_TRUE(r.ok()) << r.status().message();
  std::vector<Event> events;
  for (int i = 0; i < kJobs; i += 5)
    events.push_back(Start((*r)[i].id, 100, "n" + std::to_string(i)));
  for (int i = 0; i < kJobs; i += 10)
    events.push_back(JobEvent((*r)[i].id, EventKind::kEvicted, 200));
  ASSERT_TRUE(store->Append(events).ok());
  Result<Snapshot> snap = store->Load();
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  ASSERT_EQ(snap->jobs.size(), static_cast<std::size_t>(kJobs));
  for (int i = 0; i < kJobs; ++i) {
    const StoredJob& job = snap->jobs[i];
    ASSERT_EQ(job.id, (*r)[i].id);
    ASSERT_TRUE(job.spec == specs[i]) << i;
    if (i % 10 == 0) {
      ASSERT_EQ(job.status.state, job::JobState::kPending) << i;
      ASSERT_EQ(job.status.evictions, std::vector<Millis>{200}) << i;
    } else if (i % 5 == 0) {
      ASSERT_EQ(job.status.state, job::JobState::kRunning) << i;
      ASSERT_TRUE(job.status.allocation == On("n" + std::to_string(i))) << i;
    } else {
      ASSERT_EQ(job.status.state, job::JobState::kPending) << i;
      ASSERT_TRUE(job.status.allocation.empty()) << i;
    }
  }
  Result<Snapshot> active = store->Load({.include_finished = false});
  ASSERT_TRUE(active.ok());
  EXPECT_EQ(active->jobs.size(), static_cast<std::size_t>(kJobs));
  // The same jobs a batch at a time (several batches, read while the previous one is handed on).
  std::size_t batches = 0, n = 0;
  Result<Snapshot> batched = store->Load({.each_batch = [&](std::span<StoredJob> batch) {
    ++batches;
    for (StoredJob& job : batch) {
      if (job.id != (*r)[n].id || !(job.spec == specs[n]) ||
          !(job.status == snap->jobs[n].status)) {
        return Status::Internal("job " + std::to_string(job.id) + " differs");
      }
      ++n;
    }
    return Status::Ok();
  }});
  ASSERT_TRUE(batched.ok()) << batched.status().message();
  EXPECT_EQ(n, static_cast<std::size_t>(kJobs));
  EXPECT_GT(batches, 2u);
}

TEST(SqliteStore, AcknowledgedSubmissionsSurviveSigkill) {
  TempDir dir;
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child: 4 threads submit until killed; each acknowledged id goes to the pipe.
    ::close(fds[0]);
    Result<std::unique_ptr<Store>> store = OpenSqliteStore({dir.path(), 1024});
    if (!store.ok()) ::_exit(2);
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int i = 0;; ++i) {
          Result<Submitted> r = (*store)->Submit(Spec(JobName(t, i), "u" + std::to_string(t)));
          if (!r.ok()) ::_exit(3);
          const std::uint64_t id = r->id;
          if (::write(fds[1], &id, sizeof id) != sizeof id) ::_exit(4);
        }
      });
    }
    for (std::thread& t : threads) t.join();
    ::_exit(0);
  }
  ::close(fds[1]);
  std::vector<std::uint64_t> acked;
  auto read_one = [&] {
    std::uint64_t id = 0;
    std::size_t got = 0;
    while (got < sizeof id) {
      const ssize_t n = ::read(fds[0], reinterpret_cast<char*>(&id) + got, sizeof id - got);
      if (n <= 0) return false;
      got += static_cast<std::size_t>(n);
    }
    acked.push_back(id);
    return true;
  };
  while (acked.size() < 300 && read_one()) {
  }
  ASSERT_EQ(::kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  while (read_one()) {  // what it acknowledged before it died
  }
  ::close(fds[0]);
  ASSERT_GE(acked.size(), 300u);

  std::unique_ptr<Store> store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  Result<Snapshot> snap = store->Load();
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  std::set<JobId> present;
  for (const StoredJob& job : snap->jobs) {
    EXPECT_TRUE(present.insert(job.id).second);
    EXPECT_EQ(job.status.state, job::JobState::kPending);
  }
  std::set<std::uint64_t> unique_acked(acked.begin(), acked.end());
  EXPECT_EQ(unique_acked.size(), acked.size());
  for (std::uint64_t id : acked)
    EXPECT_TRUE(present.count(id)) << "acknowledged job " << id << " lost";
  EXPECT_GE(snap->jobs.size(), acked.size());
  // Every job has its submitted event.
  Result<std::vector<Event>> events = store->EventsSince(0, 1'000'000);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->size(), snap->jobs.size());
}

// Runs one SQL statement on the database of `dir` behind the store's back.
void Sql(const std::string& dir, const std::string& sql) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir + "/arbiter.db").c_str(), &db), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
}

TEST(SqliteStore, RefusesANewerSchema) {
  TempDir dir;
  { ASSERT_NE(OpenOrDie(dir.path()), nullptr); }
  Sql(dir.path(), "UPDATE schema_version SET version = 3");
  Result<std::unique_ptr<Store>> store = OpenSqliteStore({dir.path(), 1024});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().message(),
            "store: " + dir.path() +
                "/arbiter.db has schema version 3, newer than this build's 2: it was written by a "
                "newer Arbiter; run that version (or a newer one), or restore a backup");
  // Nothing was changed: the version is still 3 and the store opens once it is 2 again.
  Sql(dir.path(), "UPDATE schema_version SET version = 2");
  EXPECT_NE(OpenOrDie(dir.path()), nullptr);
}

TEST(SqliteStore, ACorruptRowIsAnErrorNamingTheJob) {
  TempDir dir;
  {
    std::unique_ptr<Store> store = OpenOrDie(dir.path());
    ASSERT_NE(store, nullptr);
    for (int i = 0; i < 3; ++i) ASSERT_TRUE(store->Submit(Spec("j" + std::to_string(i))).ok());
  }
  // The record cut short after its format byte.
  Sql(dir.path(), "UPDATE jobs SET spec = substr(spec, 1, 1) WHERE id = 2");
  std::unique_ptr<Store> store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  Result<Snapshot> snap = store->Load();
  ASSERT_FALSE(snap.ok());
  EXPECT_EQ(snap.status().message(), "store: job 2: spec.name: record cut short at byte 2");
  Result<std::optional<StoredJob>> job = store->GetJob(2);
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().message(), snap.status().message());
  EXPECT_TRUE(store->GetJob(1).ok());
}

// A database as version 1 of the schema wrote it (jobs' spec and allocation as JSON text): jobs
// 1 (pending, with an idempotency key), 2 (running on h800-0) and 3 (completed), their events,
// node h800-3 cordoned, and ids allocated up to 7 (as if 4 to 7 had been deleted).
void WriteVersion1Store(const std::string& dir, const std::string& job2_spec = "") {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir + "/arbiter.db").c_str(), &db), SQLITE_OK);
  auto exec = [&](const std::string& sql) {
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << (err ? err : "");
    sqlite3_free(err);
  };
  exec(R"sql(
PRAGMA journal_mode=WAL;
CREATE TABLE schema_version (version INTEGER NOT NULL);
INSERT INTO schema_version (version) VALUES (1);
CREATE TABLE jobs (
  id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL, user TEXT NOT NULL,
  queue TEXT NOT NULL, priority_class TEXT NOT NULL, submit_time INTEGER NOT NULL,
  idempotency_key TEXT, spec TEXT NOT NULL, state TEXT NOT NULL, allocation TEXT,
  start_time INTEGER, first_start_time INTEGER, last_checkpoint INTEGER, stop_at INTEGER,
  evictions TEXT NOT NULL DEFAULT '[]', end_time INTEGER, message TEXT NOT NULL DEFAULT '');
CREATE UNIQUE INDEX jobs_idempotency ON jobs (user, idempotency_key)
  WHERE idempotency_key IS NOT NULL;
CREATE INDEX jobs_active ON jobs (id) WHERE state IN ('pending', 'held', 'running');
CREATE TABLE events (
  seq INTEGER PRIMARY KEY AUTOINCREMENT, time INTEGER NOT NULL, kind TEXT NOT NULL,
  job INTEGER NOT NULL DEFAULT 0, target TEXT NOT NULL DEFAULT '', actor TEXT NOT NULL DEFAULT '',
  message TEXT NOT NULL DEFAULT '', priority_class TEXT NOT NULL DEFAULT '', allocation TEXT,
  stop_at INTEGER, state TEXT);
CREATE TABLE queue_quotas (queue TEXT PRIMARY KEY, quota TEXT NOT NULL, time INTEGER NOT NULL,
  actor TEXT NOT NULL);
CREATE TABLE node_states (node TEXT PRIMARY KEY, state TEXT NOT NULL, reason TEXT NOT NULL,
  time INTEGER NOT NULL, actor TEXT NOT NULL);
)sql");
  sqlite3_stmt* s = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db,
                               "INSERT INTO jobs (id, name, user, queue, priority_class, "
                               "submit_time, idempotency_key, spec, state, allocation, start_time, "
                               "first_start_time, evictions, end_time, message) VALUES (?1, ?2, "
                               "'alice', 'training', 'P1', 1000, ?3, ?4, ?5, ?6, ?7, ?7, ?8, ?9, "
                               "?10)",
                               -1, &s, nullptr),
            SQLITE_OK);
  for (int id = 1; id <= 3; ++id) {
    job::JobSpec spec = Spec("j" + std::to_string(id));
    if (id == 1) spec.idempotency_key = "key-1";
    std::string text = EncodeJobSpec(spec);
    if (id == 2 && !job2_spec.empty()) text = job2_spec;
    const std::string allocation = Dump(AllocationToJson(On("h800-0")));
    const char* state = id == 1 ? "pending" : id == 2 ? "running" : "completed";
    sqlite3_bind_int64(s, 1, id);
    sqlite3_bind_text(s, 2, spec.name.c_str(), -1, SQLITE_TRANSIENT);
    if (id == 1) {
      sqlite3_bind_text(s, 3, "key-1", -1, SQLITE_STATIC);
    } else {
      sqlite3_bind_null(s, 3);
    }
    sqlite3_bind_text(s, 4, text.c_str(), -1, SQLITE_TRANSIENT);
    sqlite3_bind_text(s, 5, state, -1, SQLITE_STATIC);
    if (id == 2) {
      sqlite3_bind_text(s, 6, allocation.c_str(), -1, SQLITE_TRANSIENT);
    } else {
      sqlite3_bind_null(s, 6);
    }
    if (id == 1) {
      sqlite3_bind_null(s, 7);
    } else {
      sqlite3_bind_int64(s, 7, 2000);
    }
    sqlite3_bind_text(s, 8, id == 1 ? "[1500]" : "[]", -1, SQLITE_STATIC);
    if (id == 3) {
      sqlite3_bind_int64(s, 9, 3000);
      sqlite3_bind_text(s, 10, "done", -1, SQLITE_STATIC);
    } else {
      sqlite3_bind_null(s, 9);
      sqlite3_bind_text(s, 10, "", -1, SQLITE_STATIC);
    }
    EXPECT_EQ(sqlite3_step(s), SQLITE_DONE) << sqlite3_errmsg(db);
    sqlite3_reset(s);
    sqlite3_clear_bindings(s);
  }
  sqlite3_finalize(s);
  exec(R"sql(
INSERT INTO events (time, kind, job, actor, state) VALUES
  (1000, 'submitted', 1, 'alice', 'pending'), (1000, 'submitted', 2, 'alice', 'pending'),
  (1000, 'submitted', 3, 'alice', 'pending');
INSERT INTO node_states VALUES ('h800-3', 'cordoned', 'ecc', 900, 'ops');
UPDATE sqlite_sequence SET seq = 7 WHERE name = 'jobs';
)sql");
  sqlite3_close(db);
}

TEST(SqliteStore, MigratesAVersion1Store) {
  TempDir dir;
  WriteVersion1Store(dir.path());
  std::unique_ptr<Store> store = OpenOrDie(dir.path());
  ASSERT_NE(store, nullptr);
  Result<Snapshot> snap = store->Load();
  ASSERT_TRUE(snap.ok()) << snap.status().message();
  ASSERT_EQ(snap->jobs.size(), 3u);
  job::JobSpec first = Spec("j1");
  first.idempotency_key = "key-1";
  EXPECT_TRUE(snap->jobs[0].spec == first);
  EXPECT_TRUE(snap->jobs[1].spec == Spec("j2"));
  EXPECT_TRUE(snap->jobs[2].spec == Spec("j3"));
  EXPECT_EQ(snap->jobs[0].status.state, job::JobState::kPending);
  EXPECT_EQ(snap->jobs[0].status.evictions, std::vector<Millis>{1500});
  EXPECT_EQ(snap->jobs[1].status.state, job::JobState::kRunning);
  EXPECT_TRUE(snap->jobs[1].status.allocation == On("h800-0"));
  EXPECT_EQ(snap->jobs[1].status.start_time, 2000);
  EXPECT_EQ(snap->jobs[2].status.state, job::JobState::kCompleted);
  EXPECT_TRUE(snap->jobs[2].status.allocation.empty());
  EXPECT_EQ(snap->jobs[2].status.end_time, 3000);
  EXPECT_EQ(snap->jobs[2].status.message, "done");
  ASSERT_EQ(snap->nodes.size(), 1u);
  EXPECT_EQ(snap->nodes[0].state, NodeAdminState::kCordoned);
  EXPECT_EQ(snap->last_seq, 3u);
  EXPECT_EQ(snap->last_job_id, 7u);
  // The indexes are back: the active jobs, and the idempotency key.
  Result<Snapshot> active = store->Load({.include_finished = false});
  ASSERT_TRUE(active.ok());
  EXPECT_EQ(active->jobs.size(), 2u);
  Result<Submitted> again = store->Submit(first);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(again->duplicate);
  EXPECT_EQ(again->id, 1u);
  // Ids go on after the last one ever given; the running job can finish.
  Result<Submitted> next = store->Submit(Spec("next"));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->id, 8u);
  EXPECT_EQ(next->seq, 4u);
  ASSERT_TRUE(store->Append({JobEvent(2, EventKind::kCompleted, 4000)}).ok());
  store.reset();

  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir.path() + "/arbiter.db").c_str(), &db), SQLITE_OK);
  auto one = [&](const char* sql) {
    sqlite3_stmt* s = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &s, nullptr), SQLITE_OK) << sql;
    EXPECT_EQ(sqlite3_step(s), SQLITE_ROW) << sql;
    std::string out = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    return out;
  };
  EXPECT_EQ(one("SELECT version FROM schema_version"), "2");
  EXPECT_EQ(one("SELECT group_concat(DISTINCT typeof(spec)) FROM jobs"), "blob");
  EXPECT_EQ(one("SELECT count(*) FROM sqlite_master WHERE name LIKE 'jobs%'"), "3");
  sqlite3_close(db);
}

TEST(SqliteStore, AVersion1RowThatDoesNotDecodeStopsTheMigration) {
  TempDir dir;
  std::string bad = EncodeJobSpec(Spec("j2"));
  bad.replace(bad.find("\"tasks\":2"), 9, "\"tasks\":\"x\"");
  WriteVersion1Store(dir.path(), bad);
  Result<std::unique_ptr<Store>> store = OpenSqliteStore({dir.path(), 1024});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().message(),
            "store: migrate " + dir.path() +
                "/arbiter.db from version 1: job 2: spec.groups[0].tasks: must be an integer, got "
                "\"x\"");
  // Nothing was changed: still version 1, with its JSON.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir.path() + "/arbiter.db").c_str(), &db), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db,
                               "SELECT version, (SELECT typeof(spec) FROM jobs WHERE id = 1) "
                               "FROM schema_version",
                               -1, &s, nullptr),
            SQLITE_OK);
  ASSERT_EQ(sqlite3_step(s), SQLITE_ROW);
  EXPECT_EQ(sqlite3_column_int(s, 0), 1);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(sqlite3_column_text(s, 1))), "text");
  sqlite3_finalize(s);
  sqlite3_close(db);
}

TEST(SqliteStore, RefusesAForeignDatabase) {
  TempDir dir;
  Sql(dir.path(), "CREATE TABLE people (name TEXT)");
  Result<std::unique_ptr<Store>> store = OpenSqliteStore({dir.path(), 1024});
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().message(),
            "store: " + dir.path() +
                "/arbiter.db is not an Arbiter store (it has tables but no schema_version)");
}

TEST(SqliteStore, OneStorePerDirectory) {
  TempDir dir;
  std::unique_ptr<Store> first = OpenOrDie(dir.path());
  ASSERT_NE(first, nullptr);
  Result<std::unique_ptr<Store>> second = OpenSqliteStore({dir.path(), 1024});
  ASSERT_FALSE(second.ok());
  EXPECT_NE(second.status().message().find("is in use (another server"), std::string::npos)
      << second.status().message();
  first.reset();
  EXPECT_NE(OpenOrDie(dir.path()), nullptr);
}

TEST(SqliteStore, WalModeAndSchemaVersionOnDisk) {
  TempDir dir;
  { ASSERT_NE(OpenOrDie(dir.path()), nullptr); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir.path() + "/arbiter.db").c_str(), &db), SQLITE_OK);
  auto one = [&](const char* sql) {
    sqlite3_stmt* s = nullptr;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql, -1, &s, nullptr), SQLITE_OK);
    EXPECT_EQ(sqlite3_step(s), SQLITE_ROW);
    std::string out = reinterpret_cast<const char*>(sqlite3_column_text(s, 0));
    sqlite3_finalize(s);
    return out;
  };
  EXPECT_EQ(one("PRAGMA journal_mode"), "wal");  // persistent in the file
  EXPECT_EQ(one("SELECT version FROM schema_version"), "2");
  sqlite3_close(db);
}

TEST(SqliteStore, OneTransactionPerSubmitWorksToo) {
  TempDir dir;
  std::unique_ptr<Store> store = OpenOrDie(dir.path(), 1);
  ASSERT_NE(store, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 20; ++i) EXPECT_TRUE(store->Submit(Spec(JobName(t, i))).ok());
    });
  }
  for (std::thread& t : threads) t.join();
  Result<Snapshot> snap = store->Load();
  ASSERT_TRUE(snap.ok());
  EXPECT_EQ(snap->jobs.size(), 80u);
  EXPECT_EQ(snap->last_seq, 80u);
}

}  // namespace
}  // namespace arbiter::store
