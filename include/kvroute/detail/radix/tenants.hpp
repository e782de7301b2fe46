// -----------------------------------------------------------------------------
// File: kvroute/detail/radix/tenants.hpp
// -----------------------------------------------------------------------------
//
// Not API. The radix tree's tenant directory.
//   * TenantState: one tenant's LRU list (head and tail claims), its size,
//     and the two mutexes of its list and of its maintenance. Created on
//     the tenant's first insert and kept (and reused) until the tree is
//     destroyed, so a pointer to it never dangles.
//   * TenantDirectory: tenant id -> state, a three-level table of 256
//     entries a level (ids below 2^24), read without a lock; plus a list of
//     every state ever created, for the operations that visit all tenants.
//
// Thread safety: thread-safe. Lookups are acquire loads; creation installs
// with compare-exchange, so two threads creating one tenant agree on one
// state.

#ifndef KVROUTE_DETAIL_RADIX_TENANTS_HPP_
#define KVROUTE_DETAIL_RADIX_TENANTS_HPP_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <new>

#include "kvroute/config.hpp"
#include "kvroute/detail/radix/rw_lock.hpp"
#include "kvroute/detail/radix/slab.hpp"
#include "kvroute/detail/striped.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

// Tenant ids the directory holds: [0, kTenantIds).
inline constexpr std::uint32_t kTenantIds = 1u << 24;

// Every insert for the tenant writes it, so it takes whole lines: inserts
// for two tenants do not share one.
struct alignas(kCacheLine) TenantState {
  explicit TenantState(std::uint32_t i) noexcept : id(i) {}
  const std::uint32_t id;
  SpinMutex lru_mu;                     // guards head, tail and every claim's links
  std::mutex maint_mu;                  // serialises evict/drop/remove for this tenant
  std::uint32_t head = kNilIndex;       // most recent claim
  std::uint32_t tail = kNilIndex;       // least recent: always a leaf for this tenant
  std::atomic<std::size_t> size{0};     // written under lru_mu
  std::atomic<std::size_t> listed{0};   // claims in the list; under lru_mu
  std::atomic<bool> registered{false};  // written under the root's lock
  TenantState* next_state = nullptr;    // every state's list; immutable once published
};

class TenantDirectory {
 public:
  TenantDirectory() noexcept = default;
  TenantDirectory(const TenantDirectory&) = delete;
  TenantDirectory& operator=(const TenantDirectory&) = delete;

  // t's state, or null when t never inserted (or t >= kTenantIds).
  TenantState* find(std::uint32_t t) const noexcept {
    if (t >= kTenantIds) return nullptr;
    Mid* mid = top_[t >> 16].load(std::memory_order_acquire);
    if (mid == nullptr) return nullptr;
    Leaf* leaf = mid->slot[(t >> 8) & 0xFFu].load(std::memory_order_acquire);
    if (leaf == nullptr) return nullptr;
    return leaf->slot[t & 0xFFu].load(std::memory_order_acquire);
  }

  // t's state, created on first sight with memory from `m` (a TreeMemory);
  // null when out of memory. Requires t < kTenantIds.
  template <class Memory>
  TenantState* find_or_create(std::uint32_t t, Memory& m) noexcept {
    if (TenantState* s = find(t)) return s;
    Mid* mid = install(top_[t >> 16], m);
    if (mid == nullptr) return nullptr;
    Leaf* leaf = install(mid->slot[(t >> 8) & 0xFFu], m);
    if (leaf == nullptr) return nullptr;
    std::atomic<TenantState*>& slot = leaf->slot[t & 0xFFu];
    TenantState* cur = slot.load(std::memory_order_acquire);
    if (cur != nullptr) return cur;
    static_assert(sizeof(TenantState) % kCacheLine == 0);
    void* p = m.alloc_line_aligned(sizeof(TenantState));
    if (p == nullptr) return nullptr;
    auto* fresh = new (p) TenantState(t);
    if (!slot.compare_exchange_strong(cur, fresh, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
      fresh->~TenantState();
      m.dealloc_line_aligned(p, sizeof(TenantState));
      return cur;
    }
    TenantState* head = states_.load(std::memory_order_relaxed);
    do {
      fresh->next_state = head;
    } while (!states_.compare_exchange_weak(head, fresh, std::memory_order_release,
                                            std::memory_order_relaxed));
    return fresh;
  }

  // Every state ever created, newest first (follow next_state).
  TenantState* first() const noexcept { return states_.load(std::memory_order_acquire); }

  // The directory's table bytes (counted in the tree's bytes).
  std::size_t table_bytes() const noexcept {
    std::size_t bytes = 0;
    for (const auto& top : top_) {
      const Mid* mid = top.load(std::memory_order_acquire);
      if (mid == nullptr) continue;
      bytes += sizeof(Mid);
      for (const auto& leaf : mid->slot) {
        if (leaf.load(std::memory_order_acquire) != nullptr) bytes += sizeof(Leaf);
      }
    }
    return bytes;
  }

  // Frees every state and the table into `m`. Requires that no other
  // thread uses the directory.
  template <class Memory>
  void destroy(Memory& m) noexcept {
    TenantState* ts = states_.load();
    while (ts != nullptr) {
      TenantState* next = ts->next_state;
      ts->~TenantState();
      m.dealloc_line_aligned(ts, sizeof(TenantState));
      ts = next;
    }
    states_.store(nullptr);
    for (auto& top : top_) {
      Mid* mid = top.exchange(nullptr);
      if (mid == nullptr) continue;
      for (auto& l : mid->slot) {
        if (Leaf* leaf = l.load()) {
          leaf->~Leaf();
          m.dealloc(leaf, sizeof(Leaf));
        }
      }
      mid->~Mid();
      m.dealloc(mid, sizeof(Mid));
    }
  }

 private:
  struct Leaf {
    std::atomic<TenantState*> slot[256];
  };
  struct Mid {
    std::atomic<Leaf*> slot[256];
  };

  template <class T, class Memory>
  static T* install(std::atomic<T*>& slot, Memory& m) noexcept {
    T* cur = slot.load(std::memory_order_acquire);
    if (cur != nullptr) return cur;
    void* p = m.alloc(sizeof(T));
    if (p == nullptr) return nullptr;
    T* fresh = new (p) T{};
    if (slot.compare_exchange_strong(cur, fresh, std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
      return fresh;
    }
    fresh->~T();
    m.dealloc(p, sizeof(T));
    return cur;
  }

  // Read by every operation that names a tenant: on lines of their own.
  alignas(kCacheLine) std::atomic<Mid*> top_[256] = {};
  std::atomic<TenantState*> states_{nullptr};
};

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_RADIX_TENANTS_HPP_
