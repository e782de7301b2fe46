// -----------------------------------------------------------------------------
// File: kvroute/detail/radix/rw_lock.hpp
// -----------------------------------------------------------------------------
//
// Not API. The radix tree's own small locks: `RwLock`, the four-byte
// reader-writer lock inside every node, and `SpinMutex` (below), the mutex
// of a tenant's LRU list and of the tree's allocators' shards.
//
// RwLock: readers share it, a writer holds it alone, and a waiting writer
// keeps new readers out so that a stream of matches cannot starve an insert.
// Waiting spins (for kSpinBeforeSleep), then is a futex wait (C++20
// atomic wait), so a blocked thread does not burn a core for long; a
// waiting reader or writer sets a bit before it sleeps, and an unlock makes
// a system call only when such a bit is set.
//
// It is written on std::atomic rather than absl::Mutex for two reasons: one
// per node must be small (absl::Mutex is eight bytes, std::shared_mutex 56),
// and ThreadSanitizer must see its synchronisation, which it cannot for a
// prebuilt, uninstrumented Abseil.
//
// It is also a version counter, for optimistic readers that take no lock:
// every exclusive hold bumps the version when it ends (unlock, downgrade),
// so a reader that noted the version before reading a node and finds it
// unchanged, with no writer in, afterwards read a state no writer touched
// in between (read_begin / validate; see the radix tree's optimistic
// descent). The word: bit 31 writer, 30 writer waiting, 29 reader waiting,
// bits 10-28 the version, bits 0-9 the readers (at most 1023 at once; a
// further reader waits as if a writer were waiting).
//
// The version wraps every 2^19 exclusive holds of one lock, so a token
// alone could be taken for current by a reader descheduled that long. A
// process-wide 64-bit count of wraps closes that: a hold whose bump wraps
// its lock's version adds one to it first (release order, while it holds
// the lock). A reader takes `wraps()` before its first read_begin() and
// asks `wrapped_since()` after its last validate() or same_version(); when
// nothing wrapped in between, every check it made was exact. The count
// cannot wrap in the life of a process, and it is written once per 2^19
// holds of one lock, so it stays in every reader's cache; a reader pays
// for it once per walk, not once per node.
//
// Not recursive. Not fair between readers and writers beyond "a waiting
// writer blocks new readers".
//
// Thread safety: thread-safe (it is a lock).

#ifndef KVROUTE_DETAIL_RADIX_RW_LOCK_HPP_
#define KVROUTE_DETAIL_RADIX_RW_LOCK_HPP_

#include <atomic>
#include <chrono>
#include <cstdint>

#include "kvroute/config.hpp"
#include "kvroute/detail/striped.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

// A pause for a spin-wait loop: tells the CPU the thread is spinning (less
// power, no memory-order mis-speculation when the lock is released).
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

// How long a waiter on either lock spins before it sleeps. Most holds it
// waits for are short (an insert prepares its allocations and copies
// before it takes a node exclusively; an LRU list update is a few dozen
// pointer writes), but one can last as long as the holder's page fault or
// the arena's prefault (tens of microseconds), and a futex sleep and
// wake-up cost about as much again, more on a virtual machine, where the
// sleeper's idle vCPU has to be woken. Timed by the clock, not counted in
// pauses, whose length depends on the CPU (a count that suits one CPU is
// far shorter than a hold on another, and its waiters then sleep for
// holds that a spin would have outlasted). Every SpinMutex spins the same: the
// tenants' LRU locks, the slab's and the arena's shard locks and the
// slab's growth lock (which some holders keep across a malloc or an
// mmap), and the epoch domain's overflow lock.
inline constexpr std::chrono::microseconds kSpinBeforeSleep{50};

// A waiter's spin: each pause() pauses once and says whether the waiter
// may go on spinning: false once kSpinBeforeSleep has passed since its
// first call (noticed within 64 calls: the clock is read once every 64
// pauses), and on every call after that.
class SpinWait {
 public:
  bool pause() noexcept {
    if (expired_) return false;
    if ((pauses_++ & 63) == 0) {
      const auto now = std::chrono::steady_clock::now();
      if (pauses_ == 1) {
        until_ = now + kSpinBeforeSleep;
      } else if (now >= until_) {
        expired_ = true;
        return false;
      }
    }
    cpu_relax();
    return true;
  }

 private:
  std::uint32_t pauses_ = 0;
  bool expired_ = false;
  std::chrono::steady_clock::time_point until_{};
};

// The count of every RwLock's version wraps (see RwLock), on a line of
// its own: read by every optimistic walk, written once per 2^19 holds of
// one lock.
struct alignas(kCacheLine) VersionWraps {
  std::atomic<std::uint64_t> n{0};
};
inline VersionWraps version_wraps;

class RwLock {
 public:
  RwLock() noexcept = default;
  RwLock(const RwLock&) = delete;
  RwLock& operator=(const RwLock&) = delete;

  // Each operation tries its uncontended case inline (one compare-exchange
  // or one read-modify-write) and leaves the rest out of line.
  void lock_shared() noexcept {
    std::uint32_t s = state_.load(std::memory_order_relaxed);
    if (KVROUTE_LIKELY(may_share(s)) &&
        state_.compare_exchange_weak(s, s + 1, std::memory_order_acquire,
                                     std::memory_order_relaxed)) {
      return;
    }
    lock_shared_slow();
  }

  void unlock_shared() noexcept {
    const std::uint32_t prev = state_.fetch_sub(1, std::memory_order_release);
    KVROUTE_ASSERT((prev & kReaderMask) != 0, "RwLock: unlock_shared without a reader");
    if (KVROUTE_UNLIKELY((prev & (kWriterWaiting | kReaderWaiting)) != 0)) wake_after_shared(prev);
  }

  void lock() noexcept {
    std::uint32_t s = state_.load(std::memory_order_relaxed) & kVersionMask;
    if (KVROUTE_LIKELY(state_.compare_exchange_weak(s, s | kWriter, std::memory_order_acquire,
                                                    std::memory_order_relaxed))) {
      writer_entered();
      return;
    }
    lock_slow();
    writer_entered();
  }

  void unlock() noexcept {
    KVROUTE_ASSERT((state_.load(std::memory_order_relaxed) & kWriter) != 0,
                   "RwLock: unlock without the writer");
    // Sleepers (either bit) are woken and set their bit again if they must
    // wait on; without any, no system call. The version moves on.
    std::uint32_t prev = state_.load(std::memory_order_relaxed);
    count_wrap(prev);
    while (!state_.compare_exchange_weak(prev, bumped(prev & ~(kWriter | kReaderWaiting)),
                                         std::memory_order_release, std::memory_order_relaxed)) {
    }
    if (KVROUTE_UNLIKELY((prev & (kWriterWaiting | kReaderWaiting)) != 0)) state_.notify_all();
  }

  // Turns the exclusive hold into a shared one without letting a writer in
  // between.
  void downgrade() noexcept {
    KVROUTE_ASSERT((state_.load(std::memory_order_relaxed) & kWriter) != 0,
                   "RwLock: downgrade without the writer");
    std::uint32_t s = state_.load(std::memory_order_relaxed);
    count_wrap(s);
    while (!state_.compare_exchange_weak(s, bumped(s & ~(kWriter | kReaderWaiting)) + 1,
                                         std::memory_order_release, std::memory_order_relaxed)) {
    }
    if (KVROUTE_UNLIKELY((s & kReaderWaiting) != 0)) state_.notify_all();
  }

  // Optimistic reads. read_begin() returns a token; if no writer holds the
  // lock (readable(token)), reads made after it and checked by
  // validate(token) saw a state that no exclusive hold changed meanwhile.
  // The reads themselves race with writers by design: they must be copies
  // that are used only once validated (and of memory that stays allocated,
  // see detail/radix/epoch.hpp).
  std::uint32_t read_begin() const noexcept { return state_.load(std::memory_order_acquire); }
  static bool readable(std::uint32_t token) noexcept { return (token & kWriter) == 0; }
  bool validate(std::uint32_t token) const noexcept {
#if !KVROUTE_TSAN
    // No fence under TSan (config.hpp); the acquire load keeps the earlier
    // reads before it on x86, which is what such a build runs on.
    std::atomic_thread_fence(std::memory_order_acquire);
#endif
    // Acquire: a wrap counted before the hold that wrote this word is seen
    // by a later wrapped_since().
    return unchanged(state_.load(std::memory_order_acquire), token);
  }
  // For a caller that holds the lock shared (no writer can be in): has any
  // exclusive hold ended since `token` was read?
  bool same_version(std::uint32_t token) const noexcept {
    return ((state_.load(std::memory_order_relaxed) ^ token) & kVersionMask) == 0;
  }

  // The wraps so far (see above), for wrapped_since(). Acquire: a wrap it
  // sees began after the word any later read_begin() returns.
  static std::uint64_t wraps() noexcept { return version_wraps.n.load(std::memory_order_acquire); }
  // Whether any lock's version has wrapped since wraps() returned `before`:
  // if not, every validate() and same_version() made since was exact.
  static bool wrapped_since(std::uint64_t before) noexcept {
    return version_wraps.n.load(std::memory_order_acquire) != before;
  }

 private:
  // The writer bit must be visible before any write the holder makes, or
  // an optimistic reader could see a new field with the old version (the
  // seqlock writer's fence; free on x86, where the compare-exchange
  // already orders it, and left out under TSan, see config.hpp).
  static void writer_entered() noexcept {
#if !KVROUTE_TSAN
    std::atomic_thread_fence(std::memory_order_release);
#endif
  }
  static bool unchanged(std::uint32_t s, std::uint32_t token) noexcept {
    return (s & kWriter) == 0 && ((s ^ token) & kVersionMask) == 0;
  }
  static bool may_share(std::uint32_t s) noexcept {
    return (s & (kWriter | kWriterWaiting)) == 0 && (s & kReaderMask) != kReaderMask;
  }
  // s with the version moved on by one (wrapping inside its bits).
  static std::uint32_t bumped(std::uint32_t s) noexcept {
    return (s & ~kVersionMask) | ((s + kVersionOne) & kVersionMask);
  }
  // Called by the writer before its hold ends, with the word as it is (its
  // version bits change only under the writer): counts the wrap when this
  // hold's bump will wrap the version, before any reader can see the
  // wrapped word. Release: a reader whose wraps() sees this count has seen
  // this hold begin, so the words it reads afterwards are not older.
  static void count_wrap(std::uint32_t s) noexcept {
    if (KVROUTE_UNLIKELY((bumped(s) & kVersionMask) == 0)) {
      version_wraps.n.fetch_add(1, std::memory_order_acq_rel);
    }
  }

  // After a reader left (prev: the word before it did): wake a waiting
  // writer when it was the last reader, and readers that found every
  // reader slot taken (kReaderMask holders) now that one is free.
  KVROUTE_NOINLINE void wake_after_shared(std::uint32_t prev) noexcept {
    const std::uint32_t readers = prev & kReaderMask;
    if ((readers == 1 && (prev & kWriterWaiting) != 0) ||
        (readers == kReaderMask && (prev & kReaderWaiting) != 0)) {
      state_.notify_all();
    }
  }

  KVROUTE_NOINLINE void lock_shared_slow() noexcept {
    std::uint32_t s = state_.load(std::memory_order_relaxed);
    for (SpinWait w;;) {
      if (may_share(s)) {
        if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acquire,
                                         std::memory_order_relaxed)) {
          return;
        }
        continue;
      }
      if (spin(w, s)) continue;
      // Say so before sleeping: unlock() wakes sleepers only when a bit
      // says there are some.
      if ((s & kReaderWaiting) == 0) {
        if (!state_.compare_exchange_weak(s, s | kReaderWaiting, std::memory_order_relaxed,
                                          std::memory_order_relaxed)) {
          continue;
        }
        s |= kReaderWaiting;
      }
      state_.wait(s, std::memory_order_relaxed);
      s = state_.load(std::memory_order_relaxed);
    }
  }

  KVROUTE_NOINLINE void lock_slow() noexcept {
    std::uint32_t s = state_.load(std::memory_order_relaxed);
    for (SpinWait w;;) {
      if ((s & ~(kWriterWaiting | kReaderWaiting | kVersionMask)) == 0) {
        // Free (perhaps with waiters): take it, keeping the readers' bit and
        // the version. Other waiting writers set the writers' bit again when
        // they wake.
        if (state_.compare_exchange_weak(s, kWriter | (s & (kReaderWaiting | kVersionMask)),
                                         std::memory_order_acquire, std::memory_order_relaxed)) {
          return;
        }
        continue;
      }
      if (spin(w, s)) continue;
      if ((s & kWriterWaiting) == 0) {
        if (!state_.compare_exchange_weak(s, s | kWriterWaiting, std::memory_order_relaxed,
                                          std::memory_order_relaxed)) {
          continue;
        }
        s |= kWriterWaiting;
      }
      state_.wait(s, std::memory_order_relaxed);
      s = state_.load(std::memory_order_relaxed);
    }
  }

  // One pause of a waiter's spin, then s reloaded; false once the waiter
  // has spun kSpinBeforeSleep and should sleep.
  bool spin(SpinWait& w, std::uint32_t& s) const noexcept {
    if (!w.pause()) return false;
    s = state_.load(std::memory_order_relaxed);
    return true;
  }

  static constexpr std::uint32_t kWriter = 1u << 31;
  static constexpr std::uint32_t kWriterWaiting = 1u << 30;
  static constexpr std::uint32_t kReaderWaiting = 1u << 29;
  static constexpr std::uint32_t kReaderMask = (1u << 10) - 1;
  static constexpr std::uint32_t kVersionOne = 1u << 10;
  static constexpr std::uint32_t kVersionMask = kReaderWaiting - kVersionOne;

  std::atomic<std::uint32_t> state_{0};
};

// `SpinMutex`, the four-byte mutex of a tree tenant's LRU list (and of the
// slab's and the arena's shards, the slab's growth and the epoch domain's
// overflow list). Most of its critical sections are a few dozen pointer
// updates, far shorter than a futex sleep and wake-up, so a contended
// lock() first spins (for kSpinBeforeSleep) and only then sleeps (C++20
// atomic wait).
// A plain std::mutex sleeps at once: with two threads routing to the same
// tenant, most of the time went to futex calls. The sleeping path is the
// classic three-state futex mutex (0 free, 1 held, 2 held with sleepers).
//
// Thread safety: thread-safe (it is a lock). Not recursive.
class SpinMutex {
 public:
  SpinMutex() noexcept = default;
  SpinMutex(const SpinMutex&) = delete;
  SpinMutex& operator=(const SpinMutex&) = delete;

  void lock() noexcept {
    if (KVROUTE_LIKELY(try_lock())) return;
    lock_slow();
  }

  bool try_lock() noexcept {
    std::uint32_t free = 0;
    return state_.compare_exchange_strong(free, 1, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }

  void unlock() noexcept {
    if (KVROUTE_UNLIKELY(state_.exchange(0, std::memory_order_release) == 2)) state_.notify_one();
  }

 private:
  KVROUTE_NOINLINE void lock_slow() noexcept {
    SpinWait w;
    do {
      if (state_.load(std::memory_order_relaxed) == 0 && try_lock()) return;
    } while (w.pause());
    while (state_.exchange(2, std::memory_order_acquire) != 0) {
      state_.wait(2, std::memory_order_relaxed);
    }
  }

  std::atomic<std::uint32_t> state_{0};
};

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_RADIX_RW_LOCK_HPP_
