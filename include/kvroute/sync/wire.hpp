// -----------------------------------------------------------------------------
// File: kvroute/sync/wire.hpp
// -----------------------------------------------------------------------------
//
// `Batch`, what one replica sends the others in one message, and its binary
// encoding. A batch carries the replica's name (its `source`), a sequence
// number that grows by one per batch (receivers use it to see gaps and
// lag, never to order: changes are order-free), the sender's clock at
// encoding (for lag), its state changes (change.hpp), and optionally its
// load: requests and prefill tokens it has in flight per worker
// (shared_load.hpp).
//
// Layout, all integers little-endian or LEB128 varints:
//
//   "KVRS"  version:u8  source:str  seq:varint  sent_ns:u64
//   changes:varint  change*  loads:varint  load*  checksum:u64
//   change = tag:u8 (1 placement, 2 forget, 3 worker gone, 4 pin,
//            5 placement with text, 6 cut) then
//            placement/forget: model:str worker:str scheme:u8 first:varint
//                              keys:varint key:u64*
//            worker gone:      worker:str
//            pin:              model:str key:str worker:str stamp:u64 reset:u8
//            with text:        model:str worker:str scheme:u8 first:varint
//                              anchor:u64 text:str
//            cut:              model:str worker:str back:varint
//
// A placement with text and a cut have tags of their own, so that a fleet
// whose replicas send keys only reads the same bytes as before they
// existed.
//   load   = worker:str in_flight:varint tokens:varint
//   str    = length:varint bytes
//
// checksum is detail::checksum64 of every byte before it. decode() rejects
// anything else (another magic or version, a truncated or corrupt batch,
// trailing bytes, counts beyond the limits below) with an InvalidArgument
// status naming what is wrong and where, and returns nothing of it.
//
// Thread safety: pure functions.
//
// Example:
//
//   kvroute::sync::Batch b{.source = "router-a", .seq = 7};
//   b.changes.push_back(kvroute::sync::WorkerGone{"http://10.0.0.3:30000"});
//   std::string bytes = kvroute::sync::encode(b);
//   absl::StatusOr<kvroute::sync::Batch> back = kvroute::sync::decode(bytes);

#ifndef KVROUTE_SYNC_WIRE_HPP_
#define KVROUTE_SYNC_WIRE_HPP_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kvroute/config.hpp"
#include "kvroute/detail/sync/codec.hpp"
#include "kvroute/sync/change.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace sync {

inline constexpr std::uint8_t kWireVersion = 1;
inline constexpr std::string_view kWireMagic = "KVRS";

// Limits decode() enforces, so that a corrupt length cannot make it
// allocate without bound.
inline constexpr std::size_t kMaxNameBytes = 4096;      // source, model, URL
inline constexpr std::size_t kMaxBatchItems = 1 << 20;  // changes, loads
inline constexpr std::size_t kMaxKeysPerChange = 1 << 22;
inline constexpr std::size_t kMaxTextBytes = std::size_t{1} << 28;  // a placement's text

struct LoadEntry {
  std::string worker{};  // URL
  std::int64_t in_flight = 0;
  std::int64_t tokens = 0;
};

struct Batch {
  std::string source{};
  std::uint64_t seq = 0;
  std::int64_t sent_ns = 0;  // the sender's clock, nanoseconds
  std::vector<Change> changes{};
  std::vector<LoadEntry> loads{};
};

namespace wire_detail {
enum Tag : std::uint8_t {
  kPlacement = 1,
  kForget = 2,
  kWorkerGone = 3,
  kPin = 4,
  kPlacementText = 5,
  kCut = 6
};

template <class C>
void encode_keys(detail::Writer& w, const C& c) {
  w.str(c.model);
  w.str(c.worker);
  w.u8(static_cast<std::uint8_t>(c.scheme));
  w.varint(c.first);
  w.varint(c.keys.size());
  for (std::uint64_t k : c.keys) w.u64(k);
}

inline absl::Status bad(std::string_view what, std::size_t at) {
  return absl::InvalidArgumentError(
      absl::StrCat("sync batch: ", absl::string_view(what.data(), what.size()), " at byte ", at));
}

template <class C>
bool decode_keys(detail::Reader& r, C& c) {
  std::string_view model, worker;
  std::uint8_t scheme = 0;
  std::uint64_t first = 0, n = 0;
  if (!r.str(model, kMaxNameBytes) || !r.str(worker, kMaxNameBytes) || !r.u8(scheme) ||
      !r.count(first, UINT32_MAX) || !r.count(n, kMaxKeysPerChange) || n * 8 > r.remaining()) {
    return false;
  }
  c.model.assign(model);
  c.worker.assign(worker);
  c.scheme = static_cast<KeyScheme>(scheme);
  c.first = static_cast<std::uint32_t>(first);
  c.keys.resize(static_cast<std::size_t>(n));
  for (std::uint64_t& k : c.keys) r.u64(k);
  return true;
}
// Reads one change of kind `tag` into `out`; returns what is wrong with
// it, or an empty string.
inline std::string decode_change(detail::Reader& r, std::uint8_t tag, std::vector<Change>& out) {
  if (tag == kPlacement || tag == kForget) {
    Placement p;
    if (!decode_keys(r, p)) return "bad placement or forget";
    if (tag == kPlacement) {
      out.emplace_back(std::move(p));
    } else {
      out.emplace_back(
          Forget{std::move(p.model), std::move(p.worker), p.first, std::move(p.keys), p.scheme});
    }
  } else if (tag == kPlacementText) {
    std::string_view model, worker, text;
    std::uint8_t scheme = 0;
    std::uint64_t first = 0, anchor = 0;
    if (!r.str(model, kMaxNameBytes) || !r.str(worker, kMaxNameBytes) || !r.u8(scheme) ||
        !r.count(first, UINT32_MAX) || !r.u64(anchor) || !r.str(text, kMaxTextBytes) ||
        text.empty()) {
      return "bad placement with text";
    }
    out.emplace_back(Placement{.model = std::string(model),
                               .worker = std::string(worker),
                               .first = static_cast<std::uint32_t>(first),
                               .scheme = static_cast<KeyScheme>(scheme),
                               .text = std::string(text),
                               .anchor = anchor});
  } else if (tag == kCut) {
    std::string_view model, worker;
    std::uint64_t back = 0;
    if (!r.str(model, kMaxNameBytes) || !r.str(worker, kMaxNameBytes) || !r.varint(back)) {
      return "bad cut";
    }
    out.emplace_back(Cut{std::string(model), std::string(worker), back});
  } else if (tag == kWorkerGone) {
    std::string_view worker;
    if (!r.str(worker, kMaxNameBytes)) return "bad worker-gone change";
    out.emplace_back(WorkerGone{std::string(worker)});
  } else if (tag == kPin) {
    std::string_view model, key, worker;
    std::uint64_t stamp = 0;
    std::uint8_t reset = 0;
    if (!r.str(model, kMaxNameBytes) || !r.str(key, kMaxNameBytes) ||
        !r.str(worker, kMaxNameBytes) || !r.u64(stamp) || !r.u8(reset) || reset > 1) {
      return "bad pin";
    }
    out.emplace_back(Pin{std::string(model), std::string(key), std::string(worker),
                         static_cast<std::int64_t>(stamp), reset == 1});
  } else {
    return absl::StrCat("unknown change tag ", static_cast<int>(tag));
  }
  return {};
}

}  // namespace wire_detail

inline std::string encode(const Batch& b) {
  using namespace wire_detail;
  std::string out{};
  detail::Writer w(out);
  w.raw(kWireMagic);
  w.u8(kWireVersion);
  w.str(b.source);
  w.varint(b.seq);
  w.u64(static_cast<std::uint64_t>(b.sent_ns));
  w.varint(b.changes.size());
  for (const Change& c : b.changes) {
    std::visit(
        [&w](const auto& x) {
          using T = std::decay_t<decltype(x)>;
          if constexpr (std::is_same_v<T, Placement>) {
            if (x.text.empty()) {
              w.u8(kPlacement);
              encode_keys(w, x);
            } else {
              w.u8(kPlacementText);
              w.str(x.model);
              w.str(x.worker);
              w.u8(static_cast<std::uint8_t>(x.scheme));
              w.varint(x.first);
              w.u64(x.anchor);
              w.str(x.text);
            }
          } else if constexpr (std::is_same_v<T, Forget>) {
            w.u8(kForget);
            encode_keys(w, x);
          } else if constexpr (std::is_same_v<T, WorkerGone>) {
            w.u8(kWorkerGone);
            w.str(x.worker);
          } else if constexpr (std::is_same_v<T, Cut>) {
            w.u8(kCut);
            w.str(x.model);
            w.str(x.worker);
            w.varint(x.back);
          } else {
            static_assert(std::is_same_v<T, Pin>);
            w.u8(kPin);
            w.str(x.model);
            w.str(x.key);
            w.str(x.worker);
            w.u64(static_cast<std::uint64_t>(x.stamp));
            w.u8(x.reset ? 1 : 0);
          }
        },
        c);
  }
  w.varint(b.loads.size());
  for (const LoadEntry& l : b.loads) {
    w.str(l.worker);
    w.varint(static_cast<std::uint64_t>(std::max<std::int64_t>(l.in_flight, 0)));
    w.varint(static_cast<std::uint64_t>(std::max<std::int64_t>(l.tokens, 0)));
  }
  w.u64(detail::checksum64(out));
  return out;
}

inline absl::StatusOr<Batch> decode(std::string_view bytes) {
  using namespace wire_detail;
  if (bytes.size() < kWireMagic.size() + 1 + 8 ||
      bytes.substr(0, kWireMagic.size()) != kWireMagic) {
    return bad("not a kvroute sync batch (no \"KVRS\" magic)", 0);
  }
  if (static_cast<std::uint8_t>(bytes[kWireMagic.size()]) != kWireVersion) {
    return absl::InvalidArgumentError(
        absl::StrCat("sync batch: version ", static_cast<int>(bytes[kWireMagic.size()]),
                     ", this build reads version ", static_cast<int>(kWireVersion)));
  }
  const std::string_view body = bytes.substr(0, bytes.size() - 8);
  std::uint64_t sum = 0;
  detail::Reader(bytes.substr(bytes.size() - 8)).u64(sum);
  if (sum != detail::checksum64(body)) return bad("checksum mismatch (truncated or corrupt)", 0);

  detail::Reader r(body.substr(kWireMagic.size() + 1));
  auto at = [&] { return kWireMagic.size() + 1 + r.consumed(body.substr(kWireMagic.size() + 1)); };
  Batch b;
  std::string_view source;
  std::uint64_t sent = 0, n = 0;
  if (!r.str(source, kMaxNameBytes) || !r.varint(b.seq) || !r.u64(sent) ||
      !r.count(n, kMaxBatchItems)) {
    return bad("bad header", at());
  }
  b.source.assign(source);
  b.sent_ns = static_cast<std::int64_t>(sent);
  b.changes.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(n, r.remaining())));
  for (std::uint64_t i = 0; i < n; ++i) {
    std::uint8_t tag = 0;
    if (!r.u8(tag)) return bad("truncated change", at());
    if (std::string what = decode_change(r, tag, b.changes); !what.empty()) {
      return bad(what, at());
    }
  }
  if (!r.count(n, kMaxBatchItems)) return bad("bad load count", at());
  b.loads.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(n, r.remaining())));
  for (std::uint64_t i = 0; i < n; ++i) {
    std::string_view worker;
    std::uint64_t in_flight = 0, tokens = 0;
    if (!r.str(worker, kMaxNameBytes) || !r.count(in_flight, INT64_MAX) ||
        !r.count(tokens, INT64_MAX)) {
      return bad("bad load entry", at());
    }
    b.loads.push_back({std::string(worker), static_cast<std::int64_t>(in_flight),
                       static_cast<std::int64_t>(tokens)});
  }
  if (r.remaining() != 0) return bad("trailing bytes", at());
  return b;
}

}  // namespace sync
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_SYNC_WIRE_HPP_
