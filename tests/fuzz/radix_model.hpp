// A reference model of kvroute::BasicApproxRadixTree that is obviously right
// because it does everything by brute force: per tenant it keeps the list of
// sequences inserted for it, answers a prefix match by comparing the query
// with each of them, and counts a tenant's size as the number of distinct
// non-empty prefixes (ending on a character boundary) of its sequences, which
// is the number of distinct characters on the union of its paths.
//
// Text is read as kvroute reads it (radix_tree.hpp, detail/utf8.hpp): each
// well-formed UTF-8 sequence is one character, every other byte is one
// character of its own. The model decodes forwards from the start of each
// string (it does not reuse the tree's boundary search); a common prefix
// counts only up to the last position that is a character boundary of both
// strings.
//
// Where the tree is approximate by design the model states the slack:
//   * Eviction (evict, evict_tenant, reactive eviction, drop_older_than) is
//     node-granular and recency-ordered; the model does not track recency
//     per node, so a tenant that eviction touched becomes "inexact": its
//     sequences are then an upper bound (tree size <= model size, tree match
//     <= model match), not an exact answer. Exactness returns when the tenant
//     is removed. One exact fact survives eviction: the most recently
//     inserted sequence of a tenant (if no match has stamped the tenant
//     since) is the most recent path, so evicting to a budget at least its
//     length, or dropping entries older than its recency, keeps it whole.
//   * The tenant chosen at the deepest node: the model computes the set of
//     tenants that must hold that node (every tenant whose common prefix
//     with the query equals the matched length); with the LowestTenantId
//     rule the tree must return its minimum, with MostRecentlyUsed any
//     member.
#ifndef KVROUTE_TESTS_FUZZ_RADIX_MODEL_HPP_
#define KVROUTE_TESTS_FUZZ_RADIX_MODEL_HPP_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "kvroute/detail/utf8.hpp"
#include "kvroute/radix_tree.hpp"

namespace kvfuzz {

using kvroute::TenantId;

// The character boundaries of a sequence, 0 and size() included.
inline std::vector<std::size_t> boundaries(const std::string& s) {
  std::vector<std::size_t> b{0};
  std::size_t i = 0;
  while (i < s.size()) {
    i += kvroute::detail::utf8_char_length(s.data() + i, s.data() + s.size());
    b.push_back(i);
  }
  return b;
}
template <class T>
std::vector<std::size_t> boundaries(const std::vector<T>& s) {
  std::vector<std::size_t> b;
  for (std::size_t i = 0; i <= s.size(); ++i) b.push_back(i);
  return b;
}

// Units (characters or tokens) in a sequence.
template <class Seq>
std::size_t units(const Seq& s) {
  return boundaries(s).size() - 1;
}

// Units of the longest common prefix of `s` and `q` that ends on a boundary
// of both.
template <class Seq>
std::size_t lcp_units(const Seq& s, const Seq& q) {
  std::size_t common = 0;
  while (common < s.size() && common < q.size() && s[common] == q[common]) ++common;
  const std::vector<std::size_t> bs = boundaries(s);
  const std::vector<std::size_t> bq = boundaries(q);
  std::size_t best = 0;
  for (std::size_t i = 0; i < bq.size() && bq[i] <= common; ++i) {
    if (std::binary_search(bs.begin(), bs.end(), bq[i])) best = i;
  }
  return best;
}

template <class Symbol>
class RadixModel {
 public:
  using Seq = std::conditional_t<std::is_same_v<Symbol, char>, std::string, std::vector<Symbol>>;

  struct Tenant {
    std::vector<Seq> seqs;  // every sequence inserted since registration
    bool exact = true;      // no eviction has touched it since
    // The last inserted sequence and its recency, while no match has
    // stamped the tenant since (see the header comment).
    std::optional<Seq> survivor;
    std::uint64_t survivor_recency = 0;
  };

  void insert(const Seq& s, TenantId t, std::uint64_t recency) {
    Tenant& x = tenants_[t];
    if (std::find(x.seqs.begin(), x.seqs.end(), s) == x.seqs.end()) x.seqs.push_back(s);
    x.survivor = s;
    x.survivor_recency = recency;
  }
  void remove(TenantId t) { tenants_.erase(t); }
  void make_inexact(TenantId t) { tenants_.at(t).exact = false; }
  void stamped(TenantId t) {
    if (auto it = tenants_.find(t); it != tenants_.end()) it->second.survivor.reset();
  }

  bool registered(TenantId t) const { return tenants_.count(t) != 0; }
  const Tenant* find(TenantId t) const {
    auto it = tenants_.find(t);
    return it == tenants_.end() ? nullptr : &it->second;
  }
  const std::map<TenantId, Tenant>& tenants() const { return tenants_; }
  bool all_exact() const {
    return std::all_of(tenants_.begin(), tenants_.end(),
                       [](const auto& kv) { return kv.second.exact; });
  }

  // The longest common prefix of `q` with any of t's sequences (0 when t is
  // not registered). Exact for an exact tenant, an upper bound otherwise.
  std::size_t tenant_lcp(TenantId t, const Seq& q) const {
    const Tenant* x = find(t);
    if (x == nullptr) return 0;
    std::size_t best = 0;
    for (const Seq& s : x->seqs) best = std::max(best, lcp_units(s, q));
    return best;
  }

  // The number of distinct non-empty prefixes, on character boundaries, of
  // t's sequences. Exact for an exact tenant, an upper bound otherwise.
  std::size_t size(TenantId t) const {
    const Tenant* x = find(t);
    if (x == nullptr) return 0;
    std::set<Seq> prefixes;
    for (const Seq& s : x->seqs) {
      for (std::size_t b : boundaries(s)) {
        if (b > 0) prefixes.insert(Seq(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(b)));
      }
    }
    return prefixes.size();
  }

 private:
  std::map<TenantId, Tenant> tenants_;
};

}  // namespace kvfuzz

#endif  // KVROUTE_TESTS_FUZZ_RADIX_MODEL_HPP_
