// The preemption storm: on an 8-GPU node that runs an 8-GPU training job (10 hours of work,
// checkpointing every 30 minutes), a 1-GPU top-priority task arrives every 10 minutes and runs for
// 5. Without guards every arrival evicts the training job, which restarts when the task is done,
// never reaches a checkpoint and never finishes. Each guard below is shown stopping the storm.
#include <gtest/gtest.h>

#include <map>

#include "testing/builders.h"

namespace arbiter {
namespace {

constexpr Millis kMinute = 60 * kMillisPerSecond;
constexpr Millis kHour = 60 * kMinute;

struct StormResult {
  bool finished = false;
  Millis finished_at = 0;
  int training_evictions = 0;
  double lost_gpu_hours = 0;
  int tasks_started = 0;
};

// Drives the engine minute by minute for `horizon`: arrivals, completions, checkpoints, cycles.
StormResult RunStorm(const ClusterSpec& spec, const EngineOptions& options,
                     const std::string& task_queue, const std::string& training_queue,
                     Millis horizon, Millis restart_overhead = 0) {
  ClusterState state = testing::MakeState(spec);
  Engine engine(options);
  constexpr JobId kTraining = 1;
  Job training = testing::GpuJob(kTraining, 1, 8000);
  training.name = "training";
  training.queue = *state.FindQueue(training_queue);
  training.priority_class = 1;  // P1
  training.checkpoint_interval = 30 * kMinute;
  training.restart_overhead = restart_overhead;
  const Millis work = 10 * kHour;

  StormResult result;
  std::vector<Job> pending = {training};
  std::map<JobId, Millis> ends;  // running tasks' end times
  Millis progress = 0, saved = 0, last_checkpoint = 0, running_since = -1;
  JobId next_id = 100;
  for (Millis t = 0; t < horizon && !result.finished; t += kMinute) {
    // Training progress and checkpoints.
    if (running_since >= 0 && t > running_since) {
      progress += kMinute;
      if (progress >= work) {
        EXPECT_TRUE(state.Unbind(kTraining, t).ok());
        result.finished = true;
        result.finished_at = t;
        break;
      }
      if (t - last_checkpoint >= training.checkpoint_interval) {
        saved = progress;
        last_checkpoint = t;
        EXPECT_TRUE(state.RecordCheckpoint(kTraining, t).ok());
      }
    }
    for (auto it = ends.begin(); it != ends.end();) {
      if (it->second <= t) {
        EXPECT_TRUE(state.Unbind(it->first, t).ok());
        it = ends.erase(it);
      } else {
        ++it;
      }
    }
    if (t % (10 * kMinute) == 0) {
      Job task = testing::GpuJob(next_id++, 1, 1000);
      task.queue = *state.FindQueue(task_queue);
      task.priority_class = 0;  // P0: "everything is top priority"
      task.submit_time = t;
      pending.push_back(task);
    }
    Plan plan = engine.Schedule(state, pending, t);
    for (const Eviction& e : plan.evictions) {
      if (e.job != kTraining) {  // a task reclaimed by the training job's queue (dropped here)
        ends.erase(e.job);
        continue;
      }
      ++result.training_evictions;
      result.lost_gpu_hours += e.lost_gpu_hours;
      progress = saved;  // back to its last checkpoint
      running_since = -1;
      pending.push_back(training);
    }
    EXPECT_TRUE(state.Apply(plan, pending).ok());
    for (const Bind& b : plan.binds) {
      if (b.job == kTraining) {
        running_since = b.start_after;
        last_checkpoint = b.start_after;
      } else {
        ends[b.job] = b.start_after + 5 * kMinute;
        ++result.tasks_started;
      }
    }
    std::erase_if(pending, [&](const Job& j) { return state.FindRunning(j.id) != nullptr; });
    EXPECT_TRUE(state.CheckInvariants().ok());
  }
  return result;
}

ClusterSpec OneQueue() {
  ClusterSpec spec = testing::Cluster();
  testing::Add(spec, testing::Nodes("n", 1, "H800", 8));
  return spec;
}

TEST(Storm, WithoutGuardsTheTrainingJobIsEvictedForeverAndNeverFinishes) {
  StormResult r = RunStorm(OneQueue(), {}, "default", "default", 48 * kHour);
  EXPECT_FALSE(r.finished);
  EXPECT_GT(r.training_evictions, 250);             // every 10 minutes for two days
  EXPECT_GT(r.lost_gpu_hours, 250 * 8 * 4.0 / 60);  // each time about 4 minutes of 8 GPUs
}

TEST(Storm, ASeparateQueueUnderQuotaBoundsTheFlood) {
  ClusterSpec spec = OneQueue();
  spec.queues = {testing::Queue("org"), testing::Queue("inference", "org"),
                 testing::Queue("training", "org")};
  spec.queues[1].quota["gpu"].nominal = MilliGpu(0);  // the tasks run only on borrowed quota
  spec.queues[2].quota["gpu"].nominal = MilliGpu(8000);
  StormResult r = RunStorm(spec, {}, "inference", "training", 48 * kHour);
  // P0 in another queue cannot evict the training job: its queue is within its guarantee.
  EXPECT_TRUE(r.finished);
  EXPECT_EQ(r.training_evictions, 0);
  EXPECT_LE(r.finished_at, 11 * kHour);
}

TEST(Storm, MinimumBenefitKeepsTheBigJobFromDyingForSmallTasks) {
  EngineOptions options;
  options.preemption.max_loss_per_gpu = kHour;  // at most one GPU-hour lost per GPU gained
  // Restarting costs the job 10 minutes: any eviction loses 8 x 10 GPU-minutes or more, over the
  // threshold for a 1-GPU task. The tasks wait for the job instead.
  StormResult r = RunStorm(OneQueue(), options, "default", "default", 48 * kHour, 10 * kMinute);
  EXPECT_TRUE(r.finished);
  EXPECT_EQ(r.training_evictions, 0);
  // Without the threshold, the same restart overhead makes the storm only costlier.
  StormResult storm = RunStorm(OneQueue(), {}, "default", "default", 48 * kHour, 10 * kMinute);
  EXPECT_FALSE(storm.finished);
}

TEST(Storm, MinimumRuntimeAndEvictionBudgetLetTheJobFinish) {
  ClusterSpec spec = OneQueue();
  spec.priority_classes[1].min_runtime = 2 * kHour;
  spec.priority_classes[1].max_evictions = 2;
  spec.priority_classes[1].eviction_window = 24 * kHour;
  StormResult r = RunStorm(spec, {}, "default", "default", 48 * kHour);
  EXPECT_TRUE(r.finished);
  EXPECT_LE(r.training_evictions, 4);
}

}  // namespace
}  // namespace arbiter
