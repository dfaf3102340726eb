#include "loadgen/workload.h"

#include <fmt/format.h>

#include <algorithm>
#include <nlohmann/json.hpp>

namespace arbiter::loadgen {

using Json = nlohmann::json;

namespace {

constexpr std::uint32_t kNodesPerLeaf = 32;
constexpr std::uint32_t kLeavesPerSpine = 16;
using bench::kGiB;

}  // namespace

std::string NodeName(std::uint32_t index) { return fmt::format("node-{}", index); }

Tokens MakeTokens(std::uint32_t watchers, std::uint32_t watchers_per_token) {
  // Fixed secrets: the server listens on loopback only and lives as long as the run.
  Tokens t;
  t.agent = "loadgen-agent-token-0001";
  t.user = "loadgen-user-token-00001";
  t.admin = "loadgen-admin-token-0001";
  const std::uint32_t per = std::max<std::uint32_t>(1, watchers_per_token);
  for (std::uint32_t i = 0; i < (watchers + per - 1) / per; ++i)
    t.watchers.push_back(fmt::format("loadgen-watcher-token-{:06}", i));
  return t;
}

std::string ClusterYaml(const ClusterShape& shape, const Tokens& tokens) {
  const std::int64_t gpus = std::int64_t{shape.nodes} * shape.gpus_per_node;
  std::string out = fmt::format(
      "# Written by arbiter_loadgen: {} nodes x {} {}.\n"
      "topology:\n"
      "  levels: [spine, leaf]\n"
      "priority_classes:\n"
      "  - {{name: P0, value: 1000, preemptible: false}}\n"
      "  - {{name: P1, value: 500}}\n"
      "  - {{name: P2, value: 100}}\n"
      "queues:\n"
      "  - name: org\n"
      "  - {{name: train, parent: org, quota: {{gpu: {{nominal: {}}}}}}}\n"
      "  - {{name: infer, parent: org, quota: {{gpu: {{nominal: {}}}}}}}\n"
      "  - {{name: batch, parent: org, quota: {{gpu: {{nominal: {}}}}}}}\n"
      "nodes:\n"
      "  - name: node-{{i}}\n"
      "    count: {}\n"
      "    gpus: {{model: {}, count: {}, memory: {}Mi, nvlink_group_size: {}}}\n"
      "    cpu: {}\n"
      "    memory: {}Mi\n"
      "    topology: {{spine: \"spine-{{i/{}}}\", leaf: \"leaf-{{i/{}}}\"}}\n"
      "server:\n"
      "  max_active_jobs_per_user: 0\n"
      "  max_active_gpus_per_user: 0\n"
      "  tokens:\n"
      "    - {{name: admin, token: {}, role: admin}}\n"
      "    - {{name: loadgen, token: {}, role: user, queues: [train, infer, batch], "
      "priority_classes: [P0, P1, P2]}}\n"
      "    - {{name: agent, token: {}, role: agent}}\n",
      shape.nodes, shape.gpus_per_node, kGpuModel, gpus * 50 / 100, gpus * 20 / 100,
      gpus - gpus * 50 / 100 - gpus * 20 / 100, shape.nodes, kGpuModel, shape.gpus_per_node,
      kGpuMemoryMiB, shape.gpus_per_node, kNodeCpuMilli / 1000, kNodeMemoryMiB,
      kNodesPerLeaf * kLeavesPerSpine, kNodesPerLeaf, tokens.admin, tokens.user, tokens.agent);
  for (std::size_t i = 0; i < tokens.watchers.size(); ++i) {
    out += fmt::format(
        "    - {{name: watcher-{}, token: {}, role: user, queues: [batch], "
        "priority_classes: [P2]}}\n",
        i, tokens.watchers[i]);
  }
  return out;
}

std::string JobBody(Rng& rng, std::uint64_t index, const ClusterShape& shape,
                    const JobTimes& times) {
  static const std::vector<std::int64_t> kShares = {100, 150, 200, 250, 300, 320, 400, 470,
                                                    500, 550, 600, 650, 700, 810, 900};
  static const std::vector<std::uint32_t> kShareWeights = {3, 2, 4, 6, 4, 10, 5, 14,
                                                           8, 3, 5, 9, 4, 16, 7};
  static const char* const kClasses[] = {"P0", "P1", "P2"};
  static const char* const kQueues[] = {"train", "infer", "batch"};
  const std::int64_t node_gpus = shape.gpus_per_node;

  std::size_t queue = rng.Weighted({45, 20, 35});
  const char* priority_class = kClasses[rng.Weighted({10, 30, 60})];
  std::int64_t tasks = 1, gpu_milli = 0, gpu_memory_mib = 0, cpu = 0, memory_gib = 0;
  Json topology;
  switch (rng.Weighted({30, 45, 10, 8, 5, 2})) {
    case 0:  // fractional, mostly inference
      gpu_milli = kShares[rng.Weighted(kShareWeights)];
      gpu_memory_mib = gpu_milli * 24;
      cpu = rng.Pick(std::vector<std::int64_t>{1, 2, 4, 4, 6, 8});
      memory_gib = rng.Pick(std::vector<std::int64_t>{4, 8, 16, 16, 32});
      if (rng.Percent(60)) queue = 1;
      break;
    case 1:  // one GPU
      gpu_milli = 1000;
      cpu = rng.Pick(std::vector<std::int64_t>{4, 8, 8, 12, 16});
      memory_gib = rng.Pick(std::vector<std::int64_t>{32, 48, 64, 64, 96, 128});
      break;
    case 2: {  // 2..4 GPUs on one node
      const std::int64_t n =
          std::min(node_gpus, rng.Pick(std::vector<std::int64_t>{2, 2, 2, 3, 4, 4}));
      gpu_milli = n * 1000;
      cpu = n * rng.Pick(std::vector<std::int64_t>{8, 10, 12});
      memory_gib = n * rng.Pick(std::vector<std::int64_t>{64, 96, 128});
      if (rng.Percent(20)) gpu_memory_mib = 40 * kGiB;
      break;
    }
    case 3:  // a node's GPUs: one task of all of them, or one task per device
      if (rng.Percent(50)) {
        gpu_milli = node_gpus * 1000;
        cpu = rng.Pick(std::vector<std::int64_t>{64, 80, 96});
        memory_gib = rng.Pick(std::vector<std::int64_t>{512, 768, 1024});
      } else {
        tasks = node_gpus;
        gpu_milli = 1000;
        cpu = rng.Pick(std::vector<std::int64_t>{8, 10, 12});
        memory_gib = rng.Pick(std::vector<std::int64_t>{64, 96, 128});
      }
      if (rng.Percent(80)) queue = 0;
      break;
    case 4:  // a gang of whole nodes, kept in one leaf
      tasks = std::vector<std::int64_t>{2, 3, 4, 6, 8}[rng.Weighted({40, 15, 25, 8, 12})];
      gpu_milli = node_gpus * 1000;
      cpu = rng.Pick(std::vector<std::int64_t>{64, 80, 96});
      memory_gib = rng.Pick(std::vector<std::int64_t>{512, 768, 960});
      topology = Json{{"level", "leaf"}, {"mode", rng.Percent(50) ? "required" : "preferred"}};
      queue = 0;
      break;
    default:  // CPU only
      cpu = rng.Pick(std::vector<std::int64_t>{2, 4, 8, 16, 32});
      memory_gib = rng.Pick(std::vector<std::int64_t>{8, 16, 32, 64, 128});
      queue = 2;
      break;
  }
  const std::int64_t runtime = rng.Between(times.min_runtime_ms, times.max_runtime_ms);
  const std::int64_t checkpoint = rng.Between(times.min_checkpoint_ms, times.max_checkpoint_ms);
  Json group{{"name", "worker"},
             {"tasks", tasks},
             {"cpu_milli", cpu * 1000},
             {"memory_mib", memory_gib * kGiB}};
  if (gpu_milli > 0) group["gpu_milli"] = gpu_milli;
  if (gpu_memory_mib > 0) group["gpu_memory_mib"] = gpu_memory_mib;
  Json job{
      {"name", fmt::format("lg-{}", index)},
      {"queue", kQueues[queue]},
      {"priority_class", priority_class},
      {"groups", Json::array({std::move(group)})},
      {"runtime_estimate_ms", runtime},
      {"checkpoint_interval_ms", checkpoint},
      {"argv", Json::array({"sleep", fmt::format("{:.3f}", static_cast<double>(runtime) / 1000)})},
      {"env",
       {{"LOADGEN_RUNTIME_MS", std::to_string(runtime)},
        {"LOADGEN_CHECKPOINT_MS", std::to_string(checkpoint)}}}};
  if (!topology.is_null()) job["topology"] = std::move(topology);
  return job.dump();
}

}  // namespace arbiter::loadgen
