// -----------------------------------------------------------------------------
// File: kvroute/detail/radix/fragments.hpp
// -----------------------------------------------------------------------------
//
// Not API. `Fragments<Symbol>`: where a node's text lives, and what a split
// does with it.
//   * Up to 8 bytes: in the node itself (RadixNode::frag, kFragInline).
//   * Short (under kLongBytes): a buffer of exactly its length
//     (kFragPlain). A split copies both parts into new buffers (or nodes)
//     and retires the old one.
//   * Long: a buffer of its own, after a 16-byte header written just before
//     the fragment: its distance from the buffer's start, and the buffer's
//     size (kFragInBuffer). A split leaves the buffer to one part and
//     copies the other (one allocation and no free: freeing a block another
//     thread allocated is what two threads' splits would otherwise do most)
//     as long as the part that keeps it still uses at least a quarter of it
//     (kDeadPerLive). The upper part keeps it in place; the lower part keeps
//     it with a new header written over the bytes just before it, which the
//     upper part no longer uses. Otherwise both parts are copied and the
//     buffer is retired. So a buffer never holds more than kDeadPerLive dead
//     bytes per live one (plus its header), and it goes with its one node.
//
// Thread safety: the functions that change a node require it held
// exclusively; what they replace is retired, not freed (TreeMemory).

#ifndef KVROUTE_DETAIL_RADIX_FRAGMENTS_HPP_
#define KVROUTE_DETAIL_RADIX_FRAGMENTS_HPP_

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kvroute/config.hpp"
#include "kvroute/detail/radix/memory.hpp"
#include "kvroute/detail/radix/node.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

// How a split treats a fragment (Fragments::split_mode).
enum class SplitFrag { kCopyBoth, kUpperKeeps, kLowerKeeps };

template <class Symbol>
struct Fragments {
  using Node = RadixNode<Symbol>;
  using Memory = TreeMemory<Symbol>;

  static constexpr std::size_t kLongBytes = 256;
  static constexpr std::size_t kHeaderBytes = 16;
  static constexpr std::size_t kDeadPerLive = 3;

  struct Header {
    std::size_t offset;  // from the buffer's start to the fragment
    std::size_t total;   // the buffer's size
  };
  // The allocation behind a fragment: the fragment itself, or its buffer.
  struct Buffer {
    void* base;
    std::size_t bytes;
  };

  // Where a fragment of `len` symbols lives when it is made.
  static std::uint8_t kind_for(std::size_t len) noexcept {
    if (Node::inline_len(len)) return kFragInline;
    return len * sizeof(Symbol) < kLongBytes ? kFragPlain : kFragInBuffer;
  }
  static Header header(const Symbol* f) noexcept {
    Header h;
    std::memcpy(&h, reinterpret_cast<const char*>(f) - kHeaderBytes, sizeof h);
    return h;
  }
  static void set_header(Symbol* f, Header h) noexcept {
    std::memcpy(reinterpret_cast<char*>(f) - kHeaderBytes, &h, sizeof h);
  }
  static Buffer buffer(Symbol* f, std::size_t len, std::uint8_t kind) noexcept {
    if (kind == kFragPlain) return {f, len * sizeof(Symbol)};
    const Header h = header(f);
    return {reinterpret_cast<char*>(f) - h.offset, h.total};
  }

  // A buffer for len symbols, of kind kind_for(len); null when out of
  // memory. Requires a length that does not fit in the node.
  static Symbol* alloc(Memory& m, std::size_t len) noexcept {
    KVROUTE_ASSERT(!Node::inline_len(len), "radix tree: a buffer for an inline fragment");
    const std::size_t b = len * sizeof(Symbol);
    if (kind_for(len) == kFragPlain) return static_cast<Symbol*>(m.alloc(b));
    const Header h{kHeaderBytes, b + kHeaderBytes};
    auto* p = static_cast<char*>(m.alloc(h.total));
    if (p == nullptr) return nullptr;
    auto* f = reinterpret_cast<Symbol*>(p + kHeaderBytes);
    set_header(f, h);
    return f;
  }
  // alloc(len) holding src[0, len); null when out of memory.
  static Symbol* alloc_copy(Memory& m, const Symbol* src, std::size_t len) noexcept {
    Symbol* f = alloc(m, len);
    if (f != nullptr) std::memcpy(f, src, len * sizeof(Symbol));
    return f;
  }
  // Frees a buffer from alloc (f may be null) that was never published.
  static void free(Memory& m, Symbol* f, std::size_t len, std::uint8_t kind) noexcept {
    if (f == nullptr || kind == kFragInline) return;
    const Buffer b = buffer(f, len, kind);
    m.dealloc(b.base, b.bytes);
  }
  // The same for a buffer as alloc(len) returned it: not one a split has
  // since cut, whose kind the node keeps.
  static void free(Memory& m, Symbol* f, std::size_t len) noexcept {
    free(m, f, len, kind_for(len));
  }
  // Retires a published buffer (f may be null).
  static void retire(Memory& m, Symbol* f, std::size_t len, std::uint8_t kind) noexcept {
    if (f == nullptr) return;
    const Buffer b = buffer(f, len, kind);
    m.retire(b.base, b.bytes);
  }
  // n's buffer, if it has one.
  static void retire(Memory& m, const Node& n) noexcept {
    if (n.frag_kind != kFragInline) retire(m, n.frag.ptr, n.len, n.frag_kind);
  }

  // Gives n the fragment src[0, len) (n.len is not read: the caller sets
  // it): in the node when it fits there, else in buf (from alloc(len)),
  // copied there unless `filled`. src may be n's own inline fragment.
  static void set(Node& n, Symbol* buf, const Symbol* src, std::size_t len,
                  bool filled = false) noexcept {
    n.frag_kind = kind_for(len);
    if (n.frag_kind == kFragInline) {
      typename Node::Frag f{nullptr};
      std::memcpy(f.in, src, len * sizeof(Symbol));
      n.frag = f;
      return;
    }
    n.frag.ptr = buf;
    if (!filled) std::memcpy(buf, src, len * sizeof(Symbol));
  }

  // What a split of x after its first k symbols does with x's buffer.
  static SplitFrag split_mode(const Node& x, std::size_t k) noexcept {
    if (x.frag_kind != kFragInBuffer) return SplitFrag::kCopyBoth;
    const std::size_t total = header(x.frag.ptr).total;
    const std::size_t up = k * sizeof(Symbol);
    const std::size_t low = (x.len - k) * sizeof(Symbol);
    // A part may keep the buffer while the rest of it (its dead bytes,
    // header included) is at most kDeadPerLive times what it uses, plus
    // the header.
    const bool upper_ok = total - up <= kDeadPerLive * up + kHeaderBytes;
    // The lower part's header goes over the upper part's last bytes.
    const bool lower_ok = up >= kHeaderBytes && total - low <= kDeadPerLive * low + kHeaderBytes;
    if (upper_ok && (!lower_ok || low <= up)) return SplitFrag::kUpperKeeps;  // copy the lower
    if (lower_ok) return SplitFrag::kLowerKeeps;                              // copy the upper
    return SplitFrag::kCopyBoth;
  }

  // Splits x's fragment after its first k symbols as `mode` says: `lower`
  // gets the rest (in `lower_buf` unless it keeps x's buffer) and x keeps
  // the first k (in `upper_buf` unless it keeps its buffer). Sets both
  // fragments and kinds, not the lengths. Retires x's old buffer when both
  // parts are copied.
  static void split(Memory& m, Node& x, Node& lower, std::size_t k, SplitFrag mode,
                    Symbol* lower_buf, Symbol* upper_buf) noexcept {
    const Symbol* src = x.data();
    const std::size_t lower_len = x.len - k;
    switch (mode) {
      case SplitFrag::kCopyBoth: {  // x's old buffer (if any) retired once both are copied
        Symbol* old = x.frag_kind == kFragInline ? nullptr : x.frag.ptr;
        const std::uint8_t old_kind = x.frag_kind;
        set(lower, lower_buf, src + k, lower_len);
        set(x, upper_buf, src, k);
        retire(m, old, x.len, old_kind);  // x.len is still the old length
        break;
      }
      case SplitFrag::kUpperKeeps:  // x keeps the buffer, shortened
        set(lower, lower_buf, src + k, lower_len);
        break;
      case SplitFrag::kLowerKeeps: {  // lower takes the buffer from src + k on
        const Header h = header(x.frag.ptr);
        Symbol* buf = x.frag.ptr;
        set(x, upper_buf, src, k);  // before lower's header covers its last bytes
        lower.frag.ptr = buf + k;
        lower.frag_kind = kFragInBuffer;
        set_header(lower.frag.ptr, {h.offset + k * sizeof(Symbol), h.total});
        break;
      }
    }
  }
};

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_RADIX_FRAGMENTS_HPP_
