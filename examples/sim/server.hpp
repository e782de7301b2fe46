// kvroute_sim: the server-side exact prefix KV cache.
//
// A cache holds KV blocks (chained block ids, see trace.hpp) up to a
// capacity in tokens. A request's cached prefix is its longest run of
// leading blocks the cache holds (a partially held block counts for the
// tokens it holds, then the run stops). Blocks of running requests are
// pinned and never evicted; unpinned blocks are evicted least recently used
// first. Blocks of one request are touched last-to-first, so a block is
// always at least as recent as its descendants and eviction removes deeper
// blocks before their prefixes: the cache stays prefix-closed.
#ifndef KVROUTE_EXAMPLES_SIM_SERVER_HPP_
#define KVROUTE_EXAMPLES_SIM_SERVER_HPP_

#include <cstdint>
#include <list>
#include <unordered_map>

#include "sim/trace.hpp"

namespace kvsim {

class PrefixCache {
 public:
  explicit PrefixCache(std::int64_t capacity_tokens) : capacity_(capacity_tokens) {}

  // The leading blocks of r this cache holds: how many (the last one
  // possibly only in part) and their tokens. Does not touch.
  struct Match {
    std::size_t blocks = 0;
    std::int64_t tokens = 0;
  };
  Match match(const SimRequest& r) const {
    Match m;
    for (std::size_t k = 0; k < r.blocks.size(); ++k) {
      auto it = map_.find(r.blocks[k]);
      if (it == map_.end()) break;
      const std::int64_t need = r.block_tokens(k);
      ++m.blocks;
      if (it->second.tokens < need) {
        m.tokens += it->second.tokens;
        break;
      }
      m.tokens += need;
    }
    return m;
  }

  // Tokens of r's prompt this cache holds as a prefix. Does not touch.
  std::int64_t peek(const SimRequest& r) const { return match(r).tokens; }

  // Starts r on this server: returns its cached tokens, then holds (and
  // pins) all of its blocks, evicting unpinned ones beyond capacity.
  std::int64_t acquire(const SimRequest& r) {
    const std::int64_t hit = peek(r);
    hold(r, 0);
    evict_to(capacity_);
    return hit;
  }

  // Ends r on this server: unpins its blocks (most recent first-block).
  void release(const SimRequest& r) {
    unpin(r, r.blocks.size());
    evict_to(capacity_);
  }

  // Pins r's first n blocks, which the cache holds (match(r).blocks >= n).
  void pin(const SimRequest& r, std::size_t n) {
    for (std::size_t k = n; k-- > 0;) {
      Entry& e = map_.at(r.blocks[k]);
      if (e.refs++ == 0) {
        lru_.erase(e.pos);
        pinned_ += e.tokens;
      }
    }
  }

  // Holds r's first `to` blocks at their full size, pinning those from
  // block `from` on (the first `from` are pinned already). Does not evict.
  void hold(const SimRequest& r, std::size_t from, std::size_t to) {
    for (std::size_t k = std::min(to, r.blocks.size()); k-- > 0;) {
      const std::int64_t need = r.block_tokens(k);
      auto [it, inserted] = map_.try_emplace(r.blocks[k]);
      Entry& e = it->second;
      if (k >= from && e.refs++ == 0) {
        if (!inserted) lru_.erase(e.pos);
        pinned_ += e.tokens;
      }
      if (e.tokens < need) {
        used_ += need - e.tokens;
        pinned_ += need - e.tokens;
        e.tokens = need;
      }
    }
  }
  void hold(const SimRequest& r, std::size_t from) { hold(r, from, r.blocks.size()); }

  // Unpins r's first n blocks, the first block left most recent.
  void unpin(const SimRequest& r, std::size_t n) {
    for (std::size_t k = n; k-- > 0;) {
      auto it = map_.find(r.blocks[k]);
      if (it == map_.end()) continue;
      Entry& e = it->second;
      if (--e.refs == 0) {
        pinned_ -= e.tokens;
        lru_.push_front(it->first);
        e.pos = lru_.begin();
      }
    }
  }

  // Holds `tokens` of `block` unpinned, as the most recently used entry
  // (or keeps a larger or pinned entry, grown to `tokens`).
  void put(std::uint64_t block, std::int64_t tokens) {
    auto [it, inserted] = map_.try_emplace(block);
    Entry& e = it->second;
    if (e.tokens < tokens) {
      used_ += tokens - e.tokens;
      if (e.refs > 0) pinned_ += tokens - e.tokens;
      e.tokens = tokens;
    }
    if (e.refs > 0) return;
    if (!inserted) lru_.erase(e.pos);
    lru_.push_front(block);
    e.pos = lru_.begin();
  }

  // Evicts unpinned blocks, least recently used first, until used() <= limit
  // or nothing unpinned is left.
  void evict_to(std::int64_t limit) {
    while (used_ > limit && !lru_.empty()) {
      const std::uint64_t b = lru_.back();
      lru_.pop_back();
      auto it = map_.find(b);
      used_ -= it->second.tokens;
      map_.erase(it);
    }
  }

  // Calls f(block, tokens) on unpinned blocks, least recently used (the
  // next evicted) first, while f returns true.
  template <class F>
  void for_each_evictable(F&& f) const {
    for (auto it = lru_.rbegin(); it != lru_.rend(); ++it) {
      if (!f(*it, map_.at(*it).tokens)) return;
    }
  }

  std::int64_t used() const noexcept { return used_; }
  std::int64_t pinned() const noexcept { return pinned_; }
  std::int64_t capacity() const noexcept { return capacity_; }
  std::size_t blocks() const noexcept { return map_.size(); }
  bool holds(std::uint64_t block) const { return map_.count(block) != 0; }
  // Tokens held of `block` (0 when absent).
  std::int64_t tokens_of(std::uint64_t block) const {
    auto it = map_.find(block);
    return it == map_.end() ? 0 : it->second.tokens;
  }

 private:
  struct Entry {
    std::int64_t tokens = 0;
    std::int32_t refs = 0;
    std::list<std::uint64_t>::iterator pos{};  // valid when refs == 0
  };

  std::int64_t capacity_;
  std::int64_t used_ = 0;
  std::int64_t pinned_ = 0;  // tokens of entries with refs > 0
  std::unordered_map<std::uint64_t, Entry> map_;
  std::list<std::uint64_t> lru_;  // unpinned blocks, most recent first
};

// One infinite cache over the whole trace: the ideal token hit rate.
inline double ideal_hit_rate(const Trace& tr) {
  std::unordered_map<std::uint64_t, std::int64_t> held;
  std::int64_t hit = 0, total = 0;
  for (const SimRequest& r : tr.requests) {
    total += r.input_tokens;
    bool run = true;
    for (std::size_t k = 0; k < r.blocks.size(); ++k) {
      const std::int64_t need = r.block_tokens(k);
      std::int64_t& h = held[r.blocks[k]];
      if (run) {
        if (h >= need) {
          hit += need;
        } else {
          hit += h;
          run = false;
        }
      }
      h = std::max(h, need);
    }
  }
  return total == 0 ? 0 : static_cast<double>(hit) / static_cast<double>(total);
}

}  // namespace kvsim

#endif  // KVROUTE_EXAMPLES_SIM_SERVER_HPP_
