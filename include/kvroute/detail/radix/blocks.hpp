// -----------------------------------------------------------------------------
// File: kvroute/detail/radix/blocks.hpp
// -----------------------------------------------------------------------------
//
// Not API. `NodeBlocks<Symbol>`: the room a node has for children and
// tenants. Up to RadixNode::kInlineChildren children and one tenant live
// in the node itself (most nodes: a fork has two children, and most nodes
// have one tenant); beyond that, a block of capacity doubled as needed. A
// block that a larger one replaces is retired, not freed: an optimistic
// reader may still be reading it (TreeMemory).
//
// Thread safety: every function requires the node held exclusively.

#ifndef KVROUTE_DETAIL_RADIX_BLOCKS_HPP_
#define KVROUTE_DETAIL_RADIX_BLOCKS_HPP_

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kvroute/config.hpp"
#include "kvroute/detail/radix/memory.hpp"
#include "kvroute/detail/radix/node.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

template <class Symbol>
struct NodeBlocks {
  using Node = RadixNode<Symbol>;
  using Key = typename Node::Key;
  using Memory = TreeMemory<Symbol>;

  // Makes room for `need` children: in the node up to
  // Node::kInlineChildren, then in a block. False when out of memory.
  static bool reserve_children(Memory& m, Node& n, std::uint32_t need) noexcept {
    if (n.cap_child() >= need) return true;
    const std::uint32_t cap = grown(n.cap_child(), need);
    if (cap <= Node::kInlineChildren) {  // the inline arrays stay where they are
      n.set_cap_child(cap);
      return true;
    }
    void* b = m.alloc(Node::child_block_bytes(cap));
    if (b == nullptr) return false;
    Node tmp;  // only to compute the new block's layout
    tmp.children.block = b;
    tmp.set_cap_child(cap);
    if (n.nchild > 0) {
      std::memcpy(tmp.keys(), n.keys(), n.nchild * sizeof(Key));
      std::memcpy(tmp.kids(), n.kids(), n.nchild * sizeof(std::uint32_t));
    }
    retire_children(m, n);
    n.children.block = b;
    n.set_cap_child(cap);
    return true;
  }

  // Makes room for `need` tenants: the first in the node, from the second
  // on a block. False when out of memory.
  static bool reserve_tenants(Memory& m, Node& n, std::uint32_t need) noexcept {
    if (n.cap_tenant() >= need) return true;
    if (need <= 1) {
      n.set_cap_tenant(1);
      return true;
    }
    const std::uint32_t cap = grown(std::max<std::uint32_t>(n.cap_tenant(), 2), need);
    void* b = m.alloc(Node::tenant_block_bytes(cap));
    if (b == nullptr) return false;
    auto* ids = static_cast<std::uint32_t*>(b);
    if (n.ntenant > 0) {
      std::memcpy(ids, n.tenant_ids(), n.ntenant * sizeof(std::uint32_t));
      std::memcpy(ids + cap, n.claims(), n.ntenant * sizeof(std::uint32_t));
    }
    retire_tenants(m, n);
    n.tenants.block = b;
    n.set_cap_tenant(cap);
    return true;
  }

  // n's child block and tenant block, if it has them: retired (readers may
  // hold them) or, for a tree no reader uses any more, freed.
  static void retire_children(Memory& m, Node& n) noexcept {
    if (!n.children_inline()) m.retire(n.children.block, Node::child_block_bytes(n.cap_child()));
  }
  static void retire_tenants(Memory& m, Node& n) noexcept {
    if (!n.tenants_inline()) m.retire(n.tenants.block, Node::tenant_block_bytes(n.cap_tenant()));
  }
  static void free_children(Memory& m, Node& n) noexcept {
    if (!n.children_inline()) m.dealloc(n.children.block, Node::child_block_bytes(n.cap_child()));
  }
  static void free_tenants(Memory& m, Node& n) noexcept {
    if (!n.tenants_inline()) m.dealloc(n.tenants.block, Node::tenant_block_bytes(n.cap_tenant()));
  }

 private:
  static std::uint32_t grown(std::uint32_t cap, std::uint32_t need) noexcept {
    std::uint32_t c = cap == 0 ? 1 : cap;
    while (c < need) c *= 2;
    return c;
  }
};

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_RADIX_BLOCKS_HPP_
