// Cluster (include/arbiter/state.h): the library user's view of a ClusterState, in plain values.
#include <algorithm>
#include <utility>

#include "core/state/cluster_state.h"

namespace arbiter {

Cluster::Cluster(std::unique_ptr<ClusterState> state) : state_(std::move(state)) {}
Cluster::~Cluster() = default;
Cluster::Cluster(Cluster&&) noexcept = default;
Cluster& Cluster::operator=(Cluster&&) noexcept = default;

Result<Cluster> Cluster::Create(const ClusterSpec& spec) {
  Result<ClusterState> state = ClusterState::Create(spec);
  if (!state.ok()) return state.status();
  return Cluster(std::make_unique<ClusterState>(std::move(state).value()));
}

std::optional<QueueId> Cluster::FindQueue(const std::string& name) const {
  return state_->FindQueue(name);
}
std::optional<PriorityClassId> Cluster::FindPriorityClass(const std::string& name) const {
  return state_->FindPriorityClass(name);
}
std::optional<GpuTypeId> Cluster::FindGpuType(const std::string& name) const {
  return state_->FindGpuType(name);
}
std::optional<NodeId> Cluster::FindNode(const std::string& name) const {
  return state_->FindNode(name);
}

std::size_t Cluster::node_count() const { return state_->node_count(); }

NodeView Cluster::node(NodeId id) const {
  const NodeState& n = state_->node(id);
  NodeView view{.id = id,
                .name = n.name,
                .cordoned = n.cordoned,
                .healthy = n.healthy,
                .cpu = n.cpu,
                .cpu_free = n.cpu_free,
                .memory = n.memory,
                .memory_free = n.memory_free,
                .devices = {},
                .tasks = n.tasks};
  view.devices.reserve(n.devices.size());
  for (const DeviceState& d : n.devices) {
    view.devices.push_back(DeviceView{.gpu_type = state_->gpu_type_name(d.type),
                                      .free = d.free,
                                      .memory = d.memory,
                                      .memory_free = d.memory_free,
                                      .nvlink_group = d.nvlink_group});
  }
  return view;
}

std::vector<NodeView> Cluster::nodes() const {
  std::vector<NodeView> views;
  views.reserve(state_->node_count());
  for (NodeId n = 0; n < state_->node_count(); ++n) views.push_back(node(n));
  return views;
}

std::vector<QueueView> Cluster::queues() const {
  std::vector<QueueView> views;
  views.reserve(state_->queue_count());
  for (QueueId q = 0; q < state_->queue_count(); ++q) {
    const QueueInfo& info = state_->queue(q);
    const QuotaLimits& gpus = state_->quota(q, 0);
    views.push_back(QueueView{.id = q,
                              .name = info.spec.name,
                              .parent = info.spec.parent,
                              .leaf = info.children.empty(),
                              .gpu_milli_used = state_->usage(q, 0),
                              .gpu_milli_nominal = gpus.limited ? gpus.nominal : 0,
                              .gpu_milli_max = gpus.max,
                              .recent_usage = state_->recent_usage(q)});
  }
  return views;
}

std::vector<RunningJob> Cluster::running() const {
  std::vector<RunningJob> jobs;
  jobs.reserve(state_->running().size());
  for (const auto& [id, job] : state_->running()) jobs.push_back(job);
  std::sort(jobs.begin(), jobs.end(),
            [](const RunningJob& a, const RunningJob& b) { return a.job.id < b.job.id; });
  return jobs;
}

const RunningJob* Cluster::FindRunning(JobId id) const { return state_->FindRunning(id); }

std::string Cluster::Describe(const TaskAllocation& task) const { return state_->Describe(task); }

Status Cluster::Apply(const Plan& plan, std::span<const Job> pending) {
  return state_->Apply(plan, pending);
}
Status Cluster::Bind(Job job, Allocation allocation, Millis now) {
  return state_->Bind(std::move(job), std::move(allocation), now);
}
Status Cluster::Unbind(JobId job, Millis now) { return state_->Unbind(job, now); }
Status Cluster::Evict(JobId job, Millis now) { return state_->Evict(job, now); }
Status Cluster::RecordCheckpoint(JobId job, Millis at) { return state_->RecordCheckpoint(job, at); }
Status Cluster::SetCordoned(NodeId node, bool cordoned) {
  return state_->SetCordoned(node, cordoned);
}
Status Cluster::SetHealthy(NodeId node, bool healthy) { return state_->SetHealthy(node, healthy); }
void Cluster::AccrueUsage(Millis now) { state_->AccrueUsage(now); }
Status Cluster::CheckInvariants() const { return state_->CheckInvariants(); }

}  // namespace arbiter
