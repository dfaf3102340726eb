// Queues, nodes, the event log and metrics as the API shows and changes them.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <vector>

#include "server/core.h"
#include "store/codec.h"

namespace arbiter::server {
namespace {

using Json = nlohmann::json;
using job::JobState;
using store::Event;
using store::EventKind;
using Role = config::TokenSpec::Role;

Json MilliOrNull(std::int64_t v) { return v < 0 ? Json(nullptr) : Json(v); }

// A quota body with its values in the cluster file's units (`"nominal": 16`, `"max": "0.5"`,
// `"borrowing_limit": "500m"`: config::ParseQuotaGpus, the parser of the file's quota) turned
// into the store's milli-GPU form (`nominal_milli`), which it may also use; a resource may mix
// both, not for the same limit. Errors name the field as given (`quota.H800.nominal`).
Result<Json> MilliQuota(const Json& quota) {
  Json out = Json::object();
  for (auto r = quota.begin(); r != quota.end(); ++r) {
    if (!r.value().is_object()) {
      out[r.key()] = r.value();  // the store's reader says what is wrong with it
      continue;
    }
    Json limits = Json::object();
    for (auto f = r.value().begin(); f != r.value().end(); ++f) {
      const std::string field = fmt::format("quota.{}.{}", r.key(), f.key());
      const bool in_gpus = std::find(config::kQuotaFields.begin(), config::kQuotaFields.end(),
                                     f.key()) != config::kQuotaFields.end();
      if (!in_gpus) {
        const bool in_milli = f.key().size() > 6 && f.key().ends_with("_milli");
        if (!in_milli) {
          return Status::InvalidArgument(
              fmt::format("unknown field '{}' (known: nominal, borrowing_limit, lending_limit, "
                          "max, in GPUs as 16, \"0.5\" or \"500m\"; or the same with _milli "
                          "in milli-GPU)",
                          f.key()),
              field);
        }
        limits[f.key()] = f.value();
        continue;
      }
      std::string text;
      if (f.value().is_string()) {
        text = f.value().get<std::string>();
      } else if (f.value().is_number()) {
        text = f.value().dump();
      } else {
        return Status::InvalidArgument(
            fmt::format("expected GPUs as a number or a string (16, 0.5, \"500m\"), got {}",
                        f.value().dump()),
            field);
      }
      if (r.value().contains(f.key() + "_milli")) {
        return Status::InvalidArgument(
            fmt::format("give {} or {}_milli, not both", f.key(), f.key()), field);
      }
      Result<MilliGpu> gpus = config::ParseQuotaGpus(text, field);
      if (!gpus.ok()) return gpus.status();
      limits[f.key() + "_milli"] = gpus->value();
    }
    out[r.key()] = std::move(limits);
  }
  return out;
}

}  // namespace

Answer Core::ListQueues() {
  // The cursor first (as the cluster map's): a client that watches from it may see an event
  // the listing already shows, never miss one.
  const std::uint64_t cursor = feed_->last_seq();
  std::lock_guard lock(mu_);
  DrainInboxLocked();
  state_->AccrueUsage(Now());
  const ClusterState& state = *state_;
  std::vector<std::map<std::string, std::int64_t>> counts(state.queue_count());
  for (const auto& [id, entry] : jobs_) {
    if (job::IsFinished(entry.stored.status.state)) continue;
    ++counts[entry.job.queue][job::JobStateName(entry.stored.status.state)];
  }
  Json queues = Json::array();
  for (QueueId q = 0; q < state.queue_count(); ++q) {
    const QueueInfo& info = state.queue(q);
    Json resources = Json::array();
    for (std::size_t r = 0; r < state.quota_resource_count(); ++r) {
      const QuotaLimits& limits = state.quota(q, r);
      const std::int64_t usage = state.usage(q, r);
      if (!limits.limited && limits.max < 0 && usage == 0) continue;
      Json res{{"resource", state.quota_resource_name(r)}, {"usage_milli", usage}};
      if (limits.limited) {
        res["nominal_milli"] = limits.nominal;
        res["borrowing_limit_milli"] = MilliOrNull(limits.borrowing_limit);
        res["lending_limit_milli"] = MilliOrNull(limits.lending_limit);
      }
      if (limits.limited || limits.max >= 0) res["max_milli"] = MilliOrNull(limits.max);
      resources.push_back(std::move(res));
    }
    Json jobs = Json::object();
    for (const auto& [s, n] : counts[q]) jobs[s] = n;
    queues.push_back(Json{
        {"name", info.spec.name},
        {"parent", info.parent == kNone ? Json(nullptr) : Json(state.queue(info.parent).spec.name)},
        {"leaf", info.children.empty()},
        {"priority", info.spec.priority},
        {"weight", info.spec.weight},
        {"quota", store::QuotaToJson(info.spec.quota)},
        {"resources", std::move(resources)},
        // The fair-share factor's input: GPU-seconds, decayed with the
        // half-life (scheduler.fair_share_half_life).
        {"recent_gpu_seconds", state.recent_usage(q) / 1e6},
        {"jobs", std::move(jobs)}});
  }
  return Answer(Json{{"queues", std::move(queues)}, {"cursor", cursor}});
}

Answer Core::SetQueueQuota(const Caller& caller, const std::string& queue, const Json& quota) {
  if (!caller.admin())
    return Status::PermissionDenied(fmt::format("{} may not change quotas (admin)", caller.name));
  std::lock_guard lock(mu_);
  auto find = [&](config::ClusterConfig& c) {
    return std::find_if(c.cluster.queues.begin(), c.cluster.queues.end(),
                        [&](const QueueSpec& s) { return s.name == queue; });
  };
  config::ClusterConfig changed = config_;
  auto it = find(changed);
  if (it == changed.cluster.queues.end())
    return Status::NotFound(fmt::format("no queue '{}'", queue), "queue");
  const Millis now = Now();
  if (quota.is_null()) {
    const config::ClusterConfig& base = base_;
    it->quota = std::find_if(base.cluster.queues.begin(), base.cluster.queues.end(),
                             [&](const QueueSpec& s) { return s.name == queue; })
                    ->quota;
  } else {
    Result<Json> milli = MilliQuota(quota);
    if (!milli.ok()) return std::move(milli).status();
    Result<std::map<std::string, QuotaSpec>> parsed = store::QuotaFromJson(*milli, "quota");
    if (!parsed.ok()) return std::move(parsed).status();
    it->quota = *parsed;
  }
  if (Result<ClusterState> check = ClusterState::Create(changed.cluster); !check.ok()) {
    return Status::InvalidArgument(check.status().message(), "quota");
  }
  Result<Event> written = quota.is_null()
                              ? store_->ResetQueueQuota(queue, now, caller.name)
                              : store_->SetQueueQuota({queue, it->quota, now, caller.name});
  if (!written.ok()) return std::move(written).status().WithContext("store: ");
  // The same configuration was just created: a failure here is a broken invariant, after the
  // store has recorded the change.
  if (Status st = RebuildState(changed); !st.ok()) {
    Check(st, "apply a quota change");
    return st;
  }
  config_ = std::move(changed);
  Wake();
  return Answer(Json{{"queue", queue}, {"quota", store::QuotaToJson(find(config_)->quota)}});
}

Answer Core::ListNodes() const {
  const std::uint64_t cursor = feed_->last_seq();  // first, as in ListQueues
  std::lock_guard lock(mu_);
  const ClusterState& state = *state_;
  Json nodes = Json::array();
  for (NodeId n = 0; n < state.node_count(); ++n) {
    const NodeState& node = state.node(n);
    Json gpus = Json::array();
    std::int64_t free = 0;
    for (std::size_t d = 0; d < node.devices.size(); ++d) {
      const DeviceState& dev = node.devices[d];
      free += dev.free.value();
      gpus.push_back(Json{{"index", d},
                          {"type", state.gpu_type_name(dev.type)},
                          {"free_milli", dev.free.value()},
                          {"memory_free_mib", dev.memory_free.value()}});
    }
    Json jobs = Json::array();
    for (const Resident& r : node.residents) jobs.push_back(r.job->job.id);
    std::string admin = node.cordoned ? "cordoned" : "schedulable";
    std::string reason;
    if (auto it = nodes_admin_.find(node.name); it != nodes_admin_.end()) {
      admin = store::NodeAdminStateName(it->second.state);
      reason = it->second.reason;
    }
    Json agent = nullptr;
    if (auto a = agent_nodes_.find(node.name); a != agent_nodes_.end()) {
      const AgentNode& an = a->second;
      agent = Json{{"state", an.lost         ? "lost"
                             : an.registered ? "ready"
                                             : "waiting"},
                   {"last_seen_ms", an.last_seen},
                   {"address", an.address},
                   {"reported", an.reported}};
      if (!an.problem.empty()) agent["problem"] = an.problem;
    }
    nodes.push_back(
        Json{{"name", node.name},
             {"state", admin},
             {"reason", reason},
             {"healthy", node.healthy},
             {"agent", std::move(agent)},
             {"gpus", std::move(gpus)},
             {"gpu_milli", static_cast<std::int64_t>(node.devices.size()) * kMilliPerGpu},
             {"gpu_free_milli", free},
             {"cpu_milli", node.cpu.value()},
             {"cpu_free_milli", node.cpu_free.value()},
             {"memory_mib", node.memory.value()},
             {"memory_free_mib", node.memory_free.value()},
             {"jobs", std::move(jobs)}});
  }
  return Answer(Json{{"nodes", std::move(nodes)}, {"cursor", cursor}});
}

Answer Core::ClusterMap() {
  // The cursor first: an event after it may already show in the map (the client applies it
  // again, which changes nothing), none before it is missing.
  const std::uint64_t cursor = feed_->last_seq();
  std::lock_guard lock(mu_);
  DrainInboxLocked();
  const ClusterState& state = *state_;
  const Topology& topology = state.topology();
  Json levels = Json::array();
  for (const std::string& level : topology.levels) levels.push_back(level);
  Json domains = Json::array();
  for (DomainId d = 0; d < state.domain_count(); ++d) {
    const Domain& domain = state.domain(d);
    domains.push_back(
        Json::array({domain.name, domain.level,
                     domain.parent == kNone ? -1 : static_cast<std::int64_t>(domain.parent)}));
  }
  Json types = Json::array();
  for (GpuTypeId t = 0; t < state.gpu_type_count(); ++t) types.push_back(state.gpu_type_name(t));
  Json queues = Json::array();
  for (QueueId q = 0; q < state.queue_count(); ++q) queues.push_back(state.queue(q).spec.name);
  Json classes = Json::array();
  for (PriorityClassId c = 0; c < state.priority_class_count(); ++c)
    classes.push_back(state.priority_class(c).name);
  // Device shapes: [type, NVLink group] of each device, shared by the nodes that have the same.
  std::map<std::vector<std::uint32_t>, std::size_t> shape_ids;
  Json shapes = Json::array();
  Json nodes = Json::array();
  for (NodeId n = 0; n < state.node_count(); ++n) {
    const NodeState& node = state.node(n);
    std::vector<std::uint32_t> shape;
    for (const DeviceState& dev : node.devices) {
      shape.push_back(dev.type);
      shape.push_back(dev.nvlink_group);
    }
    auto [it, fresh] = shape_ids.emplace(shape, shape_ids.size());
    if (fresh) shapes.push_back(shape);
    int admin = node.cordoned ? 1 : 0;  // 0 schedulable, 1 cordoned, 2 draining
    if (auto a = nodes_admin_.find(node.name); a != nodes_admin_.end())
      admin = a->second.state == store::NodeAdminState::kDraining ? 2 : admin;
    int health = node.healthy ? 0 : 1;  // 0 healthy, 1 unhealthy, 2 lost (its agent silent)
    if (auto a = agent_nodes_.find(node.name); a != agent_nodes_.end() && a->second.lost)
      health = 2;
    nodes.push_back(Json::array(
        {node.name, node.domains.empty() ? -1 : static_cast<std::int64_t>(node.domains.back()),
         it->second, admin, health}));
  }
  // Running jobs: [id, queue, class, user, start, last checkpoint, stopping by (-1: not
  // evicted), runs], a run being [node, first device, devices, milli-GPU of each].
  Json jobs = Json::array();
  for (const auto& [id, running] : state.running()) {
    Json runs = Json::array();
    for (const TaskAllocation& t : running.allocation.tasks) {
      for (std::size_t i = 0; i < t.devices.size();) {
        std::size_t j = i + 1;
        while (j < t.devices.size() && t.devices[j].device == t.devices[j - 1].device + 1 &&
               t.devices[j].gpu == t.devices[i].gpu)
          ++j;
        runs.push_back(Json::array({t.node, t.devices[i].device, j - i, t.devices[i].gpu.value()}));
        i = j;
      }
    }
    auto stopping = draining_.find(id);
    jobs.push_back(
        Json::array({id, running.job.queue, running.job.priority_class, running.job.user,
                     running.start_time, running.last_checkpoint,
                     stopping == draining_.end() ? -1 : stopping->second, std::move(runs)}));
  }
  return Answer(Json{{"cursor", cursor},
                     {"levels", std::move(levels)},
                     {"domains", std::move(domains)},
                     {"gpu_types", std::move(types)},
                     {"queues", std::move(queues)},
                     {"priority_classes", std::move(classes)},
                     {"shapes", std::move(shapes)},
                     {"nodes", std::move(nodes)},
                     {"jobs", std::move(jobs)}});
}

void Core::SampleUsageLocked(Millis now) {
  constexpr std::size_t kSamples = 6 * 60;  // 6 hours, a sample a minute
  last_usage_sample_ = now;
  const ClusterState& state = *state_;
  UsageSample sample;
  sample.time = now;
  const std::size_t resources = state.quota_resource_count();
  sample.milli.reserve(state.queue_count() * resources);
  for (QueueId q = 0; q < state.queue_count(); ++q) {
    for (std::size_t r = 0; r < resources; ++r) sample.milli.push_back(state.usage(q, r));
  }
  // The queues or GPU types changed (a new configuration): the old samples no longer line up.
  if (!usage_samples_.empty() && usage_samples_.back().milli.size() != sample.milli.size())
    usage_samples_.clear();
  usage_samples_.push_back(std::move(sample));
  while (usage_samples_.size() > kSamples) usage_samples_.pop_front();
}

Answer Core::QueueUsageHistory() {
  std::lock_guard lock(mu_);
  DrainInboxLocked();
  const ClusterState& state = *state_;
  const std::size_t resources = state.quota_resource_count();
  // The samples and one of this moment, so that the chart ends now.
  std::vector<const UsageSample*> samples;
  for (const UsageSample& s : usage_samples_) samples.push_back(&s);
  UsageSample current;
  current.time = Now();
  for (QueueId q = 0; q < state.queue_count(); ++q) {
    for (std::size_t r = 0; r < resources; ++r) current.milli.push_back(state.usage(q, r));
  }
  if (!samples.empty() && samples.back()->milli.size() != current.milli.size()) samples.clear();
  samples.push_back(&current);
  Json times = Json::array();
  for (const UsageSample* s : samples) times.push_back(s->time);
  Json queues = Json::array();
  for (QueueId q = 0; q < state.queue_count(); ++q) {
    Json series = Json::object();
    for (std::size_t r = 0; r < resources; ++r) {
      const std::size_t i = q * resources + r;
      const bool used = std::any_of(samples.begin(), samples.end(),
                                    [&](const UsageSample* s) { return s->milli[i] != 0; });
      if (!used && !state.quota(q, r).limited) continue;
      Json values = Json::array();
      for (const UsageSample* s : samples) values.push_back(s->milli[i]);
      series[state.quota_resource_name(r)] = std::move(values);
    }
    queues.push_back(Json{{"name", state.queue(q).spec.name}, {"usage_milli", std::move(series)}});
  }
  return Answer(Json{{"period_ms", 60 * kMillisPerSecond},
                     {"times_ms", std::move(times)},
                     {"queues", std::move(queues)}});
}

Answer Core::SetNodeState(const Caller& caller, const std::string& name,
                          store::NodeAdminState admin, const std::string& reason) {
  if (!caller.admin()) {
    return Status::PermissionDenied(
        fmt::format("{} may not cordon, uncordon or drain nodes (admin)", caller.name));
  }
  Changes lock(*this);
  std::optional<NodeId> node = state_->FindNode(name);
  if (!node) return Status::NotFound(fmt::format("no node '{}'", name), "node");
  const Millis now = Now();
  Result<Event> written = store_->SetNodeState({name, admin, reason, now, caller.name});
  if (!written.ok()) return std::move(written).status().WithContext("store: ");
  const bool cordoned = admin != store::NodeAdminState::kSchedulable;
  Check(state_->SetCordoned(*node, cordoned), "cordon a node");
  for (NodeSpec& spec : config_.cluster.nodes) {
    if (spec.name == name) spec.cordoned = cordoned;
  }
  if (cordoned) {
    nodes_admin_[name] = {name, admin, reason, now, caller.name};
  } else {
    nodes_admin_.erase(name);
  }
  if (admin == store::NodeAdminState::kDraining) {
    // Move its jobs off: requeued (not counted as evictions), placed again by the next cycle.
    std::vector<Event> events;
    for (const Resident& r : state_->node(*node).residents) {
      Event ev;
      ev.time = now;
      ev.kind = EventKind::kRequeued;
      ev.job = r.job->job.id;
      ev.actor = caller.name;
      ev.message = fmt::format("node {} drained", name);
      events.push_back(std::move(ev));
    }
    std::vector<JobId> ids;
    for (const Event& ev : events) ids.push_back(ev.job);
    if (!events.empty()) {
      if (Status st = AppendLocked(std::move(events)); !st.ok())
        return std::move(st).WithContext("store: ");
      for (JobId id : ids) Check(state_->Unbind(id, now), "requeue a drained node's job");
    }
  }
  Wake();
  return Answer(Json{{"node", name}, {"state", store::NodeAdminStateName(admin)}});
}

// ---- Events and metrics ----

Result<std::vector<EventFeed::Item>> Core::Events(std::uint64_t cursor, std::size_t limit) const {
  if (std::optional<std::vector<EventFeed::Item>> recent = feed_->Read(cursor, limit))
    return std::move(recent).value();
  // Before the feed's window: from the store (serialized for this reader alone).
  Result<std::vector<Event>> events = store_->EventsSince(cursor, limit);
  if (!events.ok()) return std::move(events).status().WithContext("store: ");
  std::vector<EventFeed::Item> items;
  items.reserve(events->size());
  for (const Event& e : *events) items.push_back(EventFeed::Make(e));
  return items;
}

void Core::CollectMetrics(std::vector<prometheus::MetricFamily>& out) {
  Scrape scrape;
  {
    std::lock_guard lock(mu_);
    DrainInboxLocked();
    state_->AccrueUsage(Now());
    const ClusterState& state = *state_;
    auto gpus = [](std::int64_t milli) { return static_cast<double>(milli) / kMilliPerGpu; };

    // Quotas and usage, per queue and quota resource (`gpu`: all types together), as
    // GET /v1/queues shows them; a limit is written only where one is set.
    auto& nominal = scrape.Gauge("arbiter_queue_nominal_quota_gpus",
                                 "GPUs guaranteed to the queue (its own nominal quota plus its "
                                 "children's), per GPU type (gpu_type=\"gpu\": any type).");
    auto& borrowing = scrape.Gauge("arbiter_queue_borrowing_limit_gpus",
                                   "GPUs the queue may borrow above its nominal quota, where "
                                   "limited.");
    auto& lending = scrape.Gauge("arbiter_queue_lending_limit_gpus",
                                 "GPUs of its unused nominal quota the queue may lend, where "
                                 "limited.");
    auto& max_gpus =
        scrape.Gauge("arbiter_queue_max_gpus", "GPUs the queue may never exceed, where set.");
    auto& usage = scrape.Gauge("arbiter_queue_resource_usage_gpus",
                               "GPUs held by the queue's running jobs (and its children's), per "
                               "GPU type (gpu_type=\"gpu\": any type).");
    for (QueueId q = 0; q < state.queue_count(); ++q) {
      const std::string& queue = state.queue(q).spec.name;
      for (std::size_t r = 0; r < state.quota_resource_count(); ++r) {
        const QuotaLimits& limits = state.quota(q, r);
        const std::int64_t used = state.usage(q, r);
        if (!limits.limited && limits.max < 0 && used == 0) continue;
        const prometheus::Labels labels{{"queue", queue},
                                        {"gpu_type", state.quota_resource_name(r)}};
        usage.Add(labels).Set(gpus(used));
        if (limits.max >= 0) max_gpus.Add(labels).Set(gpus(limits.max));
        if (!limits.limited) continue;
        nominal.Add(labels).Set(gpus(limits.nominal));
        if (limits.borrowing_limit >= 0) borrowing.Add(labels).Set(gpus(limits.borrowing_limit));
        if (limits.lending_limit >= 0) lending.Add(labels).Set(gpus(limits.lending_limit));
      }
    }

    // Pending jobs and the GPUs they ask for, per leaf queue and the stage that last refused
    // them (`unscheduled`: no cycle has looked at them yet).
    auto& pending_jobs = scrape.Gauge("arbiter_queue_pending_jobs",
                                      "Jobs waiting to be placed, per leaf queue and reason (the "
                                      "stage of the last cycle that refused them).");
    auto& pending_gpus = scrape.Gauge("arbiter_queue_pending_gpus",
                                      "GPUs asked for by the jobs waiting to be placed, per leaf "
                                      "queue and reason.");
    auto& held_jobs = scrape.Gauge("arbiter_queue_held_jobs", "Jobs held, per leaf queue.");
    for (QueueId q = 0; q < state.queue_count(); ++q) {
      if (!state.queue(q).children.empty()) continue;
      held_jobs.Add({{"queue", state.queue(q).spec.name}});
    }
    for (const auto& [id, entry] : jobs_) {
      const JobState s = entry.stored.status.state;
      const std::string& queue = state.queue(entry.job.queue).spec.name;
      if (s == JobState::kHeld) held_jobs.Add({{"queue", queue}}).Increment();
      if (s != JobState::kPending) continue;
      const prometheus::Labels labels{
          {"queue", queue}, {"reason", entry.reason.empty() ? "unscheduled" : entry.reason_stage}};
      pending_jobs.Add(labels).Increment();
      std::int64_t milli = 0;
      for (const TaskGroup& g : entry.job.groups) milli += g.count * g.request.gpu.value();
      pending_gpus.Add(labels).Increment(gpus(milli));
    }

    // GPUs: on the nodes and allocated, per GPU type.
    std::vector<std::int64_t> allocated(state.gpu_type_count(), 0);
    for (const auto& [id, running] : state.running()) {
      for (const TaskAllocation& t : running.allocation.tasks) {
        for (const DeviceShare& d : t.devices)
          allocated[running.allocation.gpu_type] += d.gpu.value();
      }
    }
    std::vector<std::int64_t> capacity(state.gpu_type_count(), 0);
    for (NodeId n = 0; n < state.node_count(); ++n) {
      for (const DeviceState& dev : state.node(n).devices) ++capacity[dev.type];
    }
    scrape.Gauge("arbiter_running_jobs", "Jobs holding an allocation.")
        .Add({})
        .Set(static_cast<double>(state.running().size()));
    auto& allocated_gpus =
        scrape.Gauge("arbiter_allocated_gpus", "GPUs allocated to running jobs, per GPU type.");
    auto& capacity_gpus =
        scrape.Gauge("arbiter_capacity_gpus", "GPUs of the configured nodes, per GPU type.");
    for (GpuTypeId t = 0; t < state.gpu_type_count(); ++t) {
      allocated_gpus.Add({{"gpu_type", state.gpu_type_name(t)}}).Set(gpus(allocated[t]));
      capacity_gpus.Add({{"gpu_type", state.gpu_type_name(t)}})
          .Set(static_cast<double>(capacity[t]));
    }

    // Nodes by administrative state and health (every combination, zeros included).
    auto& nodes = scrape.Gauge("arbiter_nodes",
                               "Nodes per administrative state (schedulable, cordoned, draining) "
                               "and health (healthy, unhealthy, lost: its agent fell silent).");
    for (const char* admin : {"schedulable", "cordoned", "draining"}) {
      for (const char* health : {"healthy", "unhealthy", "lost"})
        nodes.Add({{"state", admin}, {"health", health}});
    }
    for (NodeId n = 0; n < state.node_count(); ++n) {
      const NodeState& node = state.node(n);
      std::string admin = node.cordoned ? "cordoned" : "schedulable";
      if (auto it = nodes_admin_.find(node.name); it != nodes_admin_.end())
        admin = store::NodeAdminStateName(it->second.state);
      std::string health = node.healthy ? "healthy" : "unhealthy";
      if (auto a = agent_nodes_.find(node.name); a != agent_nodes_.end() && a->second.lost)
        health = "lost";
      nodes.Add({{"state", admin}, {"health", health}}).Increment();
    }
  }
  scrape.CollectInto(out);
  metrics_.CollectInto(out);
}

}  // namespace arbiter::server
