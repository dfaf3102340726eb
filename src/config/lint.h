// Lint: configurations that load but hurt once they run. Each warning has a stable code, the
// field it is about (a path such as `queues[2]` or `priority_classes[1]`) and a message that says
// what is wrong, why it hurts and what to do. The rules and their exact conditions are documented
// in docs/configuration.md, section "Lint".
#pragma once

#include <span>
#include <string>
#include <vector>

#include "arbiter/model.h"
#include "config/config.h"
#include "core/state/cluster_state.h"

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
inline constexpr const char* kLintAgingOvertakesEvictingClass = "aging-overtakes-evicting-class";
inline constexpr const char* kLintAgingWithoutMinRuntime = "aging-without-min-runtime";
inline constexpr const char* kLintAgedJobPassedAgain = "aged-job-passed-again";
inline constexpr const char* kLintMemoryWithoutUnit = "memory-without-unit";
inline constexpr const char* kLintExampleToken = "example-token";
inline constexpr const char* kLintAliasSpelling = "alias-spelling";
inline constexpr const char* kLintHeterogeneityWithoutThroughput =
    "heterogeneity-without-throughput";
inline constexpr const char* kLintTopClassesAlike = "top-classes-alike";
inline constexpr const char* kLintLimitAboveCluster = "limit-above-cluster";
inline constexpr const char* kLintPreemptionCapZero = "preemption-cap-zero";
// Scenarios only (LintConfiguration, src/scenario/scenario.h).
inline constexpr const char* kLintCheckpointIntervalIgnored = "checkpoint-interval-ignored";

struct LintWarning {
  std::string code;  // one of the kLint* codes
  // e.g. "queues[2]", "priority_classes[1]", "queues", "jobs", "scheduler.ordering",
  // "nodes[0].memory", "jobs[3].gpu_memory", "server.tokens[1]", "workloads[2]"
  std::string field;
  std::string message;  // what is wrong, why it hurts, what to do
};

// Checks a loaded configuration (`state` is ClusterState::Create(config.cluster)) and, when
// `jobs` is not empty, the jobs of a jobs file loaded against `state`; `job_memory` is the jobs
// file's memory fields written as bare numbers (LoadJobsFile's `bare_memory`). Warnings come in a
// fixed order: priority classes, the order's aging, the heterogeneity policy, queues, quota against
// capacity, the memory fields (config.bare_memory, then job_memory), the jobs, the server's
// tokens, then the fields written in an alias spelling (config.aliases).
std::vector<LintWarning> Lint(const ClusterConfig& config, const ClusterState& state,
                              std::span<const Job> jobs = {},
                              std::span<const BareMemory> job_memory = {});

}  // namespace arbiter::config
