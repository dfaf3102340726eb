// Gavel's allocation and rounds (gavel.h).
#include "core/engine/gavel.h"

#include <algorithm>
#include <map>

#include "core/engine/linear_program.h"

namespace arbiter::engine {

namespace {

// A job that has not yet run on a model where it has a share: its priority there is its share
// times this (Gavel's infinite priority, ordered by the share).
constexpr double kNeverRan = 1e9;
// Shares below this are the simplex's rounding: none.
constexpr double kNoShare = 1e-9;

}  // namespace

GavelScope::GavelScope(const ClusterState& state, std::span<const Job> pending,
                       const OrderingWeights& w)
    : LeaseOrder(w.gavel_round, Eviction::Kind::kAllocationRound), types_(state.gpu_type_count()) {
  // The classes: jobs of equal GPUs and equal normalised throughput on each model (-1 where not
  // accepted) share a class; a std::map keeps the classes' order, so the program, deterministic.
  struct Class {
    std::vector<double> throughput;  // per model; -1: not accepted
    double gpus = 0;
    double jobs = 0;
  };
  std::map<std::vector<double>, std::uint32_t> index;
  std::vector<Class> classes;
  auto add = [&](const Job& job) {
    const std::int64_t milli = job.total_gpu().value();
    if (milli <= 0 || class_.count(job.id)) return;
    std::vector<double> key(types_ + 1, -1.0);
    key[0] = static_cast<double>(milli);
    bool any = false;
    for (GpuTypeId t = 0; t < types_; ++t) {
      if (!job.gpu_types.Accepts(t) || state.TypeDevices(t) <= 0) continue;
      key[1 + t] = state.NormalizedThroughput(job, t);
      any = true;
    }
    if (!any) return;
    auto [it, added] = index.emplace(key, static_cast<std::uint32_t>(classes.size()));
    if (added) {
      classes.push_back({std::vector<double>(key.begin() + 1, key.end()),
                         static_cast<double>(milli) / kMilliPerGpu, 0});
    }
    classes[it->second].jobs += 1;
    class_.emplace(job.id, it->second);
  };
  for (const auto& [id, r] : state.running()) add(r.job);
  for (const Job& job : pending) add(job);
  shares_.assign(classes.size() * types_, 0.0);
  if (classes.empty()) return;

  // The variables: X(c,m) for each class and accepted model, then (max-min fairness) the least
  // normalised throughput.
  std::vector<std::int32_t> var(classes.size() * types_, -1);
  std::size_t n = 0;
  for (std::size_t c = 0; c < classes.size(); ++c) {
    for (std::size_t t = 0; t < types_; ++t) {
      if (classes[c].throughput[t] >= 0) var[c * types_ + t] = static_cast<std::int32_t>(n++);
    }
  }
  const bool max_min = w.heterogeneity != HeterogeneityPolicy::kMaxThroughput;
  const std::size_t least = n;
  LinearProgram lp(max_min ? n + 1 : n);
  double all_jobs = 0;
  for (const Class& k : classes) all_jobs += k.jobs;
  // The sum of the normalised throughputs: the objective of max-throughput, and max-min
  // fairness's tie-break between optima (a thousandth of the weight, spread over the jobs).
  const double sum_weight = max_min ? 1e-3 / all_jobs : 1.0;
  for (std::size_t c = 0; c < classes.size(); ++c) {
    for (std::size_t t = 0; t < types_; ++t) {
      const std::int32_t v = var[c * types_ + t];
      if (v >= 0)
        lp.objective[static_cast<std::size_t>(v)] =
            sum_weight * classes[c].jobs * classes[c].throughput[t];
    }
  }
  if (max_min) lp.objective[least] = 1.0;
  for (std::size_t c = 0; c < classes.size(); ++c) {
    std::vector<double>& time = lp.AddRow(1.0);  // sum_m X(c,m) <= 1
    for (std::size_t t = 0; t < types_; ++t) {
      if (const std::int32_t v = var[c * types_ + t]; v >= 0) time[static_cast<std::size_t>(v)] = 1;
    }
    if (!max_min) continue;
    std::vector<double>& fair = lp.AddRow(0.0);  // least - sum_m T(c,m) X(c,m) <= 0
    fair[least] = 1.0;
    for (std::size_t t = 0; t < types_; ++t) {
      if (const std::int32_t v = var[c * types_ + t]; v >= 0)
        fair[static_cast<std::size_t>(v)] = -classes[c].throughput[t];
    }
  }
  for (std::size_t t = 0; t < types_; ++t) {
    std::vector<double>& gpus =
        lp.AddRow(static_cast<double>(state.TypeDevices(static_cast<GpuTypeId>(t))));
    for (std::size_t c = 0; c < classes.size(); ++c) {
      if (const std::int32_t v = var[c * types_ + t]; v >= 0)
        gpus[static_cast<std::size_t>(v)] = classes[c].jobs * classes[c].gpus;
    }
  }
  const std::vector<double> x = Maximize(lp);
  for (std::size_t i = 0; i < var.size(); ++i) {
    if (var[i] < 0) continue;
    const double share = x[static_cast<std::size_t>(var[i])];
    shares_[i] = share < kNoShare ? 0.0 : std::min(1.0, share);
  }
}

const double* GavelScope::SharesOf(JobId id) const {
  const auto it = class_.find(id);
  return it == class_.end() ? nullptr : &shares_[it->second * types_];
}

double GavelScope::Share(const Job& job, GpuTypeId type) const {
  const double* shares = SharesOf(job.id);
  return shares && type < types_ ? shares[type] : 0.0;
}

double GavelScope::Priority(const Job& job, GpuTypeId type, Millis ran_there, Millis now) const {
  const double share = Share(job, type);
  if (share <= 0) return 0;
  if (ran_there <= 0) return kNeverRan * share;
  const Millis since = std::max<Millis>(1, now - job.submit_time);
  return share * static_cast<double>(since) / static_cast<double>(ran_there);
}

double GavelScope::Pending(const Job& job, Millis now, GpuTypeId type) const {
  return Priority(job, type, TimeOnModel(job, type), now);
}

double GavelScope::Running(const RunningJob& r, Millis now) const {
  const GpuTypeId type = r.allocation.gpu_type;
  return Priority(r.job, type, TimeOnModel(r.job, type) + std::max<Millis>(0, now - r.start_time),
                  now);
}

GavelScope::Best GavelScope::BestOf(const Job& job, Millis now) const {
  Best best;
  const double* shares = SharesOf(job.id);
  if (!shares) return best;
  for (GpuTypeId t = 0; t < types_; ++t) {
    if (shares[t] <= 0) continue;
    const double p = Pending(job, now, t);
    if (best.type == kNone || p > best.priority ||
        (p == best.priority && shares[t] > shares[best.type])) {
      best.priority = p;
      best.type = t;
    }
  }
  return best;
}

}  // namespace arbiter::engine
