// Lint: configurations that load but hurt once they run. Each warning has a stable code, the
// field it is about (a path such as `queues[2]` or `priority_classes[1]`) and a message that says
// what is wrong, why it hurts and what to do. The rules and their exact conditions are documented
// in docs/configuration.md, section "Lint".
#pragma once

#include <span>
#include <string>
#include <vector>

#include "arbiter/model.h"
#include "arbiter/state.h"
#include "config/config.h"

namespace arbiter::config {

// The rule codes.
inline constexpr const char* kLintTopClassMajority = "top-class-majority";
inline constexpr const char* kLintHighPriorityQueueWithoutQuota =
    "high-priority-queue-without-quota";
inline constexpr const char* kLintPreemptibleClassWithoutProtection =
    "preemptible-class-without-protection";
inline constexpr const char* kLintPreemptibleJobsWithoutCheckpoints =
    "preemptible-jobs-without-checkpoints";
inline constexpr const char* kLintGuaranteesExceedCapacity = "guarantees-exceed-capacity";
inline constexpr const char* kLintPreemptibleQueueNothingEvicts =
    "preemptible-queue-nothing-evicts";

struct LintWarning {
  std::string code;     // one of the kLint* codes
  std::string field;    // e.g. "queues[2]", "priority_classes[1]", "queues", "jobs"
  std::string message;  // what is wrong, why it hurts, what to do
};

// Checks a loaded configuration (`state` is ClusterState::Create(config.cluster)) and, when
// `jobs` is not empty, the jobs of a jobs file loaded against `state`. Warnings come in a fixed
// order: priority classes, queues, quota against capacity, then the jobs.
std::vector<LintWarning> Lint(const ClusterConfig& config, const ClusterState& state,
                              std::span<const Job> jobs = {});

}  // namespace arbiter::config
