// -----------------------------------------------------------------------------
// File: kvroute/pd_router.hpp
// -----------------------------------------------------------------------------
//
// `PdRouter<PrefillPolicy, DecodePolicy>` picks a (prefill, decode) worker
// pair for prefill/decode disaggregation. Each pool is its own Router - its
// own workers, load counts and policy instance with its own state - so a
// cache_aware prefill pool keeps its prefix affinity whatever the decode pool
// does. (The gateway's gRPC PD path shares one cache_aware instance between
// the pools: decode's lookup matches a prefill worker, does not find it among
// the decode workers, deletes its tree entry and so erases prefill affinity
// on every request.) `Bucket` is the natural prefill policy.
//
// Thread safety: thread-safe, as Router is.
//
// Example:
//
//   kvroute::PdRouter<kvroute::Bucket, kvroute::RoundRobin> pd;
//   pd.prefill().add_worker({.url = "http://prefill-0:30000"}).IgnoreError();
//   pd.decode().add_worker({.url = "http://decode-0:30001"}).IgnoreError();
//   kvroute::PdSelection s = pd.select({.text = prompt});
//   if (!s) return reply_503(s.failed_leg());          // "prefill" or "decode"
//   auto pg = pd.prefill().dispatch(s.prefill);
//   auto dg = pd.decode().dispatch(s.decode);

#ifndef KVROUTE_PD_ROUTER_HPP_
#define KVROUTE_PD_ROUTER_HPP_

#include <span>
#include <string_view>
#include <utility>

#include "kvroute/config.hpp"
#include "kvroute/policy.hpp"
#include "kvroute/router.hpp"

KVROUTE_NAMESPACE_BEGIN

struct PdSelection {
  Selection prefill;
  Selection decode;

  explicit operator bool() const noexcept {
    return static_cast<bool>(prefill) && static_cast<bool>(decode);
  }
  // "prefill" or "decode" for the first leg that found no worker, else "".
  std::string_view failed_leg() const noexcept {
    if (!prefill) return "prefill";
    if (!decode) return "decode";
    return "";
  }
};

template <Policy PrefillPolicy, Policy DecodePolicy>
class PdRouter {
 public:
  PdRouter() = default;
  // Each argument constructs that pool's policy (an Options struct, or an
  // AnyPolicy from make_policy).
  template <class PrefillArg, class DecodeArg>
  PdRouter(PrefillArg&& prefill_arg, DecodeArg&& decode_arg)
      : prefill_(std::forward<PrefillArg>(prefill_arg)),
        decode_(std::forward<DecodeArg>(decode_arg)) {}

  Router<PrefillPolicy>& prefill() noexcept { return prefill_; }
  Router<DecodePolicy>& decode() noexcept { return decode_; }

  // Selects the prefill worker, then the decode worker, each by its own
  // policy over its own pool; a retry passes the workers to avoid per leg.
  // The decode leg is not selected when the prefill leg found no worker.
  PdSelection select(const RequestView& request, std::span<const WorkerId> exclude_prefill = {},
                     std::span<const WorkerId> exclude_decode = {}) noexcept {
    PdSelection s;
    s.prefill = prefill_.select(request, exclude_prefill);
    if (s.prefill) s.decode = decode_.select(request, exclude_decode);
    return s;
  }

  void maintain() {
    prefill_.maintain();
    decode_.maintain();
  }

 private:
  Router<PrefillPolicy> prefill_;
  Router<DecodePolicy> decode_;
};

KVROUTE_NAMESPACE_END

#endif  // KVROUTE_PD_ROUTER_HPP_
