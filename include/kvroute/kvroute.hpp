// -----------------------------------------------------------------------------
// File: kvroute/kvroute.hpp
// -----------------------------------------------------------------------------
//
// The umbrella header: includes every public kvroute header except the
// opt-in fmt formatters (kvroute/fmt.hpp).
//
// Thread safety: see each component's header.
//
// Example:
//
//   #include <kvroute/kvroute.hpp>
//
//   kvroute::Router<kvroute::RoundRobin> router;
//   router.add_worker({.url = "http://10.0.0.1:30000"}).IgnoreError();
//   kvroute::Selection s = router.select({.text = "Hello"});

#ifndef KVROUTE_KVROUTE_HPP_
#define KVROUTE_KVROUTE_HPP_

#include "kvroute/any_policy.hpp"
#include "kvroute/circuit_breaker.hpp"
#include "kvroute/clock.hpp"
#include "kvroute/config.hpp"
#include "kvroute/decision.hpp"
#include "kvroute/feedback.hpp"
#include "kvroute/load_tracker.hpp"
#include "kvroute/metrics.hpp"
#include "kvroute/pd_router.hpp"
#include "kvroute/policies/bucket.hpp"
#include "kvroute/policies/cache_aware.hpp"
#include "kvroute/policies/consistent_hashing.hpp"
#include "kvroute/policies/least_prefill.hpp"
#include "kvroute/policies/manual.hpp"
#include "kvroute/policies/power_of_two.hpp"
#include "kvroute/policies/prefix_hash.hpp"
#include "kvroute/policies/random.hpp"
#include "kvroute/policies/round_robin.hpp"
#include "kvroute/policy.hpp"
#include "kvroute/policy_config.hpp"
#include "kvroute/radix_tree.hpp"
#include "kvroute/request.hpp"
#include "kvroute/retry.hpp"
#include "kvroute/router.hpp"
#include "kvroute/select_worker.hpp"
#include "kvroute/tie_break.hpp"
#include "kvroute/version.hpp"
#include "kvroute/worker_set.hpp"

#endif  // KVROUTE_KVROUTE_HPP_
