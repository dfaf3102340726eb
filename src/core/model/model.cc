#include "arbiter/model.h"

#include <algorithm>

namespace arbiter {

bool Toleration::Tolerates(const Taint& taint) const {
  if (effect && *effect != taint.effect) return false;
  if (key.empty()) return op == Op::kExists;
  if (key != taint.key) return false;
  return op == Op::kExists || value == taint.value;
}

int Topology::LevelIndex(const std::string& name) const {
  auto it = std::find(levels.begin(), levels.end(), name);
  return it == levels.end() ? -1 : static_cast<int>(it - levels.begin());
}

std::int64_t Job::task_count() const {
  std::int64_t n = 0;
  for (const TaskGroup& g : groups) n += g.count;
  return n;
}

MilliGpu Job::total_gpu() const {
  MilliGpu total{0};
  for (const TaskGroup& g : groups) total += g.request.gpu * g.count;
  return total;
}

}  // namespace arbiter
