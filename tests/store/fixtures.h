// Test data shared by the store tests (store_test.cc, postgres_store_test.cc): a job spec, an
// allocation on one node, job events.
#pragma once

#include <cstdint>
#include <string>

#include "store/store.h"

namespace arbiter::store::fixtures {

inline job::JobSpec Spec(const std::string& name, const std::string& user = "alice") {
  job::JobSpec s;
  s.name = name;
  s.user = user;
  s.queue = "training";
  s.priority_class = "P1";
  TaskGroup g;
  g.name = "main";
  g.count = 2;
  g.request.gpu = MilliGpu(8000);
  g.request.cpu = MilliCpu(32000);
  s.groups = {g};
  s.gpu_types = {"H800"};
  s.labels = {{"app", name}};
  s.submit_time = 1000;
  s.checkpoint_interval = 60'000;
  return s;
}

inline job::StoredAllocation On(const std::string& node) {
  job::StoredAllocation a;
  a.gpu_type = "H800";
  for (std::uint32_t t = 0; t < 2; ++t) {
    job::StoredTask task;
    task.index = t;
    task.node = node;
    for (std::uint32_t d = 0; d < 8; ++d) task.devices.push_back({d, MilliGpu(1000), GpuMemMiB(0)});
    a.tasks.push_back(task);
  }
  return a;
}

inline Event JobEvent(JobId job, EventKind kind, Millis time,
                      const std::string& actor = "scheduler") {
  Event e;
  e.job = job;
  e.kind = kind;
  e.time = time;
  e.actor = actor;
  return e;
}

inline Event Start(JobId job, Millis time, const std::string& node) {
  Event e = JobEvent(job, EventKind::kStarted, time);
  e.allocation = On(node);
  return e;
}

}  // namespace arbiter::store::fixtures
