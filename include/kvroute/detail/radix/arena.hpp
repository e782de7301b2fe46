// -----------------------------------------------------------------------------
// File: kvroute/detail/radix/arena.hpp
// -----------------------------------------------------------------------------
//
// Not API. `detail::BlockArena`: the radix tree's memory for fragments, child
// blocks, tenant blocks and tenant directory (all but the nodes and claims,
// which live in the slab, and the line-aligned tenant states).
// Why the tree keeps its own memory:
//
//   * Threads. With glibc's malloc, two threads that insert and evict in one
//     tree free each other's fragments, and a free into another thread's
//     malloc arena takes that arena's lock, which two threads evicting
//     often then wait for more than they work. Here each thread
//     allocates from the shard of its thread_ordinal() (one spin lock per
//     shard, uncontended unless more threads than shards), and a free takes
//     the owning shard's lock for a few dozen instructions.
//   * Growth. glibc grows a thread's heap a few pages per mprotect, which
//     serialises with the other threads' page faults. The arena takes memory
//     in regions that double from 64 KB (malloc) to 2 MB (mmap). With huge
//     pages asked for, a 2 MB region is 2 MB-aligned and advised for
//     transparent huge pages: one fault per region, and fewer TLB misses in
//     a big tree. Off by default: where the system hands freed 2 MB blocks
//     back to a hypervisor (free page reporting, common on VMs) every huge
//     page is a fresh host allocation, which costs more than it saves.
//
// Inside a shard: a two-level segregated fit allocator (free lists by size
// class, 16 classes per power of two, a bitmap per level: alloc and free are
// O(1)), with boundary tags so that a freed block merges with free
// neighbours at once. A block costs an 8-byte header and rounding to 16
// bytes, as much as glibc's malloc. A region whose blocks are all free goes
// back to the system unless it is its shard's one spare, so the memory
// held is the live blocks, their fragmentation and one region per shard.
// Requests above kMaxBlock go to malloc (dealloc is given the size, so the
// arena knows which is which).
//
// Under AddressSanitizer (KVROUTE_ASAN) an arena built with the default
// `direct` passes every request to malloc, so that a use after free in the
// tree is caught; the arena's own tests build it with direct = false.
//
// Thread safety: allocate and deallocate may run concurrently from any
// threads. reserved_bytes() is a relaxed read. A DeferPrefaults belongs to
// the thread that made it.
//
//   detail::BlockArena arena;       // or arena(/*huge_pages=*/true)
//   void* p = arena.allocate(100);  // null when out of memory
//   arena.deallocate(p, 100);       // the size given to allocate
//
//   {
//     detail::BlockArena::DeferPrefaults later(arena);  // its prefaults wait
//     void* q = arena.allocate(100);  // (under the caller's locks)
//     later.run();                    // locks released, q still live
//   }

#ifndef KVROUTE_DETAIL_RADIX_ARENA_HPP_
#define KVROUTE_DETAIL_RADIX_ARENA_HPP_

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "kvroute/config.hpp"
#include "kvroute/detail/radix/rw_lock.hpp"
#include "kvroute/detail/striped.hpp"

#if defined(__linux__)
#include <sys/mman.h>
#endif

KVROUTE_NAMESPACE_BEGIN
namespace detail {

// Memory from the system, for the arena's regions. A region of kHugeBytes is
// mapped on its own (Linux), with `huge` aligned to its size and advised for
// transparent huge pages; smaller ones come from malloc.
inline constexpr std::size_t kHugeBytes = std::size_t{2} << 20;

inline void* map_region(std::size_t bytes, bool huge) noexcept {
#if defined(__linux__)
  if (bytes == kHugeBytes) {
    constexpr int kProt = PROT_READ | PROT_WRITE;
    constexpr int kMapFlags = MAP_PRIVATE | MAP_ANONYMOUS;
    if (!huge) {
      void* m = ::mmap(nullptr, bytes, kProt, kMapFlags, -1, 0);
      return m == MAP_FAILED ? nullptr : m;
    }
    // Map twice the size and keep the aligned half.
    void* m = ::mmap(nullptr, 2 * bytes, kProt, kMapFlags, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    const auto a = reinterpret_cast<std::uintptr_t>(m);
    const std::size_t head = ((a + bytes - 1) & ~(std::uintptr_t{bytes} - 1)) - a;
    char* p = static_cast<char*>(m) + head;
    if (head > 0) ::munmap(m, head);
    if (head < bytes) ::munmap(p + bytes, bytes - head);
#if defined(MADV_HUGEPAGE)
    ::madvise(p, bytes, MADV_HUGEPAGE);  // advice: ignored where unsupported
#endif
    return p;
  }
#endif
  (void)huge;
  return std::malloc(bytes);
}

inline void unmap_region(void* p, std::size_t bytes) noexcept {
#if defined(__linux__)
  if (bytes == kHugeBytes) {
    ::munmap(p, bytes);
    return;
  }
#endif
  std::free(p);
}

class BlockArena {
 public:
  // Larger requests go to malloc: a fragment that big is copied once and
  // read rarely, and a region must hold several blocks.
  static constexpr std::size_t kMaxBlock = std::size_t{256} << 10;
  static constexpr std::size_t kFirstRegion = std::size_t{64} << 10;
  static constexpr std::size_t kShards = 16;
  // How far ahead of its blocks a fresh 2 MB region is prefaulted (see
  // "prefaulting" below).
  static constexpr std::size_t kPrefaultStep = std::size_t{128} << 10;

  BlockArena() noexcept = default;
  // huge_pages: 2 MB regions on transparent huge pages (see above).
  // direct: every request goes to malloc (the default under ASan).
  explicit BlockArena(bool huge_pages, bool direct = KVROUTE_ASAN != 0) noexcept
      : huge_pages_(huge_pages), direct_(direct) {}
  BlockArena(const BlockArena&) = delete;
  BlockArena& operator=(const BlockArena&) = delete;
  ~BlockArena() {
    KVROUTE_ASSERT(tls_deferring == nullptr || tls_deferring->arena_ != this,
                   "BlockArena: destroyed while a DeferPrefaults of it is active");
    for (auto& slot : shards_) {
      Shard* s = slot.load(std::memory_order_relaxed);
      if (s == nullptr) continue;
      for (Region* r = s->regions; r != nullptr;) {
        Region* next = r->next;
        unmap_region(r, r->bytes);
        r = next;
      }
      s->~Shard();
      std::free(s);
    }
  }

  // Holds back the prefaults of this thread's allocations from `arena`
  // while it is alive, until run() or its destructor makes them: so that a
  // caller need not hold its own locks across the madvise call (about 50 us
  // a step, see "prefaulting" below). The radix tree opens one around each
  // insert, whose node locks other threads may be waiting for. What is
  // held back lies in the region of a block this thread allocated, which
  // keeps the region mapped while the block is live: the caller must keep
  // its blocks live until run() (the tree runs it before it leaves the
  // epoch section, under which nothing it linked into the tree can be
  // freed) and the arena alive. A block this thread frees in that region
  // meanwhile (an allocation the caller dropped) drops what is held back
  // there: the region could then go back to the system. While one is
  // active on a thread, a second one made there holds nothing back, nor does
  // one made with enabled = false; allocations from other arenas prefault
  // at once.
  class DeferPrefaults {
   public:
    explicit DeferPrefaults(BlockArena& arena, bool enabled = true) noexcept
        : arena_(&arena), active_(enabled && tls_deferring == nullptr) {
      if (active_) tls_deferring = this;
    }
    DeferPrefaults(const DeferPrefaults&) = delete;
    DeferPrefaults& operator=(const DeferPrefaults&) = delete;
    ~DeferPrefaults() { run(); }

    // Makes what was held back and stops holding back.
    void run() noexcept {
      if (active_) tls_deferring = nullptr;
      active_ = false;
      if (bytes_ != 0) arena_->prefault(from_, bytes_);
      bytes_ = 0;
    }

   private:
    friend class BlockArena;
    // Holds back [from, from + bytes) of the 2 MB region at `region`. The
    // steps of one region come in order and are merged; a step of another
    // region (a new one) replaces what was held (those pages fault as they
    // are written), so that nothing is prefaulted before run().
    void hold(char* from, std::size_t bytes, const char* region) noexcept {
      if (bytes_ != 0 && region == region_ && from_ + bytes_ == from) {
        bytes_ += bytes;
        return;
      }
      from_ = from;
      bytes_ = bytes;
      region_ = region;
    }
    // This thread frees the block at p: if it lies in the region held
    // back, the region may go back to the system before run().
    void freeing(const void* p) noexcept {
      const char* c = static_cast<const char*>(p);
      if (bytes_ != 0 && c >= region_ && c < region_ + kHugeBytes) bytes_ = 0;
    }

    BlockArena* const arena_;
    bool active_;
    char* from_ = nullptr;
    std::size_t bytes_ = 0;
    const char* region_ = nullptr;
  };

  // n bytes, 16-byte aligned; null when out of memory.
  void* allocate(std::size_t n) noexcept {
    if (n > kMaxBlock || direct_) {
      void* p = std::malloc(n);
      if (p != nullptr) reserved_.fetch_add(n, std::memory_order_relaxed);
      return p;
    }
    Shard* s = my_shard();
    if (s == nullptr) return nullptr;
    Prefault pf;
    void* p = nullptr;
    {
      std::lock_guard<SpinMutex> g(s->mu);
      p = s->allocate(payload_for(n), *this, pf);
    }
    // Outside the lock: another thread's free into this shard need not
    // wait for the kernel. The block is live, so its region stays mapped.
    // Held back if the thread defers its prefaults (DeferPrefaults).
    if (pf.bytes != 0) {
      if (tls_deferring != nullptr && tls_deferring->arena_ == this) {
        tls_deferring->hold(pf.from, pf.bytes, pf.region);
      } else {
        prefault(pf.from, pf.bytes);
      }
    }
    return p;
  }

  // p from allocate(n) with the same n (any thread).
  void deallocate(void* p, std::size_t n) noexcept {
    if (p == nullptr) return;
    if (n > kMaxBlock || direct_) {
      std::free(p);
      reserved_.fetch_sub(n, std::memory_order_relaxed);
      return;
    }
    if (tls_deferring != nullptr && tls_deferring->arena_ == this) tls_deferring->freeing(p);
    char* b = static_cast<char*>(p) - kHeader;
    Shard* s = shards_[owner(load_word(b))].load(std::memory_order_acquire);
    std::lock_guard<SpinMutex> g(s->mu);
    s->deallocate(b, *this);
  }

  // What the arena holds from the system: its regions and its large blocks
  // (not the shards' own list heads, about 2 KB per thread shard in use).
  std::size_t reserved_bytes() const noexcept { return reserved_.load(std::memory_order_relaxed); }

 private:
  // --- blocks ------------------------------------------------------------------
  //
  // A block starts with its 8-byte header word; its payload follows, 16-byte
  // aligned, and its size is 8 mod 16 so that the next header lands 8 bytes
  // before the next 16-byte boundary. The header holds the payload size
  // (a multiple of 8) with three flags in its low bits and the owning shard
  // in its top byte. A free block keeps its list links in the first 16
  // payload bytes and its own address in the last 8 (the footer), which the
  // next block reads to find it when its "previous is free" flag is set. A
  // region is a header, its blocks, and a zero-size used sentinel block.
  static constexpr std::size_t kHeader = 8;
  static constexpr std::size_t kMinPayload = 24;  // two links and a footer
  static constexpr std::uint64_t kFree = 1;
  static constexpr std::uint64_t kPrevFree = 2;
  static constexpr std::uint64_t kFirst = 4;  // the first block of its region
  static constexpr std::uint64_t kFlags = 7;
  static constexpr unsigned kOwnerShift = 56;
  static constexpr std::uint64_t kSizeMask = (std::uint64_t{1} << kOwnerShift) - 1 - kFlags;

  // Header words are read through atomic_ref because deallocate reads a
  // block's owner before it holds that owner's lock, while the owner may be
  // setting the block's kPrevFree flag (the owner bits never change while
  // the block is allocated). Relaxed: plain loads and stores.
  static std::uint64_t load_word(char* b) noexcept {
    return std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(b))
        .load(std::memory_order_relaxed);
  }
  static void store_word(char* b, std::uint64_t w) noexcept {
    std::atomic_ref<std::uint64_t>(*reinterpret_cast<std::uint64_t*>(b))
        .store(w, std::memory_order_relaxed);
  }
  // The sentinel that ends a region: the only block of size 0.
  static bool is_sentinel(std::uint64_t w) noexcept { return size_of(w) == 0; }
  static char* load_ptr(const char* at) noexcept {
    char* v;
    std::memcpy(static_cast<void*>(&v), at, sizeof v);
    return v;
  }
  static void store_ptr(char* at, char* v) noexcept {
    std::memcpy(at, static_cast<void*>(&v), sizeof v);
  }
  static std::size_t size_of(std::uint64_t w) noexcept {
    return static_cast<std::size_t>(w & kSizeMask);
  }
  static std::size_t owner(std::uint64_t w) noexcept {
    return static_cast<std::size_t>(w >> kOwnerShift);
  }
  static char* next_block(char* b, std::size_t size) noexcept { return b + kHeader + size; }
  // The smallest payload size >= n that is 8 mod 16.
  static std::size_t payload_for(std::size_t n) noexcept {
    const std::size_t s = ((n + 7) & ~std::size_t{15}) + 8;
    return s < kMinPayload ? kMinPayload : s;
  }

  // --- prefaulting -------------------------------------------------------------
  //
  // A fresh 2 MB region is carved from its start, so the pages a tree will
  // write next are known: the shard keeps the part of its newest region
  // not yet touched, and a block that reaches into it prefaults the next
  // kPrefaultStep bytes with one madvise(MADV_POPULATE_WRITE) instead of a
  // page fault per 4 KB page: one system call where there were 32 faults.
  // The step costs the request that takes it about 50 us (once per 128 KB
  // of new tree), where populating a whole region at once would cost one
  // request 1 ms. Where the call is missing (Linux before 5.14, other
  // systems) the pages fault as before. The radix tree's inserts make the
  // call after they have released their node locks (DeferPrefaults), so
  // that no other thread waits for a node while the prefault runs.
  static constexpr std::size_t kPage = 4096;
  struct Prefault {
    char* from = nullptr;
    std::size_t bytes = 0;
    const char* region = nullptr;  // the 2 MB region [from, from + bytes) lies in
  };
  void prefault(char* from, std::size_t bytes) noexcept {
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
    // Unsupported (EINVAL): stop asking. Other failures (out of memory, a
    // signal) leave the pages to fault as they are written.
    if (::madvise(from, bytes, MADV_POPULATE_WRITE) != 0 && errno == EINVAL) {
      prefault_ok_.store(false, std::memory_order_relaxed);
    }
#else
    (void)from;
    (void)bytes;
#endif
  }
  static bool can_prefault() noexcept {
#if defined(__linux__) && defined(MADV_POPULATE_WRITE)
    return true;
#else
    return false;
#endif
  }

  // --- regions -----------------------------------------------------------------

  struct Region {
    Region* prev;
    Region* next;
    std::size_t bytes;
    std::size_t pad[3];  // to a multiple of 16 bytes (asserted below)
  };
  static_assert(sizeof(Region) % 16 == 0, "region header layout");
  // The first block's header sits 8 bytes after the region header, so that
  // its payload is 16-byte aligned (regions are).
  static constexpr std::size_t kFirstBlockOffset = sizeof(Region) + 8;
  static char* first_block(Region* r) noexcept {
    return reinterpret_cast<char*>(r) + kFirstBlockOffset;
  }
  static Region* region_of_first(char* b) noexcept {
    return reinterpret_cast<Region*>(b - kFirstBlockOffset);
  }

  // --- size classes --------------------------------------------------------
  //
  // Sizes under 256 bytes: one class per 16 bytes (first level 0). Above:
  // first level = floor(log2(size)) - 7, second level = the next 4 bits.
  static constexpr unsigned kSlBits = 4;
  static constexpr unsigned kSl = 1u << kSlBits;
  static constexpr unsigned kFl = 15;  // sizes up to 4 MB
  struct Class {
    unsigned fl, sl;
  };
  static Class class_of(std::size_t s) noexcept {
    if (s < 256) return {0, static_cast<unsigned>(s >> 4)};
    const unsigned f = static_cast<unsigned>(std::bit_width(s)) - 1;
    return {f - 7, static_cast<unsigned>((s >> (f - kSlBits)) & (kSl - 1))};
  }
  // The first class whose every block is at least s.
  static Class class_at_least(std::size_t s) noexcept {
    if (s >= 256) {
      const unsigned f = static_cast<unsigned>(std::bit_width(s)) - 1;
      s += (std::size_t{1} << (f - kSlBits)) - 1;
    }
    return class_of(s);
  }

  struct alignas(kCacheLine) Shard {
    SpinMutex mu;
    std::uint32_t index = 0;
    std::uint32_t fl_bits = 0;
    std::uint32_t sl_bits[kFl] = {};
    char* heads[kFl][kSl] = {};
    Region* regions = nullptr;
    Region* spare = nullptr;  // an empty region kept for reuse
    std::size_t next_region = kFirstRegion;
    // The newest mapped region's pages not yet prefaulted (or touched by
    // the region's own set-up): [warm, warm_end), page-aligned.
    char* warm = nullptr;
    char* warm_end = nullptr;

    void push_free(char* b, std::size_t size) noexcept {
      const Class c = class_of(size);
      char* head = heads[c.fl][c.sl];
      store_ptr(b + kHeader, head);
      store_ptr(b + kHeader + 8, nullptr);
      if (head != nullptr) store_ptr(head + kHeader + 8, b);
      heads[c.fl][c.sl] = b;
      sl_bits[c.fl] |= 1u << c.sl;
      fl_bits |= 1u << c.fl;
    }
    void unlink_free(char* b, std::size_t size) noexcept {
      const Class c = class_of(size);
      char* next = load_ptr(b + kHeader);
      char* prev = load_ptr(b + kHeader + 8);
      if (next != nullptr) store_ptr(next + kHeader + 8, prev);
      if (prev != nullptr) {
        store_ptr(prev + kHeader, next);
      } else {
        heads[c.fl][c.sl] = next;
        if (next == nullptr) {
          sl_bits[c.fl] &= ~(1u << c.sl);
          if (sl_bits[c.fl] == 0) fl_bits &= ~(1u << c.fl);
        }
      }
    }
    // Marks b free with the given size (keeping its kPrevFree and kFirst
    // flags), writes its footer and tells the next block.
    void mark_free(char* b, std::uint64_t keep, std::size_t size) noexcept {
      store_word(b, (std::uint64_t{index} << kOwnerShift) | size | kFree | keep);
      char* n = next_block(b, size);
      store_ptr(n - 8, b);
      store_word(n, load_word(n) | kPrevFree);
    }
    char* find(std::size_t s) noexcept {
      const Class c = class_at_least(s);
      if (c.fl >= kFl) return nullptr;
      std::uint32_t sl = sl_bits[c.fl] & (~0u << c.sl);
      unsigned fl = c.fl;
      if (sl == 0) {
        const std::uint32_t fls = fl_bits & (~0u << (c.fl + 1));
        if (fls == 0) return nullptr;
        fl = static_cast<unsigned>(std::countr_zero(fls));
        sl = sl_bits[fl];
      }
      return heads[fl][std::countr_zero(sl)];
    }

    void* allocate(std::size_t s, BlockArena& arena, Prefault& pf) noexcept {
      char* b = find(s);
      if (b == nullptr) {
        if (!add_region(s, arena)) return nullptr;
        b = find(s);
        if (b == nullptr) return nullptr;  // add_region makes room; defensive
      }
      const std::uint64_t w = load_word(b);
      const std::size_t size = size_of(w);
      unlink_free(b, size);
      if ((w & kFirst) != 0 && is_sentinel(load_word(next_block(b, size))) &&
          spare == region_of_first(b)) {
        spare = nullptr;  // the spare region is in use again
      }
      const std::uint64_t keep = w & (kPrevFree | kFirst);
      const std::uint64_t tag = std::uint64_t{index} << kOwnerShift;
      if (size >= s + kHeader + kMinPayload) {
        // Split: the tail stays free (it is 8 mod 16: both sizes are).
        store_word(b, tag | s | keep);
        char* rest = next_block(b, s);
        const std::size_t rest_size = size - s - kHeader;
        mark_free(rest, 0, rest_size);
        push_free(rest, rest_size);
      } else {
        store_word(b, tag | size | keep);
        char* n = next_block(b, size);
        store_word(n, load_word(n) & ~kPrevFree);
      }
      // The block and what was written after it (the next header, and a
      // free rest's links), as far as they reach into the untouched part
      // of the newest region (a block elsewhere is below warm or past
      // warm_end).
      char* const reach = next_block(b, size_of(load_word(b))) + kHeader + kMinPayload;
      if (reach > warm && b < warm_end) {
        const std::size_t steps =
            (static_cast<std::size_t>(reach - warm) + kPrefaultStep - 1) / kPrefaultStep;
        char* const to =
            warm + std::min(steps * kPrefaultStep, static_cast<std::size_t>(warm_end - warm));
        pf = {warm, static_cast<std::size_t>(to - warm), warm_end + kPage - kHugeBytes};
        warm = to;
      }
      return b + kHeader;
    }

    void deallocate(char* b, BlockArena& arena) noexcept {
      const std::uint64_t w = load_word(b);
      std::size_t size = size_of(w);
      std::uint64_t keep = w & kFirst;
      // Merge with the next block, then with the previous one.
      char* n = next_block(b, size);
      const std::uint64_t nw = load_word(n);
      if ((nw & kFree) != 0) {
        unlink_free(n, size_of(nw));
        size += kHeader + size_of(nw);
      }
      if ((w & kPrevFree) != 0) {
        char* p = load_ptr(b - 8);
        const std::uint64_t pw = load_word(p);
        unlink_free(p, size_of(pw));
        size += kHeader + size_of(pw);
        b = p;
        keep = pw & (kFirst | kPrevFree);
      }
      if ((keep & kFirst) != 0 && is_sentinel(load_word(next_block(b, size)))) {
        // The whole region is free.
        Region* r = region_of_first(b);
        if (spare != nullptr) {
          release(r, arena);
          return;
        }
        spare = r;
      }
      mark_free(b, keep, size);
      push_free(b, size);
    }

    bool add_region(std::size_t s, BlockArena& arena) noexcept {
      std::size_t bytes = next_region;
      // Room for s rounded up to its class (find() takes only blocks of a
      // class whose every size is at least s: up to s / 16 more).
      while (bytes < kFirstBlockOffset + kHeader + s + s / 8 + kHeader) bytes *= 2;
      if (bytes > kHugeBytes) return false;  // s <= kMaxBlock never gets here
      void* m = map_region(bytes, arena.huge_pages_);
      if (m == nullptr) return false;
      if (next_region < kHugeBytes) next_region *= 2;
      auto* r = static_cast<Region*>(m);
      r->prev = nullptr;
      r->next = regions;
      r->bytes = bytes;
      if (regions != nullptr) regions->prev = r;
      regions = r;
      arena.reserved_.fetch_add(bytes, std::memory_order_relaxed);
      // Its first and last pages are touched here; the others are
      // prefaulted as blocks reach them.
      if (bytes == kHugeBytes && !arena.huge_pages_ &&
          arena.prefault_ok_.load(std::memory_order_relaxed)) {
        warm = static_cast<char*>(m) + kPage;
        warm_end = static_cast<char*>(m) + bytes - kPage;
      }
      // One free block from the first header to the sentinel.
      char* b = first_block(r);
      char* end = static_cast<char*>(m) + bytes - kHeader;
      const std::size_t size = static_cast<std::size_t>(end - b) - kHeader;
      store_word(end, 0);  // the sentinel: used, size 0
      mark_free(b, kFirst, size);
      push_free(b, size);
      return true;
    }

    void release(Region* r, BlockArena& arena) noexcept {
      if (warm_end > reinterpret_cast<char*>(r) &&
          warm_end <= reinterpret_cast<char*>(r) + r->bytes) {
        warm = warm_end = nullptr;  // its address range may be mapped again
      }
      if (r->prev != nullptr) r->prev->next = r->next;
      if (r->next != nullptr) r->next->prev = r->prev;
      if (regions == r) regions = r->next;
      arena.reserved_.fetch_sub(r->bytes, std::memory_order_relaxed);
      unmap_region(r, r->bytes);
    }
  };

  Shard* my_shard() noexcept {
    const std::size_t i = thread_ordinal() % kShards;
    Shard* s = shards_[i].load(std::memory_order_acquire);
    if (KVROUTE_LIKELY(s != nullptr)) return s;
    void* m = std::aligned_alloc(kCacheLine, sizeof(Shard));
    if (m == nullptr) return nullptr;
    auto* fresh = new (m) Shard();
    fresh->index = static_cast<std::uint32_t>(i);
    if (shards_[i].compare_exchange_strong(s, fresh, std::memory_order_acq_rel)) return fresh;
    fresh->~Shard();
    std::free(m);
    return s;
  }

  // The DeferPrefaults this thread holds its prefaults in, if any.
  static inline thread_local DeferPrefaults* tls_deferring = nullptr;

  std::atomic<Shard*> shards_[kShards] = {};
  std::atomic<std::size_t> reserved_{0};
  std::atomic<bool> prefault_ok_{can_prefault()};
  const bool huge_pages_ = false;
  const bool direct_ = KVROUTE_ASAN != 0;
};

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_RADIX_ARENA_HPP_
