// Snapshots of the policies' state (include/kvroute/sync/snapshot.hpp): the
// tree policies' and manual's round trips, merging, LRU order, rejection of
// every truncated, corrupt or foreign snapshot without a change, and a
// snapshot taken while other threads insert.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "kvroute/detail/sync/codec.hpp"
#include "kvroute/kvroute.hpp"
#include "kvroute/sync/snapshot.hpp"
#include "kvroute/sync/wire.hpp"

namespace {

using kvroute::ApproxRadixTree;
using kvroute::CacheAware;
using kvroute::WorkerSet;
using kvroute::WorkerSnapshot;

std::string url(int i) { return "http://w" + std::to_string(i) + ":8000"; }

// Workers url(i) for each i of `order`, added in that order (so ids differ
// between two sets built from different orders).
std::shared_ptr<const WorkerSnapshot> add_workers(WorkerSet& ws, const std::vector<int>& order,
                                                  const std::string& model = "") {
  for (int i : order) REQUIRE(ws.add({.url = url(i), .model = model}).ok());
  return ws.snapshot();
}

kvroute::TenantId id_of(const WorkerSnapshot& s, int i) {
  const kvroute::Worker* w = s.find_url(url(i));
  REQUIRE(w != nullptr);
  return w->id.value;
}

// id_of for other threads (Catch's REQUIRE is for the test's own thread).
kvroute::TenantId id_of_noreq(const WorkerSnapshot& s, int i) {
  return s.find_url(url(i))->id.value;
}

// Chat-like texts: a few system prompts shared by many sessions, each
// session a few turns that extend each other.
std::vector<std::string> chat_texts(int sessions, int turns, int seed) {
  std::vector<std::string> prompts;
  for (int p = 0; p < 3; ++p) {
    prompts.push_back(
        "System prompt " + std::to_string(p) + ": you are a careful assistant. " +
        std::string(static_cast<std::size_t>(40 + 30 * p), static_cast<char>('a' + p)));
  }
  std::vector<std::string> out;
  for (int s = 0; s < sessions; ++s) {
    std::string t = prompts[static_cast<std::size_t>(s * 7 + seed) % prompts.size()];
    for (int k = 0; k < turns; ++k) {
      t += " user " + std::to_string(s) + " turn " + std::to_string(k) + " \xc3\xa9t\xc3\xa9 " +
           std::to_string((s * 31 + k * 17 + seed) % 1000);
      out.push_back(t);
    }
  }
  return out;
}

// What a text meets in a tree: matched units and symbols, and the URLs of
// the tenants holding the deepest matched node. Stamps nothing.
struct Seen {
  std::size_t matched = 0;
  std::size_t symbols = 0;
  std::set<std::string> holders;
  bool operator==(const Seen&) const = default;
};

Seen seen(ApproxRadixTree& t, const WorkerSnapshot& ws, const std::string& text) {
  std::vector<kvroute::TenantId> last;
  const kvroute::MatchResult m =
      t.visit_path(text, [&](const kvroute::RadixCandidates& c, std::size_t) noexcept {
        last.clear();
        for (kvroute::RadixCandidate x : c) last.push_back(x.tenant);
      });
  Seen s{m.matched, m.matched_symbols, {}};
  for (kvroute::TenantId id : last) {
    const kvroute::Worker* w = ws.find(kvroute::WorkerId{id});
    s.holders.insert(w != nullptr ? w->url : "?" + std::to_string(id));
  }
  return s;
}

// Texts to probe a tree with: the inserted ones, their prefixes and
// variations that leave the tree part way.
std::vector<std::string> probes(const std::vector<std::string>& texts) {
  std::vector<std::string> out;
  for (const std::string& t : texts) {
    out.push_back(t);
    out.push_back(t.substr(0, t.size() / 2));
    out.push_back(t.substr(0, t.size() * 3 / 4) + " something else");
    out.push_back(t + " and more");
  }
  out.push_back("");
  out.push_back("unrelated text");
  return out;
}

// A fingerprint of a tree: its sizes and what every probe meets.
struct Fingerprint {
  std::size_t nodes = 0, claims = 0, units = 0, tenants = 0;
  std::vector<Seen> seen_by_probe;
  bool operator==(const Fingerprint&) const = default;
};

Fingerprint fingerprint(ApproxRadixTree& t, const WorkerSnapshot& ws,
                        const std::vector<std::string>& probe_texts) {
  const kvroute::RadixTreeStats st = t.stats();
  Fingerprint f{st.nodes, st.claims, st.units, st.tenants, {}};
  for (const std::string& p : probe_texts) f.seen_by_probe.push_back(seen(t, ws, p));
  return f;
}

// Recomputes the checksum of a snapshot edited in place.
void reseal(std::string& bytes) {
  const std::string_view covered(bytes.data(), bytes.size() - 8);
  const std::uint64_t sum = kvroute::detail::checksum64(covered);
  for (int i = 0; i < 8; ++i) {
    bytes[bytes.size() - 8 + static_cast<std::size_t>(i)] =
        static_cast<char>((sum >> (8 * i)) & 0xFF);
  }
}

// Policy A with workers 0..3 and a tree of chat sessions spread over them.
struct Saved {
  WorkerSet ws;
  std::shared_ptr<const WorkerSnapshot> snap;
  CacheAware policy;
  std::vector<std::string> texts;
  ApproxRadixTree* tree = nullptr;

  explicit Saved(int sessions = 40, int turns = 4) {
    snap = add_workers(ws, {0, 1, 2, 3});
    policy.on_workers_changed(*snap);
    tree = policy.tree("");
    REQUIRE(tree != nullptr);
    texts = chat_texts(sessions, turns, 1);
    for (std::size_t i = 0; i < texts.size(); ++i) {
      const int w = static_cast<int>((i / static_cast<std::size_t>(turns)) % 4);
      REQUIRE(tree->insert(texts[i], id_of(*snap, w)).ok());
      if (i % 5 == 0) {  // some texts on a second worker too
        REQUIRE(tree->insert(texts[i], id_of(*snap, (w + 1) % 4)).ok());
      }
    }
  }
  std::string save() {
    absl::StatusOr<std::string> b = policy.save_state("", *snap);
    REQUIRE(b.ok());
    return *b;
  }
};

}  // namespace

TEST_CASE("snapshot: a tree round-trips into a policy whose workers have other ids", "[snapshot]") {
  Saved a;
  const std::string bytes = a.save();
  // Shared prefixes are stored once: far less than the texts' total size.
  std::size_t total = 0;
  for (const std::string& t : a.texts) total += t.size();
  CHECK(bytes.size() < total / 4);

  WorkerSet ws;
  auto snap = add_workers(ws, {3, 1, 0, 2});
  CacheAware b;
  b.on_workers_changed(*snap);
  REQUIRE(id_of(*snap, 0) != id_of(*a.snap, 0));
  absl::StatusOr<kvroute::sync::RestoreResult> r = b.restore_state(bytes, *snap);
  REQUIRE(r.ok());
  CHECK(r->model.empty());
  CHECK(r->skipped == 0);
  CHECK(r->unknown_workers == 0);
  CHECK(r->failed == 0);
  CHECK(r->restored > 0);
  ApproxRadixTree* bt = b.tree("");
  REQUIRE(bt != nullptr);
  CHECK(bt->check_invariants().empty());
  for (const std::string& p : probes(a.texts)) {
    INFO(p);
    CHECK(seen(*bt, *snap, p) == seen(*a.tree, *a.snap, p));
  }
  for (int w = 0; w < 4; ++w) {
    CHECK(bt->tenant_size(id_of(*snap, w)) == a.tree->tenant_size(id_of(*a.snap, w)));
  }
  // Saving the restored tree gives a snapshot that restores the same again.
  absl::StatusOr<std::string> again = b.save_state("", *snap);
  REQUIRE(again.ok());
  CHECK(again->size() <= bytes.size());
}

TEST_CASE("snapshot: restoring merges into a tree that already has content", "[snapshot]") {
  Saved a;
  const std::string bytes = a.save();
  WorkerSet ws;
  auto snap = add_workers(ws, {0, 1, 2, 3});
  CacheAware b;
  b.on_workers_changed(*snap);
  ApproxRadixTree* bt = b.tree("");
  const std::vector<std::string> own = chat_texts(10, 3, 5);
  for (const std::string& t : own) REQUIRE(bt->insert("own: " + t, id_of(*snap, 2)).ok());
  REQUIRE(b.restore_state(bytes, *snap).ok());
  for (const std::string& t : own) {
    const Seen s = seen(*bt, *snap, "own: " + t);
    CHECK(s.symbols == t.size() + 5);
    CHECK(s.holders.count(url(2)) == 1);
  }
  for (const std::string& t : a.texts) CHECK(seen(*bt, *snap, t) == seen(*a.tree, *a.snap, t));
  // Restoring twice changes nothing more.
  const Fingerprint before = fingerprint(*bt, *snap, probes(a.texts));
  REQUIRE(b.restore_state(bytes, *snap).ok());
  CHECK(fingerprint(*bt, *snap, probes(a.texts)) == before);
}

TEST_CASE("snapshot: a restored tree evicts in the saved LRU order", "[snapshot]") {
  WorkerSet ws;
  auto snap = add_workers(ws, {0, 1});
  // Exact recency (the default orders only to a step of 64 stamps).
  CacheAware a(CacheAware::Options{.recency_shift = 0});
  a.on_workers_changed(*snap);
  ApproxRadixTree* at = a.tree("");
  std::vector<std::string> texts;
  for (int i = 0; i < 30; ++i) {
    texts.push_back("shared head / " + std::to_string(i) + " / " + std::string(20, 'x'));
  }
  for (const std::string& t : texts) REQUIRE(at->insert(t, id_of(*snap, 0)).ok());
  for (const std::string& t : texts) REQUIRE(at->insert(t, id_of(*snap, 1)).ok());
  // Use them again in another order, worker by worker.
  for (std::size_t i = 0; i < texts.size(); i += 3) at->match_for_tenant(texts[i], id_of(*snap, 0));
  for (std::size_t i = texts.size(); i-- > 0;) at->match_for_tenant(texts[i], id_of(*snap, 1));
  absl::StatusOr<std::string> bytes = a.save_state("", *snap);
  REQUIRE(bytes.ok());

  WorkerSet ws2;
  auto snap2 = add_workers(ws2, {1, 0});
  CacheAware b(CacheAware::Options{.recency_shift = 0});
  b.on_workers_changed(*snap2);
  REQUIRE(b.restore_state(*bytes, *snap2).ok());
  ApproxRadixTree* bt = b.tree("");
  const auto kept = [&](ApproxRadixTree& t, const WorkerSnapshot& s, int w) {
    std::vector<int> out;
    for (std::size_t i = 0; i < texts.size(); ++i) {
      if (t.peek_for_tenant(texts[i], id_of(s, w)).matched_symbols == texts[i].size()) {
        out.push_back(static_cast<int>(i));
      }
    }
    return out;
  };
  for (std::size_t budget : {600u, 400u, 200u, 60u}) {
    at->evict(budget);
    bt->evict(budget);
    for (int w = 0; w < 2; ++w) {
      INFO("budget " << budget << " worker " << w);
      const std::vector<int> ka = kept(*at, *snap, w);
      CHECK(ka.size() < texts.size());
      CHECK(kept(*bt, *snap2, w) == ka);
    }
  }
}

TEST_CASE("snapshot: every truncation and every flipped byte is rejected, changing nothing",
          "[snapshot]") {
  Saved a(6, 3);
  const std::string bytes = a.save();
  REQUIRE(bytes.size() > 200);
  WorkerSet ws;
  auto snap = add_workers(ws, {0, 1, 2, 3});
  CacheAware b;
  b.on_workers_changed(*snap);
  ApproxRadixTree* bt = b.tree("");
  for (const std::string& t : chat_texts(5, 2, 9)) REQUIRE(bt->insert(t, id_of(*snap, 1)).ok());
  const std::vector<std::string> ps = probes(a.texts);
  const Fingerprint before = fingerprint(*bt, *snap, ps);
  const std::size_t models = b.models().size();

  for (std::size_t n = 0; n < bytes.size(); ++n) {
    absl::StatusOr<kvroute::sync::RestoreResult> r = b.restore_state(bytes.substr(0, n), *snap);
    INFO("truncated to " << n << ": " << r.status());
    REQUIRE(!r.ok());
    REQUIRE(r.status().code() == absl::StatusCode::kInvalidArgument);
  }
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    for (unsigned flip : {0x01u, 0x80u, 0xFFu}) {
      std::string bad = bytes;
      bad[i] = static_cast<char>(static_cast<unsigned>(static_cast<unsigned char>(bad[i])) ^ flip);
      absl::StatusOr<kvroute::sync::RestoreResult> r = b.restore_state(bad, *snap);
      INFO("byte " << i << " ^ " << int(flip) << ": " << r.status());
      REQUIRE(!r.ok());
      REQUIRE(r.status().message().find("kvroute snapshot") != std::string_view::npos);
    }
  }
  CHECK(b.models().size() == models);
  CHECK(fingerprint(*bt, *snap, ps) == before);
  // The intact snapshot still restores.
  CHECK(b.restore_state(bytes, *snap).ok());
  CHECK(fingerprint(*bt, *snap, ps) != before);
}

TEST_CASE("snapshot: foreign bytes, other versions and other policies are named", "[snapshot]") {
  Saved a(4, 2);
  const std::string bytes = a.save();
  WorkerSet ws;
  auto snap = add_workers(ws, {0, 1, 2, 3});
  CacheAware b;

  const auto message = [&](const std::string& in) {
    absl::StatusOr<kvroute::sync::RestoreResult> r = b.restore_state(in, *snap);
    REQUIRE(!r.ok());
    return std::string(r.status().message());
  };
  CHECK_THAT(message(""), Catch::Contains("truncated"));
  CHECK_THAT(message("KVRSNAP"), Catch::Contains("truncated"));
  CHECK_THAT(message("hello, this is not a snapshot at all"),
             Catch::Contains("not a kvroute snapshot"));
  kvroute::sync::Batch batch{.source = "r"};
  CHECK_THAT(message(kvroute::sync::encode(batch)), Catch::Contains("not a kvroute snapshot"));

  std::string v2 = bytes;
  v2[8] = 2;
  reseal(v2);
  absl::StatusOr<kvroute::sync::RestoreResult> r = b.restore_state(v2, *snap);
  CHECK(r.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(r.status().message()),
             Catch::Contains("format version 2") && Catch::Contains("reads version 1"));

  kvroute::LeastPrefill lp;
  r = lp.restore_state(bytes, *snap);
  CHECK(r.status().code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(r.status().message()),
             Catch::Contains("policy cache_aware") && Catch::Contains("least_prefill"));
  kvroute::Manual manual;
  r = manual.restore_state(bytes, *snap);
  CHECK(r.status().code() == absl::StatusCode::kFailedPrecondition);

  std::string kind9 = bytes;
  kind9[9] = 9;
  reseal(kind9);
  CHECK_THAT(message(kind9), Catch::Contains("unknown policy kind 9"));

  // Absurd counts behind a valid checksum: rejected by the bounds.
  std::string head = bytes.substr(0, 10);
  kvroute::detail::Writer w(head);
  w.str("");
  w.varint(std::uint64_t{1} << 40);  // workers
  head.append(8, '\0');
  reseal(head);
  CHECK_THAT(message(head), Catch::Contains("bad worker count"));
  std::string nodes = bytes.substr(0, 10);
  kvroute::detail::Writer w2(nodes);
  w2.str("");
  w2.varint(0);
  w2.varint(std::uint64_t{1} << 50);  // nodes
  nodes.append(8, '\0');
  reseal(nodes);
  CHECK_THAT(message(nodes), Catch::Contains("bad node count") && Catch::Contains("at byte 12"));
  // Trailing bytes behind a valid checksum.
  std::string trailing = bytes.substr(0, bytes.size() - 8) + "xx" + std::string(8, '\0');
  reseal(trailing);
  CHECK_THAT(message(trailing), Catch::Contains("2 bytes after the last node"));
}

TEST_CASE("snapshot: claims of workers unknown here are skipped and counted", "[snapshot]") {
  Saved a(8, 2);
  const std::string bytes = a.save();
  std::size_t claims_of_0_and_1 = 0;
  {
    WorkerSet ws;
    auto snap = add_workers(ws, {0, 1, 2, 3});
    CacheAware all;
    absl::StatusOr<kvroute::sync::RestoreResult> r = all.restore_state(bytes, *snap);
    REQUIRE(r.ok());
    WorkerSet ws2;
    auto snap2 = add_workers(ws2, {0, 1});
    CacheAware two;
    absl::StatusOr<kvroute::sync::RestoreResult> r2 = two.restore_state(bytes, *snap2);
    REQUIRE(r2.ok());
    CHECK(r2->unknown_workers == 2);
    CHECK(r2->skipped > 0);
    CHECK(r2->restored + r2->skipped == r->restored);
    claims_of_0_and_1 = r2->restored;
    ApproxRadixTree* t = two.tree("");
    for (const std::string& p : a.texts) {
      Seen want = seen(*a.tree, *a.snap, p);
      std::erase_if(want.holders, [](const std::string& u) { return u != url(0) && u != url(1); });
      const Seen got = seen(*t, *snap2, p);
      if (!want.holders.empty()) CHECK(got.holders == want.holders);
      CHECK(t->tenant_size(id_of(*snap2, 0)) == a.tree->tenant_size(id_of(*a.snap, 0)));
    }
  }
  CHECK(claims_of_0_and_1 > 0);
  // A worker of another model does not take the claims either.
  WorkerSet ws;
  REQUIRE(ws.add({.url = url(0), .model = "other"}).ok());
  REQUIRE(ws.add({.url = url(1), .model = "m"}).ok());
  std::string for_m = bytes;  // model "" -> "m": rebuild the header
  std::string head = for_m.substr(0, 10);
  kvroute::detail::Writer(head).str("m");
  for_m = head + for_m.substr(11);
  reseal(for_m);
  CacheAware m;
  absl::StatusOr<kvroute::sync::RestoreResult> r = m.restore_state(for_m, *ws.snapshot());
  REQUIRE(r.ok());
  CHECK(r->model == "m");
  CHECK(r->unknown_workers == 3);
  CHECK(r->restored > 0);
  CHECK(m.models() == std::vector<std::string>{"m"});
}

TEST_CASE("snapshot: saving an unknown model is NotFound", "[snapshot]") {
  Saved a(2, 2);
  CHECK(a.policy.save_state("nope", *a.snap).status().code() == absl::StatusCode::kNotFound);
}

namespace {

using kvroute::Manual;
using kvroute::sync::Pin;

// The candidates of (model, key) as URLs, oldest first; empty when absent.
std::vector<std::string> candidates(const Manual& m, const WorkerSnapshot& ws,
                                    const std::string& model, const std::string& key) {
  std::vector<std::string> out;
  if (auto e = m.entry(model, key)) {
    for (kvroute::WorkerId id : e->candidates) {
      const kvroute::Worker* w = ws.find(id);
      out.push_back(w != nullptr ? w->url : "?");
    }
  }
  return out;
}

void apply(Manual& m, const WorkerSnapshot& ws, const Pin& p) {
  REQUIRE(m.apply_change(p, ws) == kvroute::sync::Applied::kApplied);
}

// Pins of 20 keys over workers 0..3: some keys repinned, some reset.
std::vector<Pin> sample_pins(const std::string& model) {
  std::vector<Pin> pins;
  for (int k = 0; k < 20; ++k) {
    const std::string key = "session-" + std::to_string(k);
    pins.push_back({model, key, url(k % 4), 100 + k, true});
    if (k % 3 == 0) pins.push_back({model, key, url((k + 1) % 4), 200 + k, false});
    if (k % 5 == 0) pins.push_back({model, key, url((k + 2) % 4), 300 + k, false});
    if (k % 7 == 0) pins.push_back({model, key, url((k + 3) % 4), 400 + k, true});
  }
  return pins;
}

}  // namespace

TEST_CASE("snapshot: manual's table round-trips, with ages and epochs", "[snapshot]") {
  kvroute::ManualClock clock_a(std::chrono::seconds(1000));
  WorkerSet ws_a;
  auto snap_a = add_workers(ws_a, {0, 1, 2, 3});
  Manual a(Manual::Options{.clock = &clock_a});
  for (const Pin& p : sample_pins("m")) apply(a, *snap_a, p);
  apply(a, *snap_a, {"other", "k", url(1), 5, true});
  clock_a.advance(std::chrono::seconds(30));
  CHECK(a.models() == std::vector<std::string>{"m", "other"});
  absl::StatusOr<std::string> bytes = a.save_state("m", *snap_a);
  REQUIRE(bytes.ok());

  kvroute::ManualClock clock_b(std::chrono::seconds(5000));
  WorkerSet ws_b;
  auto snap_b = add_workers(ws_b, {2, 0, 3, 1});
  Manual b(Manual::Options{.clock = &clock_b});
  absl::StatusOr<kvroute::sync::RestoreResult> r = b.restore_state(*bytes, *snap_b);
  REQUIRE(r.ok());
  CHECK(r->model == "m");
  CHECK(r->restored == 20);
  CHECK(r->skipped == 0);
  CHECK(b.size() == 20);
  CHECK(!b.entry("other", "k").has_value());
  for (int k = 0; k < 20; ++k) {
    const std::string key = "session-" + std::to_string(k);
    INFO(key);
    CHECK(candidates(b, *snap_b, "m", key) == candidates(a, *snap_a, "m", key));
    // Last used 30 s before the save: 30 s before now on b.
    CHECK(b.entry("m", key)->last_access == std::chrono::seconds(5000 - 30));
  }
  // Idempotent.
  REQUIRE(b.restore_state(*bytes, *snap_b).ok());
  CHECK(b.size() == 20);
  for (int k = 0; k < 20; ++k) {
    const std::string key = "session-" + std::to_string(k);
    CHECK(candidates(b, *snap_b, "m", key) == candidates(a, *snap_a, "m", key));
  }
}

TEST_CASE("snapshot: a manual restore agrees with the replicas' pins", "[snapshot]") {
  WorkerSet ws;
  auto snap = add_workers(ws, {0, 1, 2, 3});
  const std::vector<Pin> pins = sample_pins("m");
  // a holds the even pins, b the odd ones, c all of them.
  Manual a, b, c;
  for (std::size_t i = 0; i < pins.size(); ++i) {
    apply(i % 2 == 0 ? a : b, *snap, pins[i]);
    apply(c, *snap, pins[i]);
  }
  // The reset of key 0 at stamp 100 was displaced on a by later pins: only
  // the list's epoch says that b's older candidates no longer count.
  apply(b, *snap, {"m", "session-0", url(3), 50, true});
  absl::StatusOr<std::string> bytes = a.save_state("m", *snap);
  REQUIRE(bytes.ok());
  REQUIRE(b.restore_state(*bytes, *snap).ok());
  apply(c, *snap, {"m", "session-0", url(3), 50, true});
  for (int k = 0; k < 20; ++k) {
    const std::string key = "session-" + std::to_string(k);
    INFO(key);
    CHECK(candidates(b, *snap, "m", key) == candidates(c, *snap, "m", key));
  }
}

TEST_CASE("snapshot: manual skips unknown workers and rejects bad snapshots unchanged",
          "[snapshot]") {
  WorkerSet ws;
  auto snap = add_workers(ws, {0, 1, 2, 3});
  Manual a;
  for (const Pin& p : sample_pins("m")) apply(a, *snap, p);
  absl::StatusOr<std::string> bytes = a.save_state("m", *snap);
  REQUIRE(bytes.ok());

  WorkerSet ws2;
  auto snap2 = add_workers(ws2, {0});
  Manual b;
  absl::StatusOr<kvroute::sync::RestoreResult> r = b.restore_state(*bytes, *snap2);
  REQUIRE(r.ok());
  CHECK(r->unknown_workers == 3);
  CHECK(r->skipped > 0);
  CHECK(r->restored == b.size());
  for (int k = 0; k < 20; ++k) {
    for (const std::string& u : candidates(b, *snap2, "m", "session-" + std::to_string(k))) {
      CHECK(u == url(0));
    }
  }

  const std::size_t size = b.size();
  for (std::size_t n = 0; n < bytes->size(); ++n) {
    REQUIRE(!b.restore_state(bytes->substr(0, n), *snap2).ok());
  }
  for (std::size_t i = 0; i < bytes->size(); ++i) {
    std::string bad = *bytes;
    bad[i] = static_cast<char>(bad[i] ^ 0x10);
    INFO("byte " << i);
    REQUIRE(!b.restore_state(bad, *snap2).ok());
  }
  CHECK(b.size() == size);
  CacheAware ca;
  CHECK(ca.restore_state(*bytes, *snap).status().code() == absl::StatusCode::kFailedPrecondition);
}

TEST_CASE("snapshot: AnyPolicy forwards snapshots, and says which policies have none",
          "[snapshot]") {
  WorkerSet ws;
  auto snap = add_workers(ws, {0, 1, 2});
  kvroute::PolicyConfig cfg;
  cfg.policy = kvroute::PolicyKind::kLeastPrefill;
  absl::StatusOr<kvroute::AnyPolicy> a = kvroute::make_policy(cfg);
  absl::StatusOr<kvroute::AnyPolicy> b = kvroute::make_policy(cfg);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  a->on_workers_changed(*snap);
  const std::vector<std::string> texts = chat_texts(6, 3, 2);
  ApproxRadixTree* at = a->get<kvroute::LeastPrefill>()->tree("");
  for (std::size_t i = 0; i < texts.size(); ++i) {
    REQUIRE(at->insert(texts[i], id_of(*snap, static_cast<int>(i % 3))).ok());
  }
  CHECK(a->models() == std::vector<std::string>{""});
  absl::StatusOr<std::string> bytes = a->save_state("", *snap);
  REQUIRE(bytes.ok());
  absl::StatusOr<kvroute::sync::RestoreResult> r = b->restore_state(*bytes, *snap);
  REQUIRE(r.ok());
  ApproxRadixTree* bt = b->get<kvroute::LeastPrefill>()->tree("");
  REQUIRE(bt != nullptr);
  for (const std::string& p : probes(texts)) CHECK(seen(*bt, *snap, p) == seen(*at, *snap, p));

  cfg.policy = kvroute::PolicyKind::kRoundRobin;
  absl::StatusOr<kvroute::AnyPolicy> rr = kvroute::make_policy(cfg);
  REQUIRE(rr.ok());
  CHECK(rr->models().empty());
  CHECK(rr->save_state("", *snap).status().code() == absl::StatusCode::kUnimplemented);
  r = rr->restore_state(*bytes, *snap);
  CHECK(r.status().code() == absl::StatusCode::kUnimplemented);
  CHECK_THAT(std::string(r.status().message()), Catch::Contains("round_robin"));

  cfg.policy = kvroute::PolicyKind::kManual;
  absl::StatusOr<kvroute::AnyPolicy> m = kvroute::make_policy(cfg);
  REQUIRE(m.ok());
  REQUIRE(m->apply_change(kvroute::sync::Pin{"m", "k", url(1), 7, true}, *snap) ==
          kvroute::sync::Applied::kApplied);
  CHECK(m->models() == std::vector<std::string>{"m"});
  absl::StatusOr<std::string> mb = m->save_state("m", *snap);
  REQUIRE(mb.ok());
  absl::StatusOr<kvroute::AnyPolicy> m2 = kvroute::make_policy(cfg);
  REQUIRE(m2.ok());
  r = m2->restore_state(*mb, *snap);
  REQUIRE(r.ok());
  CHECK(r->restored == 1);
}

namespace {

// Every node path of `t` (the fragments from the root down), by export.
std::vector<std::string> node_paths(const ApproxRadixTree& t) {
  std::vector<std::string> paths;
  std::vector<std::string> at_depth{""};
  const kvroute::ExportStatus st = t.export_nodes(
      [&](std::size_t depth, std::string_view frag, const kvroute::RadixCandidates&) noexcept {
        at_depth.resize(depth + 1);
        at_depth[depth] = (depth == 0 ? std::string() : at_depth[depth - 1]) + std::string(frag);
        paths.push_back(at_depth[depth]);
        return true;
      });
  REQUIRE(st == kvroute::ExportStatus::kDone);
  return paths;
}

}  // namespace

TEST_CASE("snapshot: a snapshot taken while other threads insert and evict is valid",
          "[snapshot][concurrency]") {
  WorkerSet ws;
  auto snap = add_workers(ws, {0, 1, 2, 3});
  CacheAware a(CacheAware::Options{.recency_shift = 0});
  a.on_workers_changed(*snap);
  ApproxRadixTree* at = a.tree("");
  std::vector<std::string> texts = chat_texts(60, 5, 3);
  const std::vector<std::string> more = chat_texts(60, 5, 4);
  texts.insert(texts.end(), more.begin(), more.end());
  std::vector<std::string> sorted = texts;
  std::sort(sorted.begin(), sorted.end());

  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  for (unsigned w = 0; w < 2; ++w) {
    writers.emplace_back([&, w] {
      for (std::size_t i = w; !stop.load(std::memory_order_relaxed); i += 7) {
        const std::string& t = texts[i % texts.size()];
        (void)at->insert(t, id_of_noreq(*snap, static_cast<int>((i + w) % 4)));
      }
    });
  }
  writers.emplace_back([&] {
    while (!stop.load(std::memory_order_relaxed)) {
      at->evict(3000);
      std::this_thread::yield();
    }
  });

  for (int round = 0; round < 20; ++round) {
    absl::StatusOr<std::string> bytes = a.save_state("", *snap);
    REQUIRE(bytes.ok());
    CacheAware b(CacheAware::Options{.recency_shift = 0});
    absl::StatusOr<kvroute::sync::RestoreResult> r = b.restore_state(*bytes, *snap);
    REQUIRE(r.ok());
    CHECK(r->failed == 0);
    ApproxRadixTree* bt = b.tree("");
    REQUIRE(bt != nullptr);
    REQUIRE(bt->check_invariants().empty());
    // Every path of the copy was a prefix of an inserted text.
    for (const std::string& p : node_paths(*bt)) {
      auto it = std::lower_bound(sorted.begin(), sorted.end(), p);
      INFO(p);
      REQUIRE((it != sorted.end() && it->compare(0, p.size(), p) == 0));
    }
  }
  stop = true;
  for (std::thread& t : writers) t.join();
}

TEST_CASE("snapshot: export_nodes visits token trees in pre-order and stops when asked",
          "[snapshot]") {
  kvroute::TokenRadixTree t;
  const std::vector<std::uint32_t> a{1, 2, 3, 4}, b{1, 2, 9}, c{7};
  REQUIRE(t.insert(a, 0).ok());
  REQUIRE(t.insert(b, 1).ok());
  REQUIRE(t.insert(c, 0).ok());
  std::vector<std::pair<std::size_t, std::vector<std::uint32_t>>> seen_nodes;
  std::vector<std::size_t> holders;
  auto visit = [&](std::size_t depth, std::span<const std::uint32_t> frag,
                   const kvroute::RadixCandidates& h) noexcept {
    seen_nodes.emplace_back(depth, std::vector<std::uint32_t>(frag.begin(), frag.end()));
    holders.push_back(h.size());
    return true;
  };
  REQUIRE(t.export_nodes(visit) == kvroute::ExportStatus::kDone);
  using V = std::vector<std::uint32_t>;
  const std::vector<std::pair<std::size_t, V>> want{
      {0, V{}}, {1, V{1, 2}}, {2, V{3, 4}}, {2, V{9}}, {1, V{7}}};
  CHECK(seen_nodes == want);
  CHECK(holders == std::vector<std::size_t>{2, 2, 1, 1, 1});
  int calls = 0;
  CHECK(t.export_nodes([&](std::size_t, std::span<const std::uint32_t>,
                           const kvroute::RadixCandidates&) noexcept { return ++calls < 3; }) ==
        kvroute::ExportStatus::kStopped);
  CHECK(calls == 3);
}

TEST_CASE("snapshot: resealed corruptions are rejected or restore into a valid tree",
          "[snapshot]") {
  // Changes behind a valid checksum reach the structural checks: each is
  // an InvalidArgument that changes nothing, or a well-formed snapshot.
  Saved a(6, 3);
  const std::string bytes = a.save();
  WorkerSet ws;
  auto snap = add_workers(ws, {0, 1, 2, 3});
  std::mt19937_64 rng(17);
  int accepted = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string bad = bytes.substr(0, bytes.size() - 8);
    const std::size_t at = 10 + rng() % (bad.size() - 10);  // past magic, version, kind
    switch (rng() % 4) {
      case 0:
        bad[at] = static_cast<char>(rng());
        break;
      case 1:
        bad.erase(at, 1 + rng() % 4);
        break;
      case 2:
        bad.insert(at, 1 + rng() % 4, static_cast<char>(rng()));
        break;
      default:
        bad[at] = static_cast<char>(0x80 | rng());  // a longer varint
        break;
    }
    bad.append(8, '\0');
    reseal(bad);
    CacheAware b;
    b.on_workers_changed(*snap);
    ApproxRadixTree* bt = b.tree("");
    REQUIRE(bt->insert("kept", id_of(*snap, 0)).ok());
    const kvroute::RadixTreeStats before = bt->stats();
    absl::StatusOr<kvroute::sync::RestoreResult> r = b.restore_state(bad, *snap);
    INFO("round " << round << ": " << r.status());
    if (r.ok()) {
      ++accepted;
      ApproxRadixTree* t = b.tree(r->model);
      REQUIRE(t != nullptr);
      REQUIRE(t->check_invariants().empty());
    } else {
      REQUIRE(r.status().code() == absl::StatusCode::kInvalidArgument);
      REQUIRE(b.models() == std::vector<std::string>{""});
      REQUIRE(bt->stats().nodes == before.nodes);
      REQUIRE(bt->stats().claims == before.claims);
    }
  }
  // Changing a character of a fragment or a recency keeps a snapshot well
  // formed: some of the inputs must have been accepted.
  CHECK(accepted > 0);
}
