#include "arbiter/plan.h"

#include <algorithm>
#include <string>

namespace arbiter {

CapacityNeed CapacityNeed::Of(const Job& job) {
  CapacityNeed need;
  std::int64_t task = 0;
  for (const TaskGroup& g : job.groups) {
    need.milli += g.request.gpu.value() * g.count;
    if (g.count > 0) task = std::max(task, g.request.gpu.value());
  }
  need.node_gpus = static_cast<std::int32_t>(task / kMilliPerGpu);
  return need;
}

void CapacityHold::Add(CapacityNeed need) {
  for (const CapacityNeed& n : needs) {
    if (n.milli <= need.milli && n.node_gpus <= need.node_gpus) return;  // met no sooner
  }
  std::erase_if(needs, [&](const CapacityNeed& n) {
    return need.milli <= n.milli && need.node_gpus <= n.node_gpus;
  });
  needs.push_back(need);
}

bool CapacityHold::Holds(std::int64_t free_milli, std::int32_t node_gpus_free) const {
  if (!given) return false;
  return std::none_of(needs.begin(), needs.end(),
                      [&](const CapacityNeed& n) { return n.Met(free_milli, node_gpus_free); });
}

const char* CauseName(Cause cause) {
  switch (cause) {
    case Cause::kNodeUnhealthy:
      return "node unhealthy";
    case Cause::kNodeCordoned:
      return "node cordoned";
    case Cause::kUntoleratedTaint:
      return "untolerated taint";
    case Cause::kNodeSelector:
      return "node selector mismatch";
    case Cause::kGpuType:
      return "no GPU of an accepted type";
    case Cause::kGpuMemory:
      return "GPU memory too small";
    case Cause::kInsufficientGpu:
      return "insufficient GPU";
    case Cause::kInsufficientCpu:
      return "insufficient CPU";
    case Cause::kInsufficientMemory:
      return "insufficient memory";
    case Cause::kAffinity:
      return "affinity not met";
    case Cause::kAntiAffinity:
      return "anti-affinity conflict";
    case Cause::kTopology:
      return "no topology domain holds the gang";
    case Cause::kGang:
      return "gang does not fit at once";
    case Cause::kQuotaMax:
      return "queue at its max quota";
    case Cause::kQuotaBorrowingLimit:
      return "queue at its borrowing limit";
    case Cause::kQuotaCohort:
      return "cohort has no unused quota to lend";
    case Cause::kQueueOrder:
      return "behind a blocked job of its strict-FIFO queue";
    case Cause::kInvalid:
      return "invalid job";
    case Cause::kReserved:
      return "GPUs reserved for a blocked job";
  }
  return "unknown";
}

const char* StageName(Stage stage) {
  switch (stage) {
    case Stage::kOrder:
      return "order";
    case Stage::kValidate:
      return "validate";
    case Stage::kQuota:
      return "quota";
    case Stage::kFilter:
      return "filter";
    case Stage::kPlace:
      return "place";
    case Stage::kExplain:
      return "explain";
    case Stage::kBackfill:
      return "backfill";
    case Stage::kPreempt:
      return "preempt";
  }
  return "unknown";
}

const char* EvictionKindName(Eviction::Kind kind) {
  switch (kind) {
    case Eviction::Kind::kWithinQueue:
      return "within_queue";
    case Eviction::Kind::kQueuePriority:
      return "queue_priority";
    case Eviction::Kind::kReclaim:
      return "reclaim";
    case Eviction::Kind::kAttainedService:
      return "attained_service";
    case Eviction::Kind::kFinishTimeFairness:
      return "finish_time_fairness";
    case Eviction::Kind::kAllocationRound:
      return "allocation_round";
  }
  return "unknown";
}

std::string Reason::Describe(TimeStyle style) const {
  std::string out = StageName(stage);
  out += ": ";
  if (stage == Stage::kFilter || stage == Stage::kPlace) {
    if (node_counts.empty() || stage == Stage::kPlace) {
      out += CauseName(cause);
    }
    if (!node_counts.empty()) {
      if (stage == Stage::kPlace) out += "; ";
      std::int32_t fit = nodes_total;
      for (const CauseCount& c : node_counts) fit -= c.nodes;
      out += std::to_string(fit) + "/" + std::to_string(nodes_total) + " nodes fit";
      const char* sep = ": ";
      for (const CauseCount& c : node_counts) {
        out += sep;
        out += std::to_string(c.nodes) + " " + CauseName(c.cause);
        sep = ", ";
      }
    }
  } else {
    out += CauseName(cause);
  }
  if (!detail.empty()) out += " (" + detail + ")";
  if (lifts_at >= 0 && cause == Cause::kReserved) {
    out += "; reserved from " + FormatTime(lifts_at, style) +
           ": only a job whose runtime estimate ends it before then may use them";
  } else if (lifts_at >= 0) {
    out += "; expected to lift at " + FormatTime(lifts_at, style);
  }
  if (reserved_start >= 0)
    out += "; reserved, expected to start at " + FormatTime(reserved_start, style);
  if (verdict == Verdict::kNever) out += " [can never fit]";
  return out;
}

}  // namespace arbiter
