#include <algorithm>
#include <string>

#include "core/engine/stages.h"

namespace arbiter::engine {
namespace {

std::string Gpus(std::int64_t milli) {
  std::string s = std::to_string(milli / kMilliPerGpu);
  if (milli % kMilliPerGpu != 0) {
    std::string frac = std::to_string(std::abs(milli % kMilliPerGpu) + kMilliPerGpu).substr(1);
    while (frac.back() == '0') frac.pop_back();
    s += "." + frac;
  }
  return s;
}

// Unused nominal quota that the children of `parent` other than `except` keep back from their
// siblings (beyond their lending limits).
std::int64_t HeldBack(const ClusterState& state, QueueId parent, QueueId except, std::size_t r) {
  std::int64_t held = 0;
  for (QueueId c : state.queue(parent).children) {
    if (c == except) continue;
    const QuotaLimits& l = state.quota(c, r);
    if (l.lending_limit < 0) continue;
    held += std::max<std::int64_t>(0, l.nominal - state.usage(c, r) - l.lending_limit);
  }
  return held;
}

}  // namespace

QuotaCheck CheckQuota(const ClusterState& state, QueueId queue, GpuTypeId type,
                      std::int64_t milli) {
  QuotaCheck check;
  if (type == kNone || milli == 0) return check;
  const std::size_t resources[] = {0, std::size_t{1} + type};
  for (std::size_t r : resources) {
    auto resource = [&] {
      return r == 0 ? std::string(kAllGpusResource) : state.gpu_type_name(type);
    };
    QueueId child = kNone;
    // Within a guarantee: nothing is borrowed above here, and only the maxima further up are
    // checked.
    bool settled = false;
    for (QueueId x = queue; x != kNone; child = x, x = state.queue(x).parent) {
      const QuotaLimits& l = state.quota(x, r);
      const std::int64_t after = state.usage(x, r) + milli;
      auto where = [&] { return "queue " + state.queue(x).spec.name + ", " + resource() + ": "; };
      if (l.max >= 0 && after > l.max) {
        return {false, check.borrows, Cause::kQuotaMax,
                where() + Gpus(after) + " would exceed max " + Gpus(l.max)};
      }
      if (settled || !l.limited) continue;
      const std::int64_t held = state.queue(x).children.empty() ? 0 : HeldBack(state, x, child, r);
      if (after + held <= l.nominal) {
        settled = true;
        continue;
      }
      if (x == queue) check.borrows = true;
      const std::int64_t borrowed = after + held - l.nominal;
      if (l.borrowing_limit >= 0 && borrowed > l.borrowing_limit) {
        return {false, check.borrows, Cause::kQuotaBorrowingLimit,
                where() + "would borrow " + Gpus(borrowed) + " above nominal " + Gpus(l.nominal) +
                    ", limit " + Gpus(l.borrowing_limit)};
      }
      if (state.queue(x).parent == kNone) {
        const Cause cause = x == queue ? Cause::kQuotaMax : Cause::kQuotaCohort;
        return {false, check.borrows, cause,
                where() + Gpus(after) + " in use would exceed the tree's quota " +
                    Gpus(l.nominal - held)};
      }
    }
  }
  return check;
}

// Whether a request of `milli` can never pass the static limits of the queue and those above it.
bool QuotaNeverFits(const ClusterState& state, QueueId queue, GpuTypeId type, std::int64_t milli) {
  for (std::size_t r : {std::size_t{0}, std::size_t{1} + type}) {
    for (QueueId q = queue; q != kNone; q = state.queue(q).parent) {
      const QuotaLimits& l = state.quota(q, r);
      if (l.max >= 0 && milli > l.max) return true;
      if (!l.limited) continue;
      if (l.borrowing_limit >= 0 && milli > l.nominal + l.borrowing_limit) return true;
      if (state.queue(q).parent == kNone && milli > l.nominal) return true;
    }
  }
  return false;
}

}  // namespace arbiter::engine
