// The differential driver shared by the libFuzzer target, its corpus replay
// and a Catch2 test: it decodes a byte string into a sequence of insert /
// match / match_for_tenant (checked against visit_path) / match_and_insert /
// evict / evict_tenant / remove_tenant / drop_older_than operations on a
// BasicApproxRadixTree (text or tokens, with
// or without a reactive tenant budget), runs each on the tree and on
// RadixModel, and checks matched lengths, candidate sets, tenant sets and
// per-tenant sizes against the model after every step, plus the tree's own
// check_invariants() and recount_sizes().
//
// Input format (any byte string is valid; missing bytes read as 0):
//   byte 0: bit 0 = token tree, bit 1 = reactive budget set, bits 2.. = budget
//   then per operation: an opcode byte, then its operands.
#ifndef KVROUTE_TESTS_FUZZ_RADIX_TREE_DRIVER_HPP_
#define KVROUTE_TESTS_FUZZ_RADIX_TREE_DRIVER_HPP_

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz/byte_reader.hpp"
#include "fuzz/radix_model.hpp"
#include "kvroute/radix_tree.hpp"

namespace kvfuzz {

template <class Symbol>
class RadixDriver {
 public:
  using Tree = kvroute::BasicApproxRadixTree<Symbol>;
  using Model = RadixModel<Symbol>;
  using Seq = typename Model::Seq;

  explicit RadixDriver(std::size_t budget, unsigned recency_shift = 0)
      : budget_(budget),
        tree_(typename Tree::Options{.tenant_budget = budget, .recency_shift = recency_shift}) {}

  // Runs every operation in `in`; returns "" or the first mismatch with the
  // operations that led to it.
  std::string run(ByteReader& in) {
    if (std::string e = verify(); !e.empty()) return fail(e);
    for (int ops = 0; !in.empty() && ops < kMaxOps; ++ops) {
      if (std::string e = step(in); !e.empty()) return fail(e);
      if (std::string e = verify(); !e.empty()) return fail(e);
    }
    return "";
  }

 private:
  static constexpr int kMaxOps = 400;
  static constexpr std::size_t kMaxHistory = 32;

  std::string fail(const std::string& e) const { return log_.str() + "MISMATCH: " + e; }

  static std::string show(const std::string& s) { return show_bytes(s); }
  template <class T>
  static std::string show(const std::vector<T>& s) {
    std::string out = "{";
    for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
    return out + "}";
  }

  static typename Tree::sequence_type view(const Seq& s) {
    if constexpr (std::is_same_v<Symbol, char>) {
      return std::string_view(s);
    } else {
      return std::span<const Symbol>(s);
    }
  }

  // A sequence: optionally a prefix of an earlier one (cut anywhere, even
  // inside a character), then up to 7 pieces of a small alphabet with
  // multi-byte, truncated and invalid UTF-8, NUL, and extreme token ids.
  Seq sequence(ByteReader& in) {
    const std::uint8_t b = in.next();
    Seq s;
    if ((b & 1) != 0 && !history_.empty()) {
      const Seq& h = history_[in.next() % history_.size()];
      const std::size_t cut = h.empty() ? 0 : in.next() % (h.size() + 1);
      s.assign(h.begin(), h.begin() + static_cast<std::ptrdiff_t>(cut));
    }
    const int pieces = (b >> 1) & 7;
    for (int i = 0; i < pieces; ++i) {
      const std::uint8_t p = in.next();
      if constexpr (std::is_same_v<Symbol, char>) {
        static const std::string kPieces[] = {"a",
                                              "b",
                                              "ab",
                                              "abc",
                                              "\xC3\xA9",
                                              "\xC3",
                                              "\xA9",
                                              "\xE0\xA0",
                                              "\x80",
                                              std::string(1, '\0'),
                                              "\xE4\xBD\xA0",
                                              "\xF0\x9F\xA4\x96",
                                              "\xF0\x9F",
                                              "\xFF",
                                              "\xED\xA0\x80",
                                              "xyz"};
        s += kPieces[p % std::size(kPieces)];
      } else {
        static constexpr Symbol kPieces[] = {
            0, 1, 2, 3, 7, static_cast<Symbol>(~Symbol{0}), static_cast<Symbol>(Symbol{1} << 31)};
        s.push_back(kPieces[p % std::size(kPieces)]);
      }
    }
    if (history_.size() < kMaxHistory) {
      history_.push_back(s);
    } else {
      history_[b % kMaxHistory] = s;
    }
    return s;
  }

  static TenantId tenant(ByteReader& in) {
    const std::uint8_t b = in.next();
    return b == 0xFF ? kvroute::kMaxTenantId + 1 : static_cast<TenantId>(b % 5);
  }

  // After an eviction of `t` that changed it: the tenant is within `limit`
  // (when given), becomes inexact, and its survivor, if it must have
  // survived, is whole.
  std::string after_eviction(TenantId t, std::size_t before, std::optional<std::size_t> limit,
                             std::optional<std::uint64_t> drop_below) {
    const std::size_t now = tree_.tenant_size(t);
    if (limit && now > *limit) {
      return "tenant " + std::to_string(t) + " size " + std::to_string(now) + " over budget " +
             std::to_string(*limit);
    }
    if (now == before) return "";
    if (now > before) return "eviction grew tenant " + std::to_string(t);
    const auto* mt = model_.find(t);
    if (mt != nullptr && mt->survivor) {
      const Seq s = *mt->survivor;
      const bool must_survive =
          (limit && units(s) <= *limit) || (drop_below && mt->survivor_recency >= *drop_below);
      if (must_survive) {
        const kvroute::TenantMatch m = tree_.match_for_tenant(view(s), t);
        if (m.matched != units(s)) {
          return "most recent insert " + show(s) + " of tenant " + std::to_string(t) +
                 " lost by eviction: matches " + std::to_string(m.matched);
        }
      }
    }
    if (mt != nullptr) model_.make_inexact(t);
    return "";
  }

  std::string step(ByteReader& in) {
    const std::uint8_t op = in.next() % 8;
    switch (op) {
      case 0: {
        const Seq s = sequence(in);
        const TenantId t = tenant(in);
        log_ << "insert(" << show(s) << ", " << t << ")\n";
        const std::size_t before = tree_.tenant_size(t);
        return check_insert(s, t, before, tree_.insert(view(s), t));
      }
      case 1: {
        // match_and_insert = a match that stamps nothing, then an insert
        // under the most recent candidate (`follow`, the fused path) or a
        // fixed tenant.
        const Seq s = sequence(in);
        const TenantId fixed = tenant(in);
        const bool follow = in.next() % 2 == 0;
        log_ << "match_and_insert(" << show(s) << ", " << (follow ? "follow, else " : "") << fixed
             << ")\n";
        std::map<TenantId, std::size_t> before;
        for (const auto& [t, x] : model_.tenants()) before[t] = tree_.tenant_size(t);
        const kvroute::MatchInsertResult r = tree_.match_and_insert(
            view(s), [&](const kvroute::RadixCandidates& c, const kvroute::MatchResult&) noexcept {
              return follow && !c.empty() ? kvroute::MostRecentlyUsed{}(c) : fixed;
            });
        kvroute::MatchResult m = r.match;
        m.tenant = kvroute::kNoTenant;
        if (std::string e = check_match(s, 2, m); !e.empty()) return e;
        if (!r.inserted) return "match_and_insert inserted nothing";
        const TenantId t = r.match.tenant;
        if (r.insert.ok() && r.match.recency != r.insert.recency) {
          return "match_and_insert: match.recency is not the insert's";
        }
        return check_insert(s, t, before.count(t) != 0 ? before[t] : 0, r.insert);
      }
      case 2: {
        const Seq q = sequence(in);
        const int chooser = in.next() % 3;
        log_ << "match(" << show(q) << ", chooser " << chooser << ")\n";
        kvroute::MatchResult r;
        if (chooser == 0) {
          r = tree_.match(view(q));
        } else if (chooser == 1) {
          r = tree_.match(view(q), kvroute::LowestTenantId{});
        } else {
          r = tree_.match(
              view(q), [](const kvroute::RadixCandidates&) noexcept { return kvroute::kNoTenant; });
        }
        return check_match(q, chooser, r);
      }
      case 3: {
        const Seq q = sequence(in);
        const TenantId t = tenant(in);
        log_ << "match_for_tenant(" << show(q) << ", " << t << ")\n";
        // visit_path, which stamps nothing, must agree with it.
        std::size_t walked = 0;
        bool walk_found = false;
        tree_.visit_path(view(q),
                         [&](const kvroute::RadixCandidates& c, std::size_t matched) noexcept {
                           if (c.contains(t)) {
                             walked = matched;
                             walk_found = true;
                           }
                         });
        const kvroute::TenantMatch r = tree_.match_for_tenant(view(q), t);
        if (walk_found != r.found || walked != r.matched) {
          return "visit_path gives " + std::to_string(walked) + ", match_for_tenant " +
                 std::to_string(r.matched);
        }
        if (r.found != model_.registered(t)) return "match_for_tenant: found differs";
        if (!r.found) return r.matched == 0 ? "" : "unregistered tenant matched";
        model_.stamped(t);
        const std::size_t want = model_.tenant_lcp(t, q);
        const bool exact = model_.find(t)->exact;
        if (exact ? r.matched != want : r.matched > want) {
          return "match_for_tenant matched " + std::to_string(r.matched) + ", model " +
                 std::to_string(want) + (exact ? "" : " (upper bound)");
        }
        if (r.input != units(q)) return "match_for_tenant: input length";
        return "";
      }
      case 4:
      case 5: {
        const std::size_t b = in.next() % 24;
        const TenantId only = op == 5 ? tenant(in) : kvroute::kNoTenant;
        log_ << (op == 4 ? "evict(" : "evict_tenant(")
             << (op == 5 ? std::to_string(only) + ", " : "") << b << ")\n";
        std::map<TenantId, std::size_t> before;
        std::size_t total_before = 0;
        for (const auto& [t, x] : model_.tenants()) {
          before[t] = tree_.tenant_size(t);
          if (op == 4 || t == only) total_before += before[t];
        }
        const kvroute::EvictResult r = op == 4 ? tree_.evict(b) : tree_.evict_tenant(only, b);
        std::size_t total_after = 0;
        for (const auto& [t, sz] : before) {
          const bool target = op == 4 || t == only;
          if (!target) {
            if (tree_.tenant_size(t) != sz) return "eviction changed another tenant";
            continue;
          }
          total_after += tree_.tenant_size(t);
          if (sz <= b && tree_.tenant_size(t) != sz) return "eviction touched a tenant in budget";
          if (std::string e = after_eviction(t, sz, b, std::nullopt); !e.empty()) return e;
        }
        if (r.units != total_before - total_after) {
          return "EvictResult.units " + std::to_string(r.units) + " but sizes fell by " +
                 std::to_string(total_before - total_after);
        }
        return "";
      }
      case 6: {
        const TenantId t = tenant(in);
        log_ << "remove_tenant(" << t << ")\n";
        const bool removed = tree_.remove_tenant(t);
        if (removed != model_.registered(t)) return "remove_tenant result differs";
        model_.remove(t);
        return "";
      }
      default: {
        const TenantId t = tenant(in);
        const std::uint64_t recency = in.next() % (tree_.now() + 2);
        log_ << "drop_older_than(" << t << ", " << recency << ")\n";
        const std::size_t before = tree_.tenant_size(t);
        const kvroute::EvictResult r = tree_.drop_older_than(t, recency);
        if (r.units != before - tree_.tenant_size(t)) return "drop: EvictResult.units";
        if (!model_.registered(t))
          return r.claims == 0 ? "" : "drop removed an unregistered tenant";
        if (!tree_.has_tenant(t)) return "drop_older_than unregistered the tenant";
        return after_eviction(t, before, std::nullopt, recency);
      }
    }
  }

  // After insert(s, t) returned r, t having held `before` units.
  std::string check_insert(const Seq& s, TenantId t, std::size_t before,
                           const kvroute::InsertResult& r) {
    if (t > kvroute::kMaxTenantId) {
      if (r.status != kvroute::InsertStatus::kInvalidTenant) return "invalid tenant accepted";
      return "";
    }
    if (!r.ok()) return "insert failed with status " + std::to_string(int(r.status));
    model_.insert(s, t, r.recency);
    if (budget_ != kvroute::kUnlimitedBudget && model_.size(t) > budget_) {
      // Reactive eviction may have run: the new sequence is the most
      // recent path, so it is whole when it fits.
      if (std::string e = after_eviction(t, before + units(s) + 1, budget_, std::nullopt);
          !e.empty()) {
        return e;
      }
      model_.make_inexact(t);
    }
    return "";
  }

  std::string check_match(const Seq& q, int chooser, const kvroute::MatchResult& r) {
    const std::size_t n = units(q);
    if (r.input != n) return "match: input " + std::to_string(r.input) + " != " + std::to_string(n);
    if (model_.tenants().empty()) {
      if (r.matched != 0 || r.candidates != 0 || r.has_tenant()) return "cold tree matched";
      return "";
    }
    // The matched prefix is a real prefix of q, on a boundary.
    const std::vector<std::size_t> bq = boundaries(q);
    if (r.matched > n || bq[r.matched] != r.matched_symbols) {
      return "match: matched_symbols " + std::to_string(r.matched_symbols) +
             " is not the boundary of " + std::to_string(r.matched) + " units";
    }
    std::size_t upper = 0;
    std::size_t lower = 0;
    for (const auto& [t, x] : model_.tenants()) {
      const std::size_t l = model_.tenant_lcp(t, q);
      upper = std::max(upper, l);
      if (x.exact) lower = std::max(lower, l);
    }
    if (r.matched < lower || r.matched > upper) {
      return "match: matched " + std::to_string(r.matched) + " outside model [" +
             std::to_string(lower) + ", " + std::to_string(upper) + "]";
    }
    // Tenants that must hold the deepest matched node.
    std::vector<TenantId> must;
    std::vector<TenantId> may;
    for (const auto& [t, x] : model_.tenants()) {
      const std::size_t l = model_.tenant_lcp(t, q);
      if (r.matched == 0) {
        must.push_back(t);  // the root holds every registered tenant
      } else if (x.exact ? l == r.matched : l >= r.matched) {
        (x.exact ? must : may).push_back(t);
      }
    }
    if (r.candidates < must.size() || r.candidates > must.size() + may.size()) {
      return "match: " + std::to_string(r.candidates) + " candidates, model " +
             std::to_string(must.size()) + " + up to " + std::to_string(may.size());
    }
    if (chooser == 2) return r.has_tenant() ? "a declining chooser still chose" : "";
    if (!r.has_tenant()) return "match chose no tenant among candidates";
    const TenantId c = r.tenant;
    const bool in_must = std::find(must.begin(), must.end(), c) != must.end();
    const bool in_may = std::find(may.begin(), may.end(), c) != may.end();
    if (!in_must && !in_may) return "match chose tenant " + std::to_string(c) + ", not a candidate";
    if (chooser == 1 && !must.empty() && c > must.front()) {
      return "LowestTenantId chose " + std::to_string(c) + " over " + std::to_string(must.front());
    }
    model_.stamped(c);
    // The chosen tenant holds the deepest node: its own match is as long.
    const kvroute::TenantMatch tm = tree_.match_for_tenant(view(q), c);
    if (!tm.found || tm.matched != r.matched) {
      return "chosen tenant " + std::to_string(c) + " matches only " + std::to_string(tm.matched) +
             " of " + std::to_string(r.matched);
    }
    return "";
  }

  std::string verify() {
    if (std::string e = tree_.check_invariants(); !e.empty()) return "check_invariants: " + e;
    const std::vector<kvroute::TenantSize> sizes = tree_.tenant_sizes();
    if (tree_.recount_sizes() != sizes) return "recount_sizes differs from tenant_sizes";
    if (sizes.size() != model_.tenants().size() || tree_.tenant_count() != sizes.size()) {
      return "tree has " + std::to_string(sizes.size()) + " tenants, model " +
             std::to_string(model_.tenants().size());
    }
    auto it = model_.tenants().begin();
    for (const kvroute::TenantSize& s : sizes) {
      const auto& [t, x] = *it++;
      if (s.tenant != t) return "tenant sets differ at " + std::to_string(t);
      if (!tree_.has_tenant(t)) return "has_tenant false for a registered tenant";
      const std::size_t want = model_.size(t);
      if (x.exact ? s.size != want : s.size > want) {
        return "tenant " + std::to_string(t) + " size " + std::to_string(s.size) + ", model " +
               std::to_string(want) + (x.exact ? "" : " (upper bound)");
      }
    }
    return "";
  }

  std::size_t budget_;
  Tree tree_;
  Model model_;
  std::vector<Seq> history_;
  std::ostringstream log_;
};

// The fuzz entry's body: "" or a description of the first mismatch.
inline std::string run_radix_tree(const std::uint8_t* data, std::size_t size) {
  ByteReader in(data, size);
  // Mode byte: bit 0 tokens, bit 1 a budget of 4 + bits 2-6, bit 7 recency
  // in steps of 2 stamps.
  const std::uint8_t mode = in.next();
  const std::size_t budget =
      (mode & 2) != 0 ? std::size_t{4} + ((mode >> 2) & 31) : kvroute::kUnlimitedBudget;
  const unsigned shift = (mode & 0x80) != 0 ? 1 : 0;
  if ((mode & 1) != 0) return RadixDriver<std::uint32_t>(budget, shift).run(in);
  return RadixDriver<char>(budget, shift).run(in);
}

}  // namespace kvfuzz

#endif  // KVROUTE_TESTS_FUZZ_RADIX_TREE_DRIVER_HPP_
