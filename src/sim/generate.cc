#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/workload.h"

namespace arbiter::sim {
namespace {

std::uint64_t SplitMix(std::uint64_t& x) {
  std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

std::uint64_t Rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

}  // namespace

Rng::Rng(std::uint64_t seed) {
  for (std::uint64_t& s : s_) s = SplitMix(seed);
}

std::uint64_t Rng::Next() {
  const std::uint64_t result = Rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = Rotl(s_[3], 45);
  return result;
}

double Rng::Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

double Rng::Exponential(double mean) { return -mean * std::log1p(-Uniform()); }

double Rng::Normal() {
  constexpr double kTwoPi = 6.283185307179586;
  const double u1 = 1 - Uniform();  // (0, 1]
  const double u2 = Uniform();
  return std::sqrt(-2 * std::log(u1)) * std::cos(kTwoPi * u2);
}

std::uint64_t StreamSeed(std::uint64_t seed, const std::string& name) {
  std::uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a
  for (unsigned char c : name) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  std::uint64_t x = seed ^ h;
  return SplitMix(x);
}

double Dist::Draw(Rng& rng) const {
  switch (kind) {
    case Kind::kConstant:
      return a;
    case Kind::kUniform:
      return a + (b - a) * rng.Uniform();
    case Kind::kExponential:
      return rng.Exponential(a);
    case Kind::kLogNormal:
      return a * std::exp(b * rng.Normal());
    case Kind::kChoice: {
      if (values.empty()) return 0;
      if (weights.empty()) {
        const auto i = static_cast<std::size_t>(rng.Uniform() * static_cast<double>(values.size()));
        return values[std::min(i, values.size() - 1)];
      }
      double total = 0;
      for (double w : weights) total += w;
      double u = rng.Uniform() * total;
      for (std::size_t i = 0; i < values.size(); ++i) {
        u -= weights[i];
        if (u < 0) return values[i];
      }
      return values.back();
    }
  }
  return a;
}

double Dist::Mean() const {
  switch (kind) {
    case Kind::kConstant:
      return a;
    case Kind::kUniform:
      return (a + b) / 2;
    case Kind::kExponential:
      return a;
    case Kind::kLogNormal:
      return a * std::exp(b * b / 2);
    case Kind::kChoice: {
      if (values.empty()) return 0;
      double sum = 0;
      double total = 0;
      for (std::size_t i = 0; i < values.size(); ++i) {
        const double w = weights.empty() ? 1 : weights[i];
        sum += w * values[i];
        total += w;
      }
      return total > 0 ? sum / total : 0;
    }
  }
  return a;
}

std::vector<SimJob> Generate(const Generator& g, std::uint64_t seed, Millis horizon) {
  // Arrival times and job sizes come from separate streams, so that a longer horizon adds jobs
  // without changing the earlier ones.
  Rng rng(StreamSeed(seed, g.name));
  Rng arrivals(StreamSeed(seed, g.name + "/arrivals"));
  const Millis until = g.arrivals.until > 0 ? g.arrivals.until : horizon;
  std::vector<Millis> times;
  const auto more = [&] {
    return g.arrivals.count == 0 || static_cast<std::int64_t>(times.size()) < g.arrivals.count;
  };
  switch (g.arrivals.kind) {
    case Arrivals::Kind::kPoisson: {
      if (g.arrivals.per_hour <= 0) break;
      const double mean = 3600.0 * kMillisPerSecond / g.arrivals.per_hour;
      double t = static_cast<double>(g.arrivals.start);
      while (more()) {
        t += arrivals.Exponential(mean);
        if (until > 0 && t >= static_cast<double>(until)) break;
        times.push_back(static_cast<Millis>(t));
      }
      break;
    }
    case Arrivals::Kind::kPeriodic: {
      if (g.arrivals.every <= 0) break;
      for (Millis t = g.arrivals.start; (until <= 0 || t < until) && more();
           t += g.arrivals.every) {
        for (std::int32_t b = 0; b < g.arrivals.burst && more(); ++b) times.push_back(t);
        if (until <= 0 && g.arrivals.count == 0) break;
      }
      break;
    }
    case Arrivals::Kind::kAt:
      for (Millis t : g.arrivals.at) {
        if ((until <= 0 || t < until) && more()) times.push_back(t);
      }
      std::sort(times.begin(), times.end());
      break;
  }
  std::vector<SimJob> jobs;
  jobs.reserve(times.size());
  for (std::size_t k = 0; k < times.size(); ++k) {
    SimJob j;
    j.job = g.job;
    j.job.id = 0;
    j.job.name = g.name + "-" + std::to_string(k);
    j.job.submit_time = times[k];
    j.kind = g.kind;
    j.workload = g.name;
    j.work = std::max<Millis>(1, static_cast<Millis>(std::llround(g.work.Draw(rng))));
    j.checkpoint_cost = g.checkpoint_cost;
    if (g.gpus_set) {
      const double gpus = g.gpus.Draw(rng);
      const auto milli = gpus >= 1 ? static_cast<std::int64_t>(std::llround(gpus)) * kMilliPerGpu
                                   : std::max<std::int64_t>(1, std::llround(gpus * kMilliPerGpu));
      for (TaskGroup& group : j.job.groups) {
        if (group.request.gpu.value() > 0) group.request.gpu = MilliGpu{milli};
      }
    }
    if (g.estimate_factor > 0) {
      j.job.runtime_estimate =
          static_cast<Millis>(std::llround(static_cast<double>(j.work) * g.estimate_factor));
    } else {
      j.job.runtime_estimate = 0;
    }
    jobs.push_back(std::move(j));
  }
  return jobs;
}

std::vector<NodeOutage> RandomOutages(std::size_t nodes, Millis mtbf, Millis repair,
                                      std::uint64_t seed, Millis horizon) {
  std::vector<NodeOutage> out;
  if (mtbf <= 0 || horizon <= 0) return out;
  Rng rng(StreamSeed(seed, "node-failures"));
  for (std::size_t n = 0; n < nodes; ++n) {
    double t = 0;
    for (;;) {
      t += rng.Exponential(static_cast<double>(mtbf));
      if (t >= static_cast<double>(horizon)) break;
      out.push_back(NodeOutage{static_cast<NodeId>(n), static_cast<Millis>(t), repair});
      t += static_cast<double>(repair);
    }
  }
  std::sort(out.begin(), out.end(), [](const NodeOutage& a, const NodeOutage& b) {
    return a.at != b.at ? a.at < b.at : a.node < b.node;
  });
  return out;
}

}  // namespace arbiter::sim
