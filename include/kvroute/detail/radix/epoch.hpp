// -----------------------------------------------------------------------------
// File: kvroute/detail/radix/epoch.hpp
// -----------------------------------------------------------------------------
//
// Not API. `detail::EpochDomain`: epoch-based reclamation, so that readers
// may walk a structure without holding locks while writers unlink parts of
// it. A writer that unlinks an object does not free it; it retires it, and
// the domain hands it back to its owner (a callback) only once every reader
// that could still hold it has left. The radix tree's optimistic descent
// rests on it: a match takes no lock on the nodes it passes (and so writes
// nothing on them), so nothing it may be reading can be freed under it
// (docs/tree-design.md: a read that writes a shared line makes two threads
// reading the same top nodes take it from each other).
//
// How: a global epoch and a fixed number of slots, each on a cache line of
// its own. A reader enters a section by claiming a free slot (a
// compare-exchange on a line no other thread touches in the common case),
// writing the epoch into it and issuing a full fence; it leaves by clearing
// the slot. When every slot held by a reader shows the current epoch, the
// epoch may advance; an object retired at epoch e is reclaimed once the
// epoch has reached e + 2, when no reader that entered before it was
// unlinked can still be inside. Each slot keeps the list of what its holders
// retired, so retiring needs no shared lock.
//
// No hidden threads and no waiting: if no slot is free (more concurrent
// readers than slots), enter() returns an unprotected section and the caller
// takes its locked path instead; reclamation happens in retire() (every
// kBatch objects a list receives) and in collect(), which a host's
// maintenance call runs. An
// object whose retire list cannot grow (out of memory) is leaked rather than
// freed early; leaked() counts them.
//
// Thread safety: enter, retire, collect and the counters may run
// concurrently from any threads. A section belongs to the thread that
// entered it: it must be left (or destroyed) on that thread. The
// destructor reclaims everything still retired and requires that no section
// is open. The reclaim callback runs on whichever thread reclaims, never
// while that thread's own section protects the object, and must not call
// into the domain.
//
//   detail::EpochDomain domain(&owner, [](void* o, const detail::Retired& r) noexcept {
//     static_cast<Owner*>(o)->free_now(r);
//   });
//   {
//     detail::EpochDomain::Section s = domain.enter();
//     if (s.protects()) { /* read without locks */ }
//     domain.retire({ptr, bytes, kind});  // instead of freeing ptr
//   }
//   domain.collect();  // from the host's periodic maintenance

#ifndef KVROUTE_DETAIL_RADIX_EPOCH_HPP_
#define KVROUTE_DETAIL_RADIX_EPOCH_HPP_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <new>

#include "kvroute/config.hpp"
#include "kvroute/detail/radix/rw_lock.hpp"
#include "kvroute/detail/striped.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

// An object handed to EpochDomain::retire. `ptr`, `size` and `kind` mean
// what the owner's reclaim callback makes of them; `epoch` is set by retire.
struct Retired {
  void* ptr = nullptr;
  std::uint64_t size = 0;
  std::uint32_t kind = 0;
  std::uint64_t epoch = 0;
};

class EpochDomain {
 public:
  using Reclaim = void (*)(void* owner, const Retired& r) noexcept;

  // Slots: the most readers inside sections at once before enter() starts
  // returning unprotected sections.
  static constexpr std::size_t kSlots = 64;
  // Slots an enter() tries, starting from the thread's own.
  static constexpr std::size_t kProbes = 4;
  // Protected sections one thread may hold at once (over all domains).
  static constexpr std::size_t kMaxOpen = 4;
  // A slot's list reclaims what it can each time it holds this many more.
  static constexpr std::size_t kBatch = 64;

  // A reader's section: leaves it on destruction. Movable, not copyable.
  class Section {
   public:
    Section() noexcept = default;
    Section(Section&& o) noexcept : domain_(o.domain_), slot_(o.slot_) { o.domain_ = nullptr; }
    Section& operator=(Section&& o) noexcept {
      if (this != &o) {
        leave();
        domain_ = o.domain_;
        slot_ = o.slot_;
        o.domain_ = nullptr;
      }
      return *this;
    }
    Section(const Section&) = delete;
    Section& operator=(const Section&) = delete;
    ~Section() { leave(); }

    // True if retired objects stay allocated while the section is open.
    bool protects() const noexcept { return domain_ != nullptr; }
    // Leaves early (a no-op for an unprotected or moved-from section).
    void leave() noexcept {
      if (domain_ != nullptr) domain_->leave(slot_);
      domain_ = nullptr;
    }

   private:
    friend class EpochDomain;
    Section(EpochDomain* d, std::size_t slot) noexcept : domain_(d), slot_(slot) {}
    EpochDomain* domain_ = nullptr;
    std::size_t slot_ = 0;
  };

  EpochDomain(void* owner, Reclaim reclaim) noexcept : owner_(owner), reclaim_(reclaim) {}
  EpochDomain(const EpochDomain&) = delete;
  EpochDomain& operator=(const EpochDomain&) = delete;
  ~EpochDomain() {
    for (Slot& s : slots_) {
      for (std::size_t i = 0; i < s.n; ++i) reclaim_(owner_, s.items[i]);
      std::free(s.items);
    }
    for (std::size_t i = 0; i < overflow_.n; ++i) reclaim_(owner_, overflow_.items[i]);
    std::free(overflow_.items);
  }

  // Enters a section. Never blocks; unprotected when no slot is free (or
  // the thread already holds kMaxOpen sections).
  Section enter() noexcept {
    if (tls_open_count == kMaxOpen) {
      unprotected_.fetch_add(1, std::memory_order_relaxed);
      return {};
    }
    const std::size_t home = home_slot();
    for (std::size_t p = 0; p < kProbes; ++p) {
      const std::size_t i = (home + p) % kSlots;
      std::uint64_t w = slots_[i].word.load(std::memory_order_relaxed);
      if (w != kFree) continue;
      const std::uint64_t e = epoch_.load(std::memory_order_relaxed);
      // Acquire: the slot's retire list was last used by whoever released
      // the slot (a reader's leave(), or collect()).
      if (slots_[i].word.compare_exchange_strong(w, reading(e), std::memory_order_acquire,
                                                 std::memory_order_relaxed)) {
        // Orders the announcement before every read the section makes, and
        // pairs with the fence in try_advance.
        full_fence();
        tls_open[tls_open_count++] = {this, i};
        return {this, i};
      }
    }
    unprotected_.fetch_add(1, std::memory_order_relaxed);
    return {};
  }

  // Defers reclaiming `r` until no section that may have seen it is open.
  // Goes to the list of a section of this domain the calling thread holds,
  // else to a shared list under a spin lock. Never throws; see leaked() for
  // what happens without memory.
  void retire(Retired r) noexcept {
    full_fence();
    r.epoch = epoch_.load(std::memory_order_relaxed);
    const std::size_t slot = open_slot();
    if (slot != kNoSlot) {
      push_batched(slots_[slot], r);
      return;
    }
    std::lock_guard<SpinMutex> g(overflow_mu_);
    push_batched(overflow_, r);
  }

  // Advances the epoch if it can and reclaims what has expired in every
  // slot not in use and in the overflow list. Returns the number reclaimed.
  std::size_t collect() noexcept {
    std::size_t done = 0;
    for (int round = 0; round < 2; ++round) {
      try_advance();
      for (Slot& s : slots_) {
        std::uint64_t w = kFree;
        if (!s.word.compare_exchange_strong(w, kCollecting, std::memory_order_acquire,
                                            std::memory_order_relaxed)) {
          continue;  // a reader holds it; it reclaims its own list
        }
        done += reclaim_expired(s);
        s.mark = s.n;
        s.word.store(kFree, std::memory_order_release);
      }
      std::lock_guard<SpinMutex> g(overflow_mu_);
      done += reclaim_expired(overflow_);
    }
    return done;
  }

  // Retired and not yet reclaimed (leaked ones excluded). A sum over the
  // slots: exact when no thread is retiring or reclaiming.
  std::size_t pending() const noexcept {
    std::size_t n = overflow_.size.load(std::memory_order_relaxed);
    for (const Slot& s : slots_) n += s.size.load(std::memory_order_relaxed);
    return n;
  }
  // Objects leaked because a retire list could not grow.
  std::size_t leaked() const noexcept { return leaked_.load(std::memory_order_relaxed); }
  // enter() calls that found no free slot.
  std::size_t unprotected() const noexcept { return unprotected_.load(std::memory_order_relaxed); }
  std::uint64_t epoch() const noexcept { return epoch_.load(std::memory_order_relaxed); }

 private:
  // A slot word: kFree, kCollecting (collect() owns the list; not a reader)
  // or reading(e) (a reader entered at epoch e).
  static constexpr std::size_t kNoSlot = ~std::size_t{0};
  static constexpr std::uint64_t kFree = 0;
  static constexpr std::uint64_t kCollecting = 2;
  static constexpr std::uint64_t reading(std::uint64_t e) noexcept { return (e << 1) | 1; }
  static constexpr bool is_reading(std::uint64_t w) noexcept { return (w & 1) != 0; }

  // A sequentially consistent fence. GCC cannot instrument a standalone
  // fence for ThreadSanitizer (it is an error under -Werror), so a TSan
  // build uses a sequentially consistent read-modify-write of one shared
  // word instead: stronger (every caller synchronises through it), so such
  // a build checks the algorithm with at least the ordering it relies on.
  void full_fence() noexcept {
#if KVROUTE_TSAN
    tsan_fence_.fetch_add(0, std::memory_order_seq_cst);
#else
    std::atomic_thread_fence(std::memory_order_seq_cst);
#endif
  }

  struct List {
    Retired* items = nullptr;
    std::size_t n = 0;
    std::size_t cap = 0;
    std::size_t mark = 0;  // n after the last reclaim
    // n, for pending() on other threads; written only by the list's user,
    // on the list's own cache line (no shared counter to contend on).
    std::atomic<std::size_t> size{0};
  };
  // The list is used only by whoever holds the slot (a reader, or collect()).
  struct alignas(kCacheLine) Slot : List {
    std::atomic<std::uint64_t> word{kFree};
  };

  // Spreads threads over the slots: the n-th thread to ask starts at slot n.
  static std::size_t home_slot() noexcept { return thread_ordinal() % kSlots; }

  void leave(std::size_t slot) noexcept {
    for (std::size_t k = 0; k < tls_open_count; ++k) {
      if (tls_open[k].domain == this && tls_open[k].slot == slot) {
        // Keep the order (newest last): sections usually close in reverse.
        for (std::size_t j = k + 1; j < tls_open_count; ++j) tls_open[j - 1] = tls_open[j];
        --tls_open_count;
        break;
      }
    }
    slots_[slot].word.store(kFree, std::memory_order_release);
  }

  // The slot of the newest section of this domain the calling thread holds.
  std::size_t open_slot() const noexcept {
    for (std::size_t k = tls_open_count; k-- > 0;) {
      if (tls_open[k].domain == this) return tls_open[k].slot;
    }
    return kNoSlot;
  }

  // False (and the object leaked) when the list cannot grow.
  bool push(List& l, const Retired& r) noexcept {
    if (l.n == l.cap) {
      const std::size_t cap = l.cap == 0 ? kBatch : l.cap * 2;
      void* p = std::realloc(static_cast<void*>(l.items), cap * sizeof(Retired));
      if (p == nullptr) {
        leaked_.fetch_add(1, std::memory_order_relaxed);
        return false;
      }
      l.items = static_cast<Retired*>(p);
      l.cap = cap;
    }
    l.items[l.n++] = r;
    l.size.store(l.n, std::memory_order_relaxed);
    return true;
  }
  // push, and every kBatch objects the list receives, an epoch advance and a
  // reclaim of what in it has expired: every list stays bounded without
  // collect(). The caller owns `l` (its slot, or overflow_mu_).
  void push_batched(List& l, const Retired& r) noexcept {
    if (!push(l, r)) return;
    if (l.n >= l.mark + kBatch) {
      try_advance();
      reclaim_expired(l);
      l.mark = l.n;
    }
  }

  // The epoch moves on only when every reader shows the current one: a
  // reader that entered earlier may still hold what was unlinked since.
  void try_advance() noexcept {
    std::uint64_t e = epoch_.load(std::memory_order_relaxed);
    full_fence();
    // Acquire loads rather than an acquire fence: ThreadSanitizer sees the
    // edge from a reader's leave() to the reclaim only through them.
    for (const Slot& s : slots_) {
      const std::uint64_t w = s.word.load(std::memory_order_acquire);
      if (is_reading(w) && (w >> 1) != e) return;
    }
    epoch_.compare_exchange_strong(e, e + 1, std::memory_order_acq_rel, std::memory_order_relaxed);
  }

  // Reclaims the items of `l` retired two or more epochs ago; keeps the rest.
  std::size_t reclaim_expired(List& l) noexcept {
    const std::uint64_t now = epoch_.load(std::memory_order_acquire);
    std::size_t kept = 0;
    std::size_t done = 0;
    for (std::size_t i = 0; i < l.n; ++i) {
      if (l.items[i].epoch + 2 <= now) {
        reclaim_(owner_, l.items[i]);
        ++done;
      } else {
        l.items[kept++] = l.items[i];
      }
    }
    l.n = kept;
    l.size.store(kept, std::memory_order_relaxed);
    return done;
  }

  // The protected sections the calling thread holds, so that retire() finds
  // its slot without being handed the section.
  struct Open {
    const EpochDomain* domain;
    std::size_t slot;
  };
  static inline thread_local Open tls_open[kMaxOpen] = {};
  static inline thread_local std::size_t tls_open_count = 0;

  void* const owner_;
  const Reclaim reclaim_;
  alignas(kCacheLine) std::atomic<std::uint64_t> epoch_{1};
  Slot slots_[kSlots];
  SpinMutex overflow_mu_;
  List overflow_;  // retired from unprotected sections; under overflow_mu_
  std::atomic<std::size_t> leaked_{0};
  std::atomic<std::size_t> unprotected_{0};
  std::atomic<std::uint64_t> tsan_fence_{0};  // see full_fence()
};

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_RADIX_EPOCH_HPP_
