// The router fuzz driver, shared by the libFuzzer target (router_fuzz.cpp),
// its corpus replay and a Catch2 test (router_driver_test.cpp). It builds
// `Router<AnyPolicy>` from a PolicyConfig (any policy, any valid flag values)
// on a ManualClock and decodes the rest of its input into operations: worker
// adds (single and batch, valid or not, duplicate URLs, new models),
// removes, health and circuit flips, selections (with exclusion lists,
// routing and target headers, new models), dispatches, guard releases in
// any order (release, release_tokens, destruction, move-assignment),
// report_cached with any values, load probes, clock jumps and maintain().
//
// After every operation it checks, against its own record of the workers
// and of the guards it holds:
//   * every decision names a live, healthy, circuit-closed, non-excluded
//     worker of the request's model group, from the selection's snapshot;
//     "no worker" only when none is eligible (kNoWorkers / kNoHealthyWorkers
//     as the group says) or as consistent_hashing's strict target miss; the
//     branch is one the policy documents; and per policy (router_checks.hpp):
//     consistent_hashing honours a target header naming an eligible worker
//     and misses otherwise; its keyed branches and prefix_hash's repeat for
//     the same selection; cache_aware takes `imbalanced` exactly when its
//     balance rule says so, and a least-loaded worker unless it hits;
//     least_prefill takes a worker of least predicted work, claims its
//     match with its claim's recency as ticket, and names the branch that
//     says why; manual's branch follows its entry (TTL exact), a hit names
//     the first eligible candidate and the entry then holds the choice;
//   * the snapshot holds exactly the live workers with their flags;
//   * LoadTracker's in-flight, token, distinct-key and processed counts
//     equal what the held guards carry (so every load returns to zero when
//     the last guard goes), and each guard's own view agrees;
//   * cache_aware / least_prefill trees pass check_invariants and
//     recount_sizes, hold only live workers, keep each worker within
//     max_tree_size and their stats().bytes within the documented bound
//     (tests/reliability/memory_bound.hpp) for the workers they have held;
//     report_cached's EvictResult matches what the worker lost;
//   * manual's entry count equals its live entries, and maintain() leaves
//     no entry idle for max_idle; bucket's ranges cover every length once.
// At the end every guard is released (loads must be zero), every worker is
// removed (trees must be empty) and a selection must find no workers.
#ifndef KVROUTE_TESTS_FUZZ_ROUTER_DRIVER_HPP_
#define KVROUTE_TESTS_FUZZ_ROUTER_DRIVER_HPP_

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "fuzz/byte_reader.hpp"
#include "fuzz/router_checks.hpp"
#include "fuzz/router_inputs.hpp"
#include "kvroute/any_policy.hpp"
#include "kvroute/clock.hpp"
#include "kvroute/detail/utf8.hpp"
#include "kvroute/router.hpp"

namespace kvfuzz {

// What one run did, so that a test can tell a run that exercised the router
// from one that only added workers.
struct RouterRunStats {
  std::size_t ops = 0;
  std::size_t routed = 0;       // selections that named a worker
  std::size_t not_routed = 0;   // selections that named none
  std::size_t dispatched = 0;   // guards that counted a load
  std::size_t dropped = 0;      // report_cached calls that dropped claims
  std::size_t tree_checks = 0;  // trees checked (invariants, budget, bytes)

  RouterRunStats& operator+=(const RouterRunStats& o) {
    ops += o.ops;
    routed += o.routed;
    not_routed += o.not_routed;
    dispatched += o.dispatched;
    dropped += o.dropped;
    tree_checks += o.tree_checks;
    return *this;
  }
};

class RouterDriver {
 public:
  RouterDriver(const kvroute::PolicyConfig& cfg, std::chrono::nanoseconds start)
      : cfg_(cfg), clock_(start) {}

  const RouterRunStats& stats() const { return stats_; }

  // Runs every operation in `in`; returns "" or the first failed check
  // with the operations that led to it.
  std::string run(ByteReader& in) {
    log_ << "config: " << describe_config(cfg_) << ", clock " << clock_.now().count() << "\n";
    absl::StatusOr<kvroute::AnyPolicy> policy = kvroute::make_policy(cfg_, clock_);
    if (!policy.ok()) return fail("make_policy: " + std::string(policy.status().message()));
    router_ = std::make_unique<Router>(*std::move(policy));
    if (router_->policy().name() != kvroute::to_string(cfg_.policy)) return fail("policy name");
    for (int ops = 0; !in.empty() && ops < kMaxOps; ++ops) {
      ++stats_.ops;
      if (std::string e = step(in); !e.empty()) return fail(e);
      if (std::string e = verify(); !e.empty()) return fail(e);
    }
    if (std::string e = finish(); !e.empty()) return fail(e);
    return "";
  }

 private:
  using Router = kvroute::Router<kvroute::AnyPolicy>;
  using WorkerId = kvroute::WorkerId;
  static constexpr int kMaxOps = 300;
  static constexpr std::size_t kMaxHeld = 48;

  struct WorkerModel {
    std::string url;
    std::string model;
    bool healthy = true;
    bool circuit_open = false;
    bool live = true;
    std::uint64_t dispatched = 0;
  };
  // What a held guard must carry.
  struct Load {
    std::uint32_t worker = 0;
    std::int64_t tokens = 0;
    std::string key;
  };
  struct Held {
    OwnedRequest req;
    kvroute::Selection sel;
    kvroute::LoadGuard guard;
    std::optional<Load> load;
  };

  std::string fail(const std::string& e) const { return log_.str() + "FAILED: " + e; }

  template <class P>
  P* policy() {
    return router_->policy().get<P>();
  }
  bool tree_policy() const {
    return cfg_.policy == kvroute::PolicyKind::kCacheAware ||
           cfg_.policy == kvroute::PolicyKind::kLeastPrefill;
  }
  const kvroute::ApproxRadixTree* tree(const std::string& model) {
    if (auto* p = policy<kvroute::CacheAware>()) return p->tree(model);
    if (auto* p = policy<kvroute::LeastPrefill>()) return p->tree(model);
    return nullptr;
  }
  bool live(std::uint32_t id) const { return id < workers_.size() && workers_[id].live; }
  // An id handed out, or one of the two after them.
  std::uint32_t pick_id(ByteReader& in) const {
    return static_cast<std::uint32_t>(in.next() % (workers_.size() + 2));
  }
  std::int64_t now() const { return clock_.now().count(); }
  std::int64_t max_idle_ns() const { return std::chrono::nanoseconds(cfg_.max_idle).count(); }

  // Runs one operation. Notes in trees_touched_ whether it can have changed
  // a policy tree (a selection inserts and may sweep every tree; removal,
  // feedback and maintain() evict), so that verify() checks them only then.
  std::string step(ByteReader& in) {
    const std::uint8_t op = in.next() % 12;
    trees_touched_ = op == 2 || (op >= 4 && op <= 6) || op >= 9;
    switch (op) {
      case 0:
      case 1:
        return add(in);
      case 2:
        return remove(in);
      case 3:
        return flip(in);
      case 4:
      case 5:
      case 6:
        return select(in);
      case 7:
        if (held_.empty()) return "";
        log_ << "again: ";
        return dispatch(*held_[in.next() % held_.size()], in);
      case 8:
        return release(in);
      case 9:
        return report(in);
      default:
        return tick(in);
    }
  }

  // --- workers ---------------------------------------------------------------

  absl::StatusCode expected_add(const std::vector<FuzzSpec>& specs) const {
    std::set<std::string> seen;
    for (const FuzzSpec& s : specs) {
      if (!s.valid) return absl::StatusCode::kInvalidArgument;
      for (const WorkerModel& w : workers_) {
        if (w.live && w.url == s.spec.url) return absl::StatusCode::kAlreadyExists;
      }
      if (!seen.insert(s.spec.url).second) return absl::StatusCode::kAlreadyExists;
    }
    return absl::StatusCode::kOk;
  }

  std::string add(ByteReader& in) {
    const std::size_t n = in.next() % 4;  // 0: add_worker, else a batch of n
    std::vector<FuzzSpec> specs(std::max<std::size_t>(n, 1));
    for (FuzzSpec& s : specs) s = inputs_.spec(in);
    log_ << (n == 0 ? "add_worker(" : "add_workers(");
    std::vector<kvroute::WorkerSpec> plain;
    for (const FuzzSpec& s : specs) {
      log_ << "{" << show_bytes(s.spec.url) << ", " << show_bytes(s.spec.model.substr(0, 16))
           << (s.spec.healthy ? "" : ", unhealthy") << "} ";
      plain.push_back(s.spec);
    }
    log_ << ")\n";
    absl::Status st;
    std::vector<WorkerId> ids;
    if (n == 0) {
      absl::StatusOr<WorkerId> id = router_->add_worker(plain[0]);
      st = id.status();
      if (id.ok()) ids.push_back(*id);
    } else {
      absl::StatusOr<std::vector<WorkerId>> got = router_->add_workers(plain);
      st = got.status();
      if (got.ok()) ids = *got;
    }
    const absl::StatusCode want = expected_add(specs);
    if (st.code() != want) {
      return "add: " + st.ToString() + ", expected " + absl::StatusCodeToString(want);
    }
    if (const std::string m(st.message()); !printable(m))
      return "add: raw bytes in " + show_bytes(m);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (ids[i].value != workers_.size()) return "add: id " + std::to_string(ids[i].value);
      workers_.push_back({specs[i].spec.url, specs[i].spec.model, specs[i].spec.healthy});
    }
    return "";
  }

  std::string remove(ByteReader& in) {
    const std::uint32_t id = pick_id(in);
    log_ << "remove_worker(" << id << ")\n";
    const absl::Status st = router_->remove_worker(WorkerId{id});
    if (st.ok() != live(id) || (!st.ok() && st.code() != absl::StatusCode::kNotFound)) {
      return "remove_worker: " + st.ToString();
    }
    if (st.ok()) workers_[id].live = false;
    return "";
  }

  std::string flip(ByteReader& in) {
    const std::uint8_t b = in.next();
    const std::uint32_t id = pick_id(in);
    const bool circuit = (b & 1) != 0;
    const bool good = (b & 6) != 0;  // three times in four
    const bool value = circuit ? !good : good;
    log_ << (circuit ? "set_circuit_open(" : "set_healthy(") << id << ", " << value << ")\n";
    const absl::Status st = circuit ? router_->circuits().set_circuit_open(WorkerId{id}, value)
                                    : router_->set_healthy(WorkerId{id}, value);
    if (st.ok() != live(id) || (!st.ok() && st.code() != absl::StatusCode::kNotFound)) {
      return "flip: " + st.ToString();
    }
    if (st.ok()) (circuit ? workers_[id].circuit_open : workers_[id].healthy) = value;
    return "";
  }

  // --- selections and guards -------------------------------------------------

  std::vector<WorkerId> exclusions(ByteReader& in) const {
    std::vector<WorkerId> out;
    const int n = std::max(in.next() % 8 - 4, 0);
    for (int i = 0; i < n; ++i) {
      const std::uint8_t b = in.next();
      out.push_back(b == 0xFF ? WorkerId{}
                              : WorkerId{static_cast<std::uint32_t>(b % (workers_.size() + 2))});
    }
    return out;
  }

  // The request's group (live workers of its model, or of any for "", plus
  // the model-less ones) and the members a selection may choose.
  Group group(const kvroute::RequestView& r, const std::vector<WorkerId>& excluded) const {
    Group g;
    for (std::uint32_t id = 0; id < workers_.size(); ++id) {
      const WorkerModel& w = workers_[id];
      if (!w.live || !(r.model.empty() || w.model.empty() || w.model == r.model)) continue;
      g.members.push_back(id);
      if (w.healthy && !w.circuit_open &&
          std::find(excluded.begin(), excluded.end(), WorkerId{id}) == excluded.end()) {
        g.eligible.push_back(id);
      }
    }
    return g;
  }

  std::string select(ByteReader& in) {
    auto h = std::make_unique<Held>();
    h->req = inputs_.request(in);
    const std::vector<WorkerId> excluded = exclusions(in);
    const std::uint8_t then = in.next() % 4;
    log_ << "select(" << h->req.describe();
    for (WorkerId x : excluded) log_ << ", excluding " << x.value;
    log_ << ")\n";
    std::vector<kvroute::Header> scratch;
    const kvroute::RequestView r = h->req.view(scratch);
    const Group g = group(r, excluded);
    std::optional<ManualExpectation> manual;
    if (auto* m = policy<kvroute::Manual>(); m != nullptr && !g.eligible.empty()) {
      manual = expect_manual(*m, r, g, now(), max_idle_ns());
      if (const auto key = r.header(kvroute::kRoutingKeyHeader); key && !key->empty()) {
        keys_seen_.emplace(std::string(r.model), std::string(*key));
      }
    }
    std::optional<PrefillView> prefill;
    if (policy<kvroute::LeastPrefill>() != nullptr) {
      prefill = view_least_prefill(cfg_, policy<kvroute::LeastPrefill>()->tree(h->req.model), r, g,
                                   router_->load());
    }
    h->sel = router_->select(r, excluded);
    const kvroute::Decision& d = h->sel.decision;
    if (std::string e = check_decision(r, g, h->sel); !e.empty()) return e;
    if (std::string e = check_balance(cfg_, g, router_->load(), d); !e.empty()) return e;
    if (prefill) {
      if (std::string e = check_least_prefill(*prefill, g, d); !e.empty()) return e;
    }
    if (std::string e = check_repeatable(r, excluded, d); !e.empty()) return e;
    ++(d ? stats_.routed : stats_.not_routed);
    if (std::string e = check_target(cfg_.policy, r, g, d, workers_urls()); !e.empty()) return e;
    if (manual) {
      const std::string e = check_manual(*policy<kvroute::Manual>(), r, *manual, d, now());
      if (!e.empty()) return e;
    }
    models_seen_.insert(h->req.model);
    if (then == 0) return "";  // a selection never dispatched
    std::string e = then >= 2 ? dispatch(*h, in) : "";
    if (held_.size() >= kMaxHeld) held_.erase(held_.begin());
    held_.push_back(std::move(h));
    return e;
  }

  // The hashing policies' keyed branches are functions of the request, the
  // membership and the loads: the same selection again gives the same.
  std::string check_repeatable(const kvroute::RequestView& r, const std::vector<WorkerId>& excluded,
                               const kvroute::Decision& d) {
    using kvroute::Branch;
    const bool keyed = cfg_.policy == kvroute::PolicyKind::kConsistentHashing
                           ? d.branch != Branch::kRandomFallback
                           : cfg_.policy == kvroute::PolicyKind::kPrefixHash &&
                                 d.branch != Branch::kRandomFallback;
    if (!keyed || d.reason() == kvroute::NoWorker::kNoWorkers ||
        d.reason() == kvroute::NoWorker::kNoHealthyWorkers) {
      return "";
    }
    const kvroute::Selection again = router_->select(r, excluded);
    if (again.decision.id() != d.id() || again.decision.branch != d.branch) {
      return "the same selection again gave worker " + std::to_string(again.decision.id().value) +
             " " + std::string(to_string(again.decision.branch));
    }
    return "";
  }

  std::vector<std::pair<std::uint32_t, std::string>> workers_urls() const {
    std::vector<std::pair<std::uint32_t, std::string>> out;
    for (std::uint32_t id = 0; id < workers_.size(); ++id) {
      if (workers_[id].live) out.emplace_back(id, workers_[id].url);
    }
    return out;
  }

  std::string why_not(std::uint32_t id, const Group& g) const {
    if (!live(id)) return "removed or never added";
    if (std::find(g.members.begin(), g.members.end(), id) == g.members.end()) {
      return "of another model";
    }
    if (!workers_[id].healthy) return "unhealthy";
    if (workers_[id].circuit_open) return "circuit open";
    return "excluded";
  }

  std::string check_decision(const kvroute::RequestView& r, const Group& g,
                             const kvroute::Selection& s) const {
    using kvroute::Branch;
    const kvroute::Decision& d = s.decision;
    if (d.worker == nullptr) {
      if (g.eligible.empty()) {
        const Branch want = g.members.empty() ? Branch::kNoWorkers : Branch::kNoHealthyWorkers;
        return d.branch == want ? "" : "no worker, branch " + std::string(to_string(d.branch));
      }
      if (cfg_.policy != kvroute::PolicyKind::kConsistentHashing ||
          d.branch != Branch::kTargetWorkerMiss) {
        return "no worker (" + std::string(to_string(d.branch)) + ") although " +
               std::to_string(g.eligible.size()) + " are eligible";
      }
    } else {
      const std::uint32_t id = d.worker->id.value;
      if (std::find(g.eligible.begin(), g.eligible.end(), id) == g.eligible.end()) {
        return "decision names worker " + std::to_string(id) + ", " + why_not(id, g);
      }
      if (s.snapshot == nullptr || s.snapshot->find(d.worker->id) != d.worker) {
        return "the decision's worker is not in its snapshot";
      }
      if (d.worker->url != workers_[id].url || d.worker->model != workers_[id].model) {
        return "the decision's worker has another url or model";
      }
    }
    if (!documented_branch(cfg_.policy, d.branch)) {
      return "branch " + std::string(to_string(d.branch)) + " is not one of the policy's";
    }
    const std::size_t units = kvroute::detail::utf8_count(r.text);
    if (d.claimed > units) {
      return "claimed " + std::to_string(d.claimed) + " of " + std::to_string(units) + " chars";
    }
    if (!tree_policy() && (d.claimed != 0 || d.ticket != 0)) return "a claim without a tree";
    return "";
  }

  std::string dispatch(Held& h, ByteReader& in) {
    static constexpr std::int64_t kPrompt[] = {-1, 0, 1, 1000, kI64Max, kI64Min};
    static constexpr std::int64_t kTokens[] = {0, 1, 512, kI64Max};
    static const std::string kKeys[] = {"", "k1", "k2"};
    std::vector<kvroute::Header> scratch;
    const kvroute::RequestView r = h.req.view(scratch);
    kvroute::DispatchInfo info;
    if (auto* lp = policy<kvroute::LeastPrefill>()) {
      const std::int64_t prompt = in.pick(kPrompt);
      log_ << "predicted_tokens(prompt " << prompt << ") ";
      info.tokens = lp->predicted_tokens(r, h.sel.decision, prompt);
      if (info.tokens < 0) return "predicted_tokens " + std::to_string(info.tokens) + " < 0";
    } else {
      info.tokens = in.pick(kTokens);
    }
    const std::string key = in.next() % 2 != 0
                                ? std::string(r.header(kvroute::kRoutingKeyHeader).value_or(""))
                                : in.pick(kKeys);
    info.routing_key = key;
    log_ << "dispatch(tokens " << info.tokens << ", key " << show_bytes(key) << ")\n";
    h.guard = router_->dispatch(h.sel, info);
    h.load.reset();
    if (h.sel) {
      const std::uint32_t id = h.sel.decision.worker->id.value;
      h.load = Load{id, info.tokens, key};
      ++workers_[id].dispatched;
      ++stats_.dispatched;
    }
    return "";
  }

  std::string release(ByteReader& in) {
    if (held_.empty()) return "";
    const std::size_t i = in.next() % held_.size();
    Held& h = *held_[i];
    switch (in.next() % 5) {
      case 0:
        log_ << "release(" << i << ")\n";
        h.guard.release();
        h.load.reset();
        break;
      case 1:
        log_ << "release_tokens(" << i << ")\n";
        h.guard.release_tokens();
        if (h.load) h.load->tokens = 0;
        break;
      case 2:
        log_ << "destroy(" << i << ")\n";
        held_.erase(held_.begin() + static_cast<std::ptrdiff_t>(i));
        break;
      case 3: {
        // The target's own guard is released by the assignment.
        const std::size_t j = in.next() % held_.size();
        log_ << "move guard " << i << " into " << j << "\n";
        held_[j]->guard = std::move(h.guard);
        if (i != j) held_[j]->load = std::exchange(h.load, std::nullopt);
        break;
      }
      default: {
        log_ << "move guard " << i << " out and destroy it\n";
        kvroute::LoadGuard moved(std::move(h.guard));
        h.load.reset();
        break;
      }
    }
    return "";
  }

  // --- report_cached -----------------------------------------------------------

  std::string report(ByteReader& in) {
    if (held_.empty() || !tree_policy()) return "";
    const std::uint8_t which = in.next();  // half the time the latest
    Held& h = *held_[which >= 0x80 ? held_.size() - 1 : which % held_.size()];
    const kvroute::Decision& d = h.sel.decision;
    const std::uint64_t cached = cached_around(d.claimed, in);
    std::vector<kvroute::Header> scratch;
    const kvroute::RequestView r = h.req.view(scratch);
    const std::uint32_t worker = d.worker != nullptr ? d.worker->id.value : kvroute::kNoTenant;
    if (auto* ca = policy<kvroute::CacheAware>()) {
      if (in.next() % 2 == 0) {
        log_ << "report_cached(claimed " << d.claimed << ", ticket " << d.ticket << ", cached "
             << cached << ")\n";
        return check_drop(h.req.model, worker, [&] { return ca->report_cached(r, d, cached); });
      }
      return report_raw(*ca, in);
    }
    auto* lp = policy<kvroute::LeastPrefill>();
    static constexpr std::int64_t kPrompt[] = {-1, 0, 1, 1000, kI64Max, kI64Min};
    const std::int64_t prompt = in.pick(kPrompt);
    kvroute::LoadGuard* guard = in.next() % 2 != 0 ? &h.guard : nullptr;
    log_ << "report_cached(claimed " << d.claimed << ", cached " << cached << ", prompt " << prompt
         << (guard ? ", guard" : "") << ")\n";
    std::optional<std::int64_t> tokens;
    if (guard != nullptr && guard->active() && d) tokens = uncached_tokens(r, prompt, cached);
    if (std::string e = check_drop(h.req.model, worker,
                                   [&] { return lp->report_cached(r, d, cached, prompt, guard); });
        !e.empty()) {
      return e;
    }
    if (tokens) {
      if (guard->tokens() != *tokens) return "report_cached: the guard's tokens";
      if (h.load) h.load->tokens = *tokens;
    }
    return "";
  }

  // A server's cached tokens for a claim of `claimed` characters: around
  // the claim in tokens (at the configured characters per token), or any.
  std::uint64_t cached_around(std::uint64_t claimed, ByteReader& in) const {
    const double tokens = static_cast<double>(claimed) / cfg_.chars_per_token;
    const std::uint64_t c = tokens >= 0x1p64 ? kU64Max : static_cast<std::uint64_t>(tokens);
    const std::uint64_t values[] = {0, 1, c / 2, c - 1, c, c + 1, kU64Max, in.next_bytes(2)};
    return values[in.next() % std::size(values)];
  }

  // What least_prefill's report_cached leaves on the request's guard: the
  // prompt's tokens (its text's characters at chars_per_token when the host
  // gives none) less the cached ones, rounded up, within [0, INT64_MAX].
  std::int64_t uncached_tokens(const kvroute::RequestView& r, std::int64_t prompt,
                               std::uint64_t cached) const {
    const double total = prompt >= 0 ? static_cast<double>(prompt)
                                     : static_cast<double>(kvroute::detail::utf8_count(r.text)) /
                                           cfg_.chars_per_token;
    const double left = total - static_cast<double>(cached);
    if (!(left > 0)) return 0;
    if (left >= 0x1p63) return kI64Max;
    return static_cast<std::int64_t>(std::ceil(left));
  }

  // CacheAware's report_cached for a host that kept only the fields, with
  // any fields.
  std::string report_raw(kvroute::CacheAware& ca, ByteReader& in) {
    static constexpr std::uint64_t kValues[] = {0,    1,        2,           64,     65,
                                                1000, 1u << 20, kU64Max - 1, kU64Max};
    const std::string model = inputs_.model(in);
    const std::uint8_t b = in.next();
    const std::uint32_t worker = b == 0xFF ? kvroute::kNoTenant : pick_id(in);
    const std::uint64_t claimed = in.pick(kValues);
    const std::uint64_t ticket = in.pick(kValues);
    const std::uint64_t cached = cached_around(claimed, in);
    log_ << "report_cached(" << show_bytes(model) << ", worker " << worker << ", claimed "
         << claimed << ", ticket " << ticket << ", cached " << cached << ")\n";
    return check_drop(model, worker, [&] {
      return ca.report_cached(model, WorkerId{worker}, claimed, ticket, cached);
    });
  }

  // Runs `report`, which may drop claims of `worker` in `model`'s tree, and
  // checks that its result says what the worker lost.
  template <class Report>
  std::string check_drop(const std::string& model, std::uint32_t worker, Report&& report) {
    const kvroute::ApproxRadixTree* t = tree(model);
    const std::size_t before = t != nullptr ? t->tenant_size(worker) : 0;
    const bool registered = t != nullptr && t->has_tenant(worker);
    const kvroute::EvictResult e = report();
    const std::size_t after = t != nullptr ? t->tenant_size(worker) : 0;
    if (after > before) return "report_cached grew the worker";
    if (e.units != before - after) {
      return "report_cached: EvictResult.units " + std::to_string(e.units) + ", size fell by " +
             std::to_string(before - after);
    }
    if (registered && !t->has_tenant(worker)) return "report_cached unregistered the worker";
    if (e.units != 0) ++stats_.dropped;
    return "";
  }

  // --- time, maintenance, probes ---------------------------------------------

  std::string tick(ByteReader& in) {
    using std::chrono::nanoseconds;
    using std::chrono::seconds;
    static constexpr std::int64_t kSteps[] = {0,
                                              1'000'000,
                                              999'999'999,
                                              nanoseconds(seconds(1)).count(),
                                              nanoseconds(seconds(5)).count(),
                                              nanoseconds(seconds(5)).count() + 1,
                                              nanoseconds(seconds(120)).count(),
                                              nanoseconds(seconds(121)).count(),
                                              nanoseconds(seconds(14400)).count(),
                                              nanoseconds(seconds(86400)).count(),
                                              std::int64_t{1} << 62};
    const std::uint8_t b = in.next() % 4;
    if (b <= 1) {
      const std::int64_t step = std::min(in.pick(kSteps), kI64Max - now());
      log_ << "advance(" << step << ")\n";
      clock_.advance(nanoseconds(step));
      if (b == 0) return "";
    }
    if (b <= 2) {
      log_ << "maintain()\n";
      router_->maintain();
      return check_swept();
    }
    static constexpr std::int64_t kLoads[] = {0, 1, 5, -3, kI64Max};
    const std::uint32_t id = pick_id(in);
    const std::int64_t load = in.pick(kLoads);
    log_ << "probe(" << id << ", " << load << ")\n";
    kvroute::LoadTracker& t = router_->load();
    switch (in.next() % 3) {
      case 0:
        t.report_load(WorkerId{id}, load);
        break;
      case 1:
        t.report_load_failed(WorkerId{id});
        break;
      default:
        t.clear_report(WorkerId{id});
        break;
    }
    return "";
  }

  // After maintain(): manual holds no entry idle for max_idle or longer.
  std::string check_swept() {
    kvroute::Manual* m = policy<kvroute::Manual>();
    if (m == nullptr || max_idle_ns() <= 0) return "";
    for (const auto& [model, key] : keys_seen_) {
      const auto e = m->entry(model, key);
      if (e && now() - e->last_access.count() >= max_idle_ns()) {
        return "maintain() kept an expired entry for " + show_bytes(key);
      }
    }
    return "";
  }

  // --- state checks ------------------------------------------------------------

  std::string verify() {
    if (std::string e = verify_workers(); !e.empty()) return e;
    if (std::string e = verify_loads(); !e.empty()) return e;
    if (trees_touched_) {
      if (std::string e = verify_trees(); !e.empty()) return e;
    }
    if (auto* b = policy<kvroute::Bucket>()) {
      for (const std::string& m : models_seen_) {
        if (std::string e = check_bucket_ranges(b->boundaries(m)); !e.empty()) return e;
      }
    }
    if (auto* m = policy<kvroute::Manual>()) {
      std::size_t stored = 0;
      for (const auto& [model, key] : keys_seen_) stored += m->entry(model, key) ? 1 : 0;
      if (m->size() != stored) {
        return "manual: size() " + std::to_string(m->size()) + ", entries " +
               std::to_string(stored);
      }
    }
    return "";
  }

  std::string verify_workers() const {
    const auto snap = router_->workers().snapshot();
    std::size_t n = 0;
    for (std::uint32_t id = 0; id < workers_.size(); ++id) {
      if (!workers_[id].live) continue;
      ++n;
      const kvroute::Worker* w = snap->find(WorkerId{id});
      const WorkerModel& m = workers_[id];
      if (w == nullptr || w->url != m.url || w->model != m.model || w->healthy != m.healthy ||
          w->circuit_open != m.circuit_open) {
        return "snapshot: worker " + std::to_string(id) + " differs";
      }
    }
    return snap->size() == n ? "" : "snapshot: " + std::to_string(snap->size()) + " workers";
  }

  std::string verify_loads() const {
    const std::size_t ids = workers_.size() + 2;
    std::vector<std::int64_t> in_flight(ids, 0);
    std::vector<std::uint64_t> tokens(ids, 0);  // wraps as the tracker's sum does
    std::vector<std::set<std::string>> keys(ids);
    for (const auto& h : held_) {
      if (h->guard.active() != h->load.has_value()) return "a guard's active() disagrees";
      if (h->guard.tokens() != (h->load ? h->load->tokens : 0)) return "a guard's tokens()";
      if (!h->load) continue;
      if (h->guard.worker().value != h->load->worker) return "a guard's worker()";
      ++in_flight[h->load->worker];
      tokens[h->load->worker] += static_cast<std::uint64_t>(h->load->tokens);
      if (!h->load->key.empty()) keys[h->load->worker].insert(h->load->key);
    }
    const kvroute::LoadTracker& t = router_->load();
    for (std::uint32_t id = 0; id < ids; ++id) {
      const WorkerId w{id};
      const std::uint64_t dispatched = id < workers_.size() ? workers_[id].dispatched : 0;
      if (t.in_flight(w) != in_flight[id] ||
          static_cast<std::uint64_t>(t.in_flight_tokens(w)) != tokens[id] ||
          t.active_keys(w) != static_cast<std::int64_t>(keys[id].size()) ||
          t.processed(w) != dispatched) {
        return "load of worker " + std::to_string(id) + ": in flight " +
               std::to_string(t.in_flight(w)) + " (guards " + std::to_string(in_flight[id]) +
               "), tokens " + std::to_string(t.in_flight_tokens(w)) + ", keys " +
               std::to_string(t.active_keys(w)) + " (guards " + std::to_string(keys[id].size()) +
               "), processed " + std::to_string(t.processed(w));
      }
    }
    return "";
  }

  std::string verify_trees() {
    if (!tree_policy()) return "";
    for (const std::string& m : models_seen_) {
      const kvroute::ApproxRadixTree* t = tree(m);
      if (t == nullptr) continue;
      std::set<kvroute::TenantId>& ever = tenants_ever_[m];
      const std::string e = check_tree(*t, cfg_.max_tree_size, ever,
                                       [this](kvroute::TenantId id) { return live(id); });
      if (!e.empty()) return "tree of " + show_bytes(m) + ": " + e;
      ++stats_.tree_checks;
    }
    return "";
  }

  std::string finish() {
    for (std::size_t i = 0; i < held_.size(); i += 2) {
      held_[i]->guard.release();
      held_[i]->load.reset();
    }
    log_ << "release every guard\n";
    held_.clear();
    if (std::string e = verify_loads(); !e.empty()) return e;
    log_ << "remove every worker\n";
    for (std::uint32_t id = 0; id < workers_.size(); ++id) {
      if (!workers_[id].live) continue;
      if (!router_->remove_worker(WorkerId{id}).ok()) return "remove_worker failed";
      workers_[id].live = false;
    }
    router_->maintain();
    trees_touched_ = true;
    if (std::string e = verify(); !e.empty()) return e;
    for (const std::string& m : models_seen_) {
      const kvroute::ApproxRadixTree* t = tree(m);
      if (t == nullptr) continue;
      const kvroute::RadixTreeStats s = t->stats();
      if (s.tenants != 0 || s.units != 0 || s.nodes != 1 || s.claims != 0) {
        return "tree of " + show_bytes(m) +
               " not empty with no workers: " + std::to_string(s.nodes) + " nodes";
      }
    }
    const kvroute::Selection s = router_->select({.text = "x"});
    if (s || s.decision.branch != kvroute::Branch::kNoWorkers) return "a worker with none left";
    return "";
  }

  static constexpr std::int64_t kI64Max = std::numeric_limits<std::int64_t>::max();
  static constexpr std::int64_t kI64Min = std::numeric_limits<std::int64_t>::min();
  static constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();

  const kvroute::PolicyConfig cfg_;
  kvroute::ManualClock clock_;  // outlives the policy
  std::unique_ptr<Router> router_;
  std::vector<std::unique_ptr<Held>> held_;  // destroyed before the router's tracker
  RouterInputs inputs_;
  std::vector<WorkerModel> workers_;  // by id
  std::set<std::string> models_seen_;
  std::map<std::string, std::set<kvroute::TenantId>> tenants_ever_;
  std::set<std::pair<std::string, std::string>> keys_seen_;
  bool trees_touched_ = true;
  RouterRunStats stats_;
  std::ostringstream log_;
};

// The fuzz entry's body: "" or a description of the first failed check.
// `stats`, when given, receives what the run did.
inline std::string run_router(const std::uint8_t* data, std::size_t size,
                              RouterRunStats* stats = nullptr) {
  ByteReader in(data, size);
  const kvroute::PolicyConfig cfg = decode_policy_config(in);
  static constexpr std::int64_t kStarts[] = {0, 1'000'000'000'000'000'000,
                                             9'000'000'000'000'000'000};
  const std::chrono::nanoseconds start(in.pick(kStarts));
  RouterDriver driver(cfg, start);
  std::string failure = driver.run(in);
  if (stats != nullptr) *stats = driver.stats();
  return failure;
}

}  // namespace kvfuzz

#endif  // KVROUTE_TESTS_FUZZ_ROUTER_DRIVER_HPP_
