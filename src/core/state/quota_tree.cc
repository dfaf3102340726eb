#include "core/state/quota_tree.h"

#include <algorithm>
#include <climits>
#include <map>

namespace arbiter {

Result<QuotaTree> QuotaTree::Resolve(
    std::span<const QueueSpec> queues, std::span<const QueueLink> links, std::size_t types,
    const std::function<std::optional<GpuTypeId>(const std::string&)>& find_type) {
  QuotaTree tree;
  const std::size_t resources = 1 + types;
  tree.resources_ = resources;
  tree.links_.assign(links.begin(), links.end());
  tree.limits_.assign(queues.size() * resources, QuotaLimits{});
  tree.usage_.assign(queues.size() * resources, 0);
  std::vector<std::int64_t> own_nominal(queues.size() * resources, 0);
  std::vector<bool> declared(queues.size() * resources, false);
  for (QueueId q = 0; q < queues.size(); ++q) {
    for (const auto& [resource, quota] : queues[q].quota) {
      std::size_t r = 0;
      if (resource != kAllGpusResource) {
        const std::optional<GpuTypeId> t = find_type(resource);
        if (!t)
          return Status::InvalidArgument(
              "'" + resource + "' is neither 'gpu' nor a GPU model of any node",
              "queues." + queues[q].name + ".quota");
        r = 1 + *t;
      }
      const std::string field = "queues." + queues[q].name + ".quota." + resource;
      auto negative = [](const std::optional<MilliGpu>& v) { return v && v->value() < 0; };
      if (quota.nominal.value() < 0 || negative(quota.borrowing_limit) ||
          negative(quota.lending_limit) || negative(quota.max)) {
        return Status::InvalidArgument("quantities must not be negative", field);
      }
      QuotaLimits& l = tree.limits_[q * resources + r];
      own_nominal[q * resources + r] = quota.nominal.value();
      if (quota.borrowing_limit) l.borrowing_limit = quota.borrowing_limit->value();
      if (quota.lending_limit) l.lending_limit = quota.lending_limit->value();
      if (quota.max) l.max = quota.max->value();
      // A max alone caps this queue only (QuotaLimits::limited).
      if (quota.nominal.value() > 0 || quota.borrowing_limit || quota.lending_limit)
        declared[q * resources + r] = true;
    }
  }
  // Deepest first, so children are summed before their parents.
  std::vector<QueueId> by_depth(queues.size());
  for (QueueId i = 0; i < by_depth.size(); ++i) by_depth[i] = i;
  std::stable_sort(by_depth.begin(), by_depth.end(),
                   [&](QueueId a, QueueId b) { return links[a].depth > links[b].depth; });
  for (QueueId q : by_depth) {
    for (std::size_t r = 0; r < resources; ++r) {
      std::int64_t nominal = own_nominal[q * resources + r];
      for (QueueId c : links[q].children) nominal += tree.limits_[c * resources + r].nominal;
      tree.limits_[q * resources + r].nominal = nominal;
    }
  }
  // A resource is limited throughout a tree when any queue of the tree declares a nominal quota
  // or a borrowing or lending limit for it.
  auto root_of = [&](QueueId q) {
    while (links[q].parent != kNone) q = links[q].parent;
    return q;
  };
  for (std::size_t r = 0; r < resources; ++r) {
    std::map<QueueId, bool> root_declares;
    for (QueueId q = 0; q < queues.size(); ++q) {
      if (declared[q * resources + r]) root_declares[root_of(q)] = true;
    }
    for (QueueId q = 0; q < queues.size(); ++q)
      tree.limits_[q * resources + r].limited = root_declares.count(root_of(q)) > 0;
  }
  return tree;
}

void QuotaTree::Charge(QueueId queue, GpuTypeId type, std::int64_t milli) {
  if (type == kNone || milli == 0) return;
  for (QueueId q = queue; q != kNone; q = links_[q].parent) {
    usage_[q * resources_] += milli;
    usage_[q * resources_ + 1 + type] += milli;
  }
}

QuotaDecision QuotaTree::Admit(QueueId queue, GpuTypeId type, std::int64_t milli) const {
  return Decide(queue, type, milli, /*at_rest=*/false);
}

// A request that an idle tree refuses is refused whatever runs: the usage of the other queues
// only adds to what the request is checked against (their use, or the unused quota they keep
// back beyond their lending limits, whichever is more).
bool QuotaTree::NeverAdmits(QueueId queue, GpuTypeId type, std::int64_t milli) const {
  return !Decide(queue, type, milli, /*at_rest=*/true).ok;
}

QuotaDecision QuotaTree::Decide(QueueId queue, GpuTypeId type, std::int64_t milli,
                                bool at_rest) const {
  QuotaDecision d;
  if (type == kNone || milli == 0) return d;
  auto used = [&](QueueId q, std::size_t r) { return at_rest ? 0 : usage(q, r); };
  for (std::size_t r : {std::size_t{0}, std::size_t{1} + type}) {
    QueueId child = kNone;
    // Within a guarantee: nothing is borrowed above here, and only the maxima further up are
    // checked.
    bool settled = false;
    for (QueueId x = queue; x != kNone; child = x, x = links_[x].parent) {
      const QuotaLimits& l = limits(x, r);
      const std::int64_t after = used(x, r) + milli;
      auto refuse = [&](Cause cause, std::int64_t limit) {
        d.ok = false;
        d.cause = cause;
        d.at = x;
        d.resource = r;
        d.after = after;
        d.limit = limit;
        return d;
      };
      if (l.max >= 0 && after > l.max) return refuse(Cause::kQuotaMax, l.max);
      if (settled || !l.limited) continue;
      // Unused nominal quota that the other children keep back (beyond their lending limits).
      std::int64_t held = 0;
      for (QueueId c : links_[x].children) {
        const QuotaLimits& cl = limits(c, r);
        if (c == child || cl.lending_limit < 0) continue;
        held += std::max<std::int64_t>(0, cl.nominal - used(c, r) - cl.lending_limit);
      }
      if (after + held <= l.nominal) {
        settled = true;
        continue;
      }
      if (x == queue) d.borrows = true;
      const std::int64_t borrowed = after + held - l.nominal;
      if (l.borrowing_limit >= 0 && borrowed > l.borrowing_limit) {
        d.borrowed = borrowed;
        d.nominal = l.nominal;
        return refuse(Cause::kQuotaBorrowingLimit, l.borrowing_limit);
      }
      if (links_[x].parent == kNone) {
        d.tree = true;
        return refuse(x == queue ? Cause::kQuotaMax : Cause::kQuotaCohort, l.nominal - held);
      }
    }
  }
  return d;
}

QuotaResources QuotaTree::Limiting(QueueId q, GpuTypeId type) const {
  QuotaResources out;
  if (type == kNone) return out;
  for (std::size_t r : {std::size_t{1} + type, std::size_t{0}}) {
    if (limits(q, r).limited) out.at[out.count++] = r;
  }
  return out;
}

std::int64_t QuotaTree::AboveNominal(QueueId q, GpuTypeId type) const {
  const QuotaResources resources = Limiting(q, type);
  if (resources.empty()) return -1;
  std::int64_t above = INT64_MAX;
  for (std::size_t r : resources) above = std::min(above, usage(q, r) - limits(q, r).nominal);
  return above;
}

bool QuotaTree::RunsOnBorrowed(QueueId q, GpuTypeId type, std::int64_t milli) const {
  const QuotaResources resources = Limiting(q, type);
  if (resources.empty()) return false;
  for (std::size_t r : resources) {
    if (usage(q, r) - milli < limits(q, r).nominal) return false;
  }
  return true;
}

bool QuotaTree::HasGuarantee(QueueId q) const {
  for (std::size_t r = 0; r < resources_; ++r) {
    if (limits(q, r).limited && limits(q, r).nominal > 0) return true;
  }
  return false;
}

bool QuotaTree::MayBorrow(QueueId q) const {
  for (std::size_t r = 0; r < resources_; ++r) {
    const QuotaLimits& l = limits(q, r);
    if (l.limited && l.borrowing_limit != 0 && (l.max < 0 || l.max > l.nominal)) return true;
  }
  return false;
}

bool QuotaTree::Bounded(QueueId q, std::size_t r) const {
  if (limits(q, r).limited) return true;
  for (QueueId x = q; x != kNone; x = links_[x].parent) {
    if (limits(x, r).max >= 0) return true;
  }
  return false;
}

std::int64_t QuotaTree::Guarantee(QueueId q) const {
  if (limits(q, 0).limited) return limits(q, 0).nominal;
  std::int64_t g = 0;
  for (std::size_t r = 1; r < resources_; ++r) {
    if (limits(q, r).limited) g += limits(q, r).nominal;
  }
  return g;
}

}  // namespace arbiter
