// The engine: one cycle at a time (cycle.cc), with the fragmentation models of the running shapes
// it keeps between cycles.
#include "arbiter/engine.h"

#include <algorithm>
#include <memory>
#include <span>
#include <vector>

#include "core/engine/stages.h"

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

// The engine's options and caches: the models built last, the one in use first, each under the key
// of what it was built from: the digest of the rounded counts of the running shapes (when no shapes
// are given) and of the cluster's capacity (when the policy weighs scarcity). As jobs start and
// end, a shape's count often goes back and forth across a rounding step, and the model of either
// side is then kept rather than built again.
struct Engine::Impl {
  explicit Impl(EngineOptions engine_options) : options(std::move(engine_options)) {}

  // The fragmentation model of the given shapes, else of the running tasks' (kept while they stay
  // about the same), weighed by the cluster's capacity where the policy does (FragModel).
  std::shared_ptr<const engine::FragModel> ModelOf(const ClusterState& state);

  const EngineOptions options;
  // A model of the given shapes that does not depend on the cluster (FGD's own measure).
  std::shared_ptr<const engine::FragModel> fixed_model;
  struct Built {
    std::uint64_t key = 0;
    std::shared_ptr<const engine::FragModel> model;
  };
  std::vector<Built> recent;
  // The options with the model in use, made again only when the model changes (a cycle then
  // copies no options).
  std::shared_ptr<const engine::CycleOptions> cycle_options;
};

Engine::Engine(EngineOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {
  const PlacementOptions& p = impl_->options.placement;
  // A model that weighs scarcity is built by ModelOf, with the cluster.
  if (UsesShapes(p.policy) && !WeighsScarcity(p.policy) && !p.shapes.empty())
    impl_->fixed_model = std::make_shared<engine::FragModel>(
        p.shapes, p.policy == PlacementPolicy::kFgd, MaxShapes(p));
}

Engine::~Engine() = default;
Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;

const EngineOptions& Engine::options() const { return impl_->options; }

bool Engine::ArrivalChangesNothing(CapacityHold& hold, const ClusterState& state, const Job& job,
                                   Millis now) const {
  if (!hold.given || !hold.arrivals) return false;
  // Behind a blocked head it gets no reservation, takes no quota and needs no capacity.
  for (const Job& head : hold.blocked_heads) {
    if (head.queue == job.queue &&
        engine::OrderingKeys(state, impl_->options.ordering).StaysBefore(head, job, now))
      return true;
  }
  // Short of capacity while every waiting job is: nothing can be placed, whatever it changes in
  // the order or the reservations (with a waiting job's need met, a new reservation could let it
  // backfill).
  const std::int64_t free = state.FreeGpuMilli();
  const std::int32_t node_free = state.MaxNodeFreeGpus();
  const CapacityNeed need = CapacityNeed::Of(job);
  if (!hold.Holds(free, node_free) || need.Met(free, node_free)) return false;
  hold.Add(need);
  return true;
}

bool Engine::StaysBehind(const ClusterState& state, const Job& ahead, const Job& job,
                         Millis now) const {
  const EngineOptions& o = impl_->options;
  if (o.ordering.policy != OrderPolicy::kMultifactor ||
      (o.ordering.heterogeneity != HeterogeneityPolicy::kOff && state.has_throughput()))
    return false;
  if (ahead.queue != job.queue || job.queue >= state.queue_count() ||
      !state.queue(job.queue).spec.strict_fifo || engine::ValidateJob(state, job))
    return false;
  // A head that can never run does not block its queue (Cycle's BlockStep), and a job that can
  // never run is told so rather than that it waits behind one (BehindBlockedHead).
  if (engine::CanNeverRun(state, ahead) || engine::CanNeverRun(state, job)) return false;
  if (o.preemption.enabled && engine::VictimPolicy(state, o.ordering).AnyMayEverEvict())
    return false;
  return engine::OrderingKeys(state, o.ordering).StaysBefore(ahead, job, now);
}

std::shared_ptr<const engine::FragModel> Engine::Impl::ModelOf(const ClusterState& state) {
  if (fixed_model) return fixed_model;
  const PlacementOptions& p = options.placement;
  const bool scarcity = WeighsScarcity(p.policy);
  // Given shapes do not change; observed ones do (the state keeps their digest), and the capacity
  // weighs them too.
  const std::uint64_t key = (p.shapes.empty() ? state.running_task_shapes_digest() : 0) ^
                            (scarcity ? state.capacity_digest() : 0);
  if (!recent.empty() && recent.front().key == key) return recent.front().model;
  auto it =
      std::find_if(recent.begin(), recent.end(), [&](const Built& b) { return b.key == key; });
  if (it != recent.end()) {
    std::rotate(recent.begin(), it, it + 1);
  } else {
    const std::vector<TaskShape> observed =
        p.shapes.empty() ? ObservedShapes(state) : std::vector<TaskShape>{};
    auto model = std::make_shared<engine::FragModel>(
        p.shapes.empty() ? std::span<const TaskShape>(observed)
                         : std::span<const TaskShape>(p.shapes),
        p.policy == PlacementPolicy::kFgd, MaxShapes(p), scarcity ? &state : nullptr);
    if (recent.size() == kRecentModels) recent.pop_back();
    recent.insert(recent.begin(), {key, std::move(model)});
  }
  return recent.front().model;
}

Plan Engine::Schedule(ClusterState& state, std::span<const Job> pending, Millis now,
                      std::span<const std::uint32_t> order_hint) const {
  Impl& impl = *impl_;
  std::shared_ptr<const engine::FragModel> model =
      UsesShapes(impl.options.placement.policy) ? impl.ModelOf(state) : nullptr;
  if (!impl.cycle_options || impl.cycle_options->model != model) {
    auto options = std::make_shared<engine::CycleOptions>();
    static_cast<EngineOptions&>(*options) = impl.options;
    options->model = std::move(model);
    impl.cycle_options = std::move(options);
  }
  return engine::RunCycle(state, pending, now, *impl.cycle_options, order_hint);
}

}  // namespace arbiter
