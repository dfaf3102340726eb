#include <algorithm>
#include <string>

#include "core/engine/stages.h"

namespace arbiter::engine {

std::string FormatGpus(std::int64_t milli) {
  std::string s = std::to_string(milli / kMilliPerGpu);
  if (milli % kMilliPerGpu != 0) {
    std::string frac = std::to_string(std::abs(milli % kMilliPerGpu) + kMilliPerGpu).substr(1);
    while (frac.back() == '0') frac.pop_back();
    s += "." + frac;
  }
  return s;
}

// The words of the quota tree's decision (QuotaTree::Admit holds the arithmetic).
QuotaCheck CheckQuota(const ClusterState& state, QueueId queue, GpuTypeId type,
                      std::int64_t milli) {
  const QuotaDecision d = state.quota_tree().Admit(queue, type, milli);
  QuotaCheck check{d.ok, d.borrows, d.cause, {}};
  if (d.ok) return check;
  check.detail =
      "queue " + state.queue(d.at).spec.name + ", " + state.quota_resource_name(d.resource) + ": ";
  if (d.cause == Cause::kQuotaBorrowingLimit) {
    check.detail += "would borrow " + FormatGpus(d.borrowed) + " above nominal " +
                    FormatGpus(d.nominal) + ", limit " + FormatGpus(d.limit);
  } else if (d.tree) {
    check.detail +=
        FormatGpus(d.after) + " in use would exceed the tree's quota " + FormatGpus(d.limit);
  } else {
    check.detail += FormatGpus(d.after) + " would exceed max " + FormatGpus(d.limit);
  }
  return check;
}

bool QuotaNeverFits(const ClusterState& state, QueueId queue, GpuTypeId type, std::int64_t milli) {
  return state.quota_tree().NeverAdmits(queue, type, milli);
}

}  // namespace arbiter::engine
