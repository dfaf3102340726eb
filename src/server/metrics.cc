#include "server/metrics.h"

#include <fmt/format.h>

namespace arbiter::server {

void Histogram::Observe(double seconds) {
  std::lock_guard lock(mu_);
  for (std::size_t i = 0; i < kBounds.size(); ++i) {
    if (seconds <= kBounds[i]) {
      ++counts_[i];
      break;
    }
  }
  ++count_;
  sum_ += seconds;
}

std::string Histogram::Text(const std::string& name, const std::string& help) const {
  std::lock_guard lock(mu_);
  std::string out = fmt::format("# HELP {} {}\n# TYPE {} histogram\n", name, help, name);
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i < kBounds.size(); ++i) {
    cumulative += counts_[i];
    out += fmt::format("{}_bucket{{le=\"{}\"}} {}\n", name, kBounds[i], cumulative);
  }
  out += fmt::format("{}_bucket{{le=\"+Inf\"}} {}\n", name, count_);
  out += fmt::format("{}_sum {}\n{}_count {}\n", name, sum_, name, count_);
  return out;
}

}  // namespace arbiter::server
