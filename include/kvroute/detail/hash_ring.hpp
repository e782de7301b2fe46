// -----------------------------------------------------------------------------
// File: kvroute/detail/hash_ring.hpp
// -----------------------------------------------------------------------------
//
// Not API. `HashRing`, the consistent-hash ring behind consistent_hashing and
// prefix_hash. Each member contributes kVirtualNodes points at
// xxh64("<url>#<i>"), so a member's points depend only on its own URL: adding
// or removing one member moves only the keys that land on its points, and the
// ring is identical in every process that sees the same URLs.
//
// Thread safety: immutable after construction; `walk` may run concurrently.

#ifndef KVROUTE_DETAIL_HASH_RING_HPP_
#define KVROUTE_DETAIL_HASH_RING_HPP_

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kvroute/config.hpp"
#include "kvroute/detail/stable_hash.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

class HashRing {
 public:
  static constexpr int kVirtualNodes = 150;

  // Builds the ring over `urls`; member i of the ring is urls[i].
  explicit HashRing(std::span<const std::string_view> urls) {
    points_.reserve(urls.size() * kVirtualNodes);
    std::string label;
    for (std::size_t m = 0; m < urls.size(); ++m) {
      for (int i = 0; i < kVirtualNodes; ++i) {
        label.assign(urls[m]);
        label.push_back('#');
        label.append(std::to_string(i));
        points_.push_back({xxh64(label), static_cast<std::uint32_t>(m)});
      }
    }
    // Equal positions (a 64-bit collision) are ordered by URL, then vnode
    // order is irrelevant: the result must not depend on insertion order.
    std::sort(points_.begin(), points_.end(), [&](const Point& a, const Point& b) {
      if (a.pos != b.pos) return a.pos < b.pos;
      return urls[a.member] < urls[b.member];
    });
  }

  std::size_t size() const noexcept { return points_.size(); }

  // The ring position of a key.
  static std::uint64_t position(std::string_view key) noexcept { return xxh64(key); }

  // Visits members clockwise from the first point at or after `pos`,
  // wrapping once around the ring, and stops at the first member for which
  // `visit(member)` returns true. Returns that member, or -1 when none
  // accepted. A member may be offered more than once (once per point); the
  // callers' predicates are cheap and idempotent.
  template <class Visit>
  std::int64_t walk(std::uint64_t pos, Visit&& visit) const noexcept {
    if (points_.empty()) return -1;
    auto it = std::lower_bound(points_.begin(), points_.end(), pos,
                               [](const Point& p, std::uint64_t v) { return p.pos < v; });
    auto start = static_cast<std::size_t>(it - points_.begin());
    const std::size_t n = points_.size();
    for (std::size_t k = 0; k < n; ++k) {
      const std::uint32_t m = points_[(start + k) % n].member;
      if (visit(m)) return m;
    }
    return -1;
  }

 private:
  struct Point {
    std::uint64_t pos;
    std::uint32_t member;
  };
  std::vector<Point> points_;
};

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_HASH_RING_HPP_
