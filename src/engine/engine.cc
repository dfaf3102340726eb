// The engine: one cycle at a time (cycle.cc), with the fragmentation models of the running shapes
// it keeps between cycles.
#include "arbiter/engine.h"

#include <algorithm>
#include <memory>
#include <span>
#include <vector>

#include "engine/stages.h"

namespace arbiter {
namespace {

// The shapes of the running tasks, each weighted by its rounded count: the distribution the
// fragmentation-aware policies assume when they are given none.
std::vector<TaskShape> ObservedShapes(const ClusterState& state) {
  std::vector<TaskShape> shapes;
  shapes.reserve(state.running_task_shapes().size());
  for (const auto& [key, count] : state.running_task_shapes()) {
    shapes.push_back({key.gpu, key.cpu, key.memory, GpuTypeSet(key.gpu_types),
                      static_cast<double>(ClusterState::RoundedShapeCount(count))});
  }
  return shapes;
}

// The models of the running shapes the engine keeps (ModelOf). The 100,000-job Philly replay of
// the simulator benchmark builds 5,300 models with one kept, 1,300 with 8 and 1,050 with 64.
constexpr std::size_t kRecentModels = 8;

}  // namespace

// Whether the policy scores placements by expected fragmentation under a shape distribution.
bool UsesShapes(PlacementPolicy policy) {
  return policy == PlacementPolicy::kArbiter || policy == PlacementPolicy::kFgd ||
         policy == PlacementPolicy::kFrag;
}

// The default policy bounds the cost of its measure; kFrag and kFgd keep every shape they use.
std::size_t MaxShapes(const PlacementOptions& placement) {
  return placement.policy == PlacementPolicy::kArbiter ? placement.max_shapes : 0;
}

// Whether the policy weighs the shapes by the scarcity of their hosts in the cluster (FragModel),
// which makes its model depend on the cluster: all but FGD's own measure.
bool WeighsScarcity(PlacementPolicy policy) {
  return UsesShapes(policy) && policy != PlacementPolicy::kFgd;
}

Engine::Engine(EngineOptions options) : options_(std::move(options)) {
  PlacementOptions& p = options_.placement;
  p.model = nullptr;
  // A model that weighs scarcity is built by ModelOf, with the cluster.
  if (UsesShapes(p.policy) && !WeighsScarcity(p.policy) && !p.shapes.empty())
    p.model = std::make_shared<engine::FragModel>(p.shapes, p.policy == PlacementPolicy::kFgd,
                                                  MaxShapes(p));
}

std::shared_ptr<const engine::FragModel> Engine::ModelOf(const ClusterState& state) const {
  const PlacementOptions& p = options_.placement;
  const bool scarcity = WeighsScarcity(p.policy);
  // Given shapes do not change; observed ones do (the state keeps their digest), and the capacity
  // weighs them too.
  const std::uint64_t key = (p.shapes.empty() ? state.running_task_shapes_digest() : 0) ^
                            (scarcity ? state.capacity_digest() : 0);
  if (!recent_.empty() && recent_.front().key == key) return recent_.front().model;
  auto it =
      std::find_if(recent_.begin(), recent_.end(), [&](const Built& b) { return b.key == key; });
  if (it != recent_.end()) {
    std::rotate(recent_.begin(), it, it + 1);
  } else {
    const std::vector<TaskShape> observed =
        p.shapes.empty() ? ObservedShapes(state) : std::vector<TaskShape>{};
    auto model = std::make_shared<engine::FragModel>(
        p.shapes.empty() ? std::span<const TaskShape>(observed)
                         : std::span<const TaskShape>(p.shapes),
        p.policy == PlacementPolicy::kFgd, MaxShapes(p), scarcity ? &state : nullptr);
    if (recent_.size() == kRecentModels) recent_.pop_back();
    recent_.insert(recent_.begin(), {key, std::move(model)});
  }
  return recent_.front().model;
}

Plan Engine::Schedule(ClusterState& state, std::span<const Job> pending, Millis now) const {
  if (UsesShapes(options_.placement.policy) && !options_.placement.model) {
    std::shared_ptr<const engine::FragModel> model = ModelOf(state);
    if (!cycle_options_ || cycle_options_->placement.model != model) {
      auto copy = std::make_shared<EngineOptions>(options_);
      copy->placement.model = std::move(model);
      cycle_options_ = std::move(copy);
    }
    return engine::RunCycle(state, pending, now, *cycle_options_);
  }
  return engine::RunCycle(state, pending, now, options_);
}

}  // namespace arbiter
