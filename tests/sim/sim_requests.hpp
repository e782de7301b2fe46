// kvroute_sim tests: requests and traces built in the test.
#ifndef KVROUTE_TESTS_SIM_SIM_REQUESTS_HPP_
#define KVROUTE_TESTS_SIM_SIM_REQUESTS_HPP_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "sim/trace.hpp"

namespace kvtest {

// A request at t seconds of `tokens` prompt tokens over blocks `ids` (one per
// 512 tokens), `out` output tokens.
inline kvsim::SimRequest block_request(double t, std::vector<std::uint64_t> ids,
                                       std::int64_t tokens, std::string session = {},
                                       std::int64_t out = 10) {
  kvsim::SimRequest r;
  r.t = t;
  r.t_trace = t;
  r.ids = std::move(ids);
  r.input_tokens = tokens;
  r.output_tokens = out;
  r.session = std::move(session);
  kvsim::chain_ids(r);
  return r;
}

// A trace of `rs` (in time order), its sessions linked.
inline kvsim::Trace make_trace(std::vector<kvsim::SimRequest> rs, bool sessions) {
  kvsim::Trace tr;
  tr.name = "test";
  tr.requests = std::move(rs);
  tr.has_sessions = sessions;
  kvsim::link_sessions(tr);
  return tr;
}

}  // namespace kvtest

#endif  // KVROUTE_TESTS_SIM_SIM_REQUESTS_HPP_
