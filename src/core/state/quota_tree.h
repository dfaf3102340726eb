// QuotaTree: the one owner of quota arithmetic. Queues form trees; each quota resource of each
// queue (0: all GPUs, "gpu"; 1 + t: GPU model t) has limits resolved from the queue specs once,
// and a usage, the milli-GPU its subtree runs. Whatever asks what a queue may take, whether it
// borrows, whether a running job sits on borrowed quota, what a queue guarantees or whether
// anything bounds it (the cycle's admit stage, the victim search, explain, lint, the simulator's
// guarantee metrics, the server's queue view and /metrics) asks here, so that the rules are said
// once (docs/configuration.md, "How the limits combine").
//
// The rules:
// - A resource is *limited* in a tree when some queue of the tree declares for it a nominal quota
//   above 0, a borrowing limit or a lending limit. A `max` alone caps its own queue and those
//   below it: it never limits the tree, so it never lowers what other queues may use.
// - A queue's nominal quota is its own plus its children's: the subtree's guarantee.
// - A queue within its nominal quota is never refused (whatever its siblings borrow). Above it,
//   it borrows from its parent, within its borrowing limit, from the unused nominal quota its
//   siblings lend (all of it, or their lending limits); a borrower never takes a limited tree
//   above its root's nominal quota. (A queue taking its guarantee back while its siblings still
//   run what they borrowed from it may: the tree then runs above its nominal quota by what they
//   borrowed, until that ends or is reclaimed.)
// - A max is checked on the queue and on every ancestor, limited or not.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "arbiter/model.h"
#include "arbiter/plan.h"
#include "arbiter/status.h"

namespace arbiter {

// Limits of one quota resource of one queue, resolved from the QueueSpecs (milli-GPU).
struct QuotaLimits {
  // Whether the resource's nominal quota rules this tree: some queue of it declares a nominal
  // quota above 0, a borrowing limit or a lending limit for it. A `max` alone caps its own queue
  // (and the queues below it) and never makes the tree limited: it must not lower what the
  // other queues may use.
  bool limited = false;
  std::int64_t nominal = 0;           // own nominal plus the children's (the subtree's guarantee)
  std::int64_t borrowing_limit = -1;  // -1: unlimited
  std::int64_t lending_limit = -1;    // -1: lends all unused nominal
  std::int64_t max = -1;              // -1: none; applies whether or not `limited`
};

// What quota says of a request: admitted or not, whether the queue would borrow, and where not,
// which limit of which queue and resource refused it, with the figures (milli-GPU).
struct QuotaDecision {
  bool ok = true;
  bool borrows = false;  // the queue would use more than its nominal quota
  Cause cause = Cause::kQuotaMax;
  QueueId at = kNone;  // the queue whose limit refused
  std::size_t resource = 0;
  std::int64_t after = 0;  // that queue's use with the request
  // kQuotaMax: the max; kQuotaBorrowingLimit: the borrowing limit; kQuotaCohort (or kQuotaMax at
  // a root): what the tree may use (its nominal quota less what its other queues hold back).
  std::int64_t limit = 0;
  bool tree = false;          // the limit is what the tree may use, not a max
  std::int64_t borrowed = 0;  // kQuotaBorrowingLimit: what it would borrow
  std::int64_t nominal = 0;   // kQuotaBorrowingLimit: the nominal quota it borrows above
};

// The quota resources of one GPU type that limit a queue: at most two (the type, then "gpu"),
// a fixed list since the victim search asks for every running job it weighs.
struct QuotaResources {
  std::array<std::size_t, 2> at{};
  std::size_t count = 0;
  bool empty() const { return count == 0; }
  const std::size_t* begin() const { return at.data(); }
  const std::size_t* end() const { return at.data() + count; }
};

class QuotaTree {
 public:
  struct QueueLink {
    QueueId parent = kNone;
    std::vector<QueueId> children;
    int depth = 0;
  };

  // Resolves the limits of `queues` (ids are positions; links give the tree) over `types` GPU
  // models; `find_type` names a model's id. Errors name the field (queues.NAME.quota.RESOURCE).
  static Result<QuotaTree> Resolve(
      std::span<const QueueSpec> queues, std::span<const QueueLink> links, std::size_t types,
      const std::function<std::optional<GpuTypeId>(const std::string&)>& find_type);

  std::size_t resource_count() const { return resources_; }
  const QuotaLimits& limits(QueueId q, std::size_t r) const { return limits_[q * resources_ + r]; }
  std::int64_t usage(QueueId q, std::size_t r) const { return usage_[q * resources_ + r]; }
  std::span<const std::int64_t> usage() const { return usage_; }

  // Adds `milli` of GPU type `type` to the queue and its ancestors (negative to take it off).
  void Charge(QueueId queue, GpuTypeId type, std::int64_t milli);

  // Whether `queue` may take `milli` more of GPU type `type` now.
  QuotaDecision Admit(QueueId queue, GpuTypeId type, std::int64_t milli) const;
  // Whether a request of `milli` can never pass the static limits of the queue and those above it
  // (max; nominal plus borrowing limit; a tree's nominal quota less what the other queues keep
  // back beyond their lending limits): Admit on the tree at rest.
  bool NeverAdmits(QueueId queue, GpuTypeId type, std::int64_t milli) const;

  // The resources that limit queue q on GPU type `type` (none for kNone).
  QuotaResources Limiting(QueueId q, GpuTypeId type) const;
  // How far queue q is above its nominal quota on GPU type t: the least over its limiting
  // resources; -1 when none limits it (it has no borrowed work).
  std::int64_t AboveNominal(QueueId q, GpuTypeId type) const;
  // Whether a running job of `milli` on GPU type `type` of queue q runs on borrowed quota: taking
  // it off leaves the queue at or above its nominal quota in every limiting resource (so reclaim
  // never takes a queue below its own guarantee).
  bool RunsOnBorrowed(QueueId q, GpuTypeId type, std::int64_t milli) const;

  // Whether queue q has a guarantee: a nominal quota above 0 in some limited resource.
  bool HasGuarantee(QueueId q) const;
  // Whether queue q may ever use more than its nominal quota in some limited resource (its own
  // limits: a borrowing limit not 0, and a max, where given, above nominal).
  bool MayBorrow(QueueId q) const;
  // Whether something bounds what queue q takes of resource r: the tree's nominal quota, or a
  // max on q or above it.
  bool Bounded(QueueId q, std::size_t r) const;
  // The GPUs (milli) queue q is guaranteed: its "gpu" nominal quota where that is limited, else
  // the sum of its limited models' nominal quotas.
  std::int64_t Guarantee(QueueId q) const;

 private:
  // Admit's walk; `at_rest`: on the tree with nothing running (NeverAdmits).
  QuotaDecision Decide(QueueId queue, GpuTypeId type, std::int64_t milli, bool at_rest) const;

  std::size_t resources_ = 1;
  std::vector<QueueLink> links_;
  std::vector<QuotaLimits> limits_;
  std::vector<std::int64_t> usage_;
};

}  // namespace arbiter
