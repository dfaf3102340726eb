// Every cluster state the tests make checks all of its invariants after each discarded
// transaction (ClusterState::set_check_discards), whatever the build type.
#include "core/state/cluster_state.h"

namespace {
const bool kCheckDiscards = [] {
  arbiter::ClusterState::SetCheckDiscardsByDefault(true);
  return true;
}();
}  // namespace
