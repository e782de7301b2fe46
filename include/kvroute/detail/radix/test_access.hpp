// -----------------------------------------------------------------------------
// File: kvroute/detail/radix/test_access.hpp
// -----------------------------------------------------------------------------
//
// Not API; part of kvroute/radix_tree.hpp. What kvroute's own tests reach
// inside a tree: the hook every optimistic descent calls between its
// lock-free walk and the lock it ends with (so that a test can change the
// tree in that window from another thread), and a node's lock (so that a
// test can move its version on). Both exist in every build, so that a
// test program and the library agree on the class.

#ifndef KVROUTE_DETAIL_RADIX_TEST_ACCESS_HPP_
#define KVROUTE_DETAIL_RADIX_TEST_ACCESS_HPP_

#include <cstddef>

#include "kvroute/config.hpp"
#include "kvroute/detail/radix/rw_lock.hpp"
#include "kvroute/radix_tree.hpp"  // the class this completes

KVROUTE_NAMESPACE_BEGIN
namespace detail {

struct RadixTestAccess {
  // Calls f(arg) in every optimistic descent's window (null: none), on the
  // descending thread, which holds no node lock then.
  template <class Tree>
  static void set_before_descent_lock(Tree& tree, void (*f)(void*), void* arg) noexcept {
    tree.before_descent_lock_arg_ = arg;
    tree.before_descent_lock_ = f;
  }

  // The lock of the node where `seq` ends (as debug_node finds it), or null.
  // Requires quiescence while it walks.
  template <class Tree>
  static RwLock* node_lock(Tree& tree, typename Tree::sequence_type seq) noexcept {
    using Traits = typename Tree::Traits;
    auto* x = &tree.root_;
    std::size_t pos = 0;
    const std::size_t n = seq.size();
    while (pos < n) {
      const std::uint32_t ci = x->find_child(Traits::key(seq.data() + pos, n - pos));
      if (ci == kNilIndex) return nullptr;
      auto* c = tree.node(ci);
      const std::size_t k = Tree::common_units(*c, seq.data() + pos, n - pos);
      x = c;
      pos += k;
      if (k < c->len) break;
    }
    return pos == n ? &x->lock : nullptr;
  }
};

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_RADIX_TEST_ACCESS_HPP_
