// Router replicas that share their tree policies' state: placements made on
// one replica reach the others' trees, through a fake transport that
// delays, reorders, duplicates and drops (then resends) messages. Once
// delivery quiesces every replica gives the same match for every text, to
// within the bound sync/remote_index.hpp states: the longest match rounded
// down to whole chunks, and the workers that hold that many chunks.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "kvroute/kvroute.hpp"
#include "kvroute/sync/outbox.hpp"
#include "kvroute/sync/wire.hpp"
#include "support/all_policies.hpp"

namespace {

using kvroute::sync::kChunkBytes;

const std::vector<std::string> kUrls = {"http://w0:8000", "http://w1:8000", "http://w2:8000",
                                        "http://w3:8000"};

template <class P>
typename P::Options replica_options(std::uint64_t seed, double text_share) {
  typename P::Options o;
  o.seed = seed;
  o.sync_text_share = text_share;
  return o;
}

// One router replica: its own workers (added in its own order, so ids
// differ between replicas), policy, load and outbox.
template <class P>
struct Replica {
  std::string name;
  kvroute::Router<P> router;
  kvroute::sync::Outbox outbox;
  std::uint64_t seq = 0;
  // The transport hands the policy what it drained (else the policy keeps
  // its sent texts itself).
  bool note_sent = true;

  Replica(std::string n, std::vector<std::string> urls, std::uint64_t seed, double text_share = 0)
      : name(std::move(n)), router(replica_options<P>(seed, text_share)) {
    for (const std::string& u : urls) REQUIRE(router.add_worker({.url = u}).ok());
    router.policy().set_state_sink(&outbox);
  }

  std::string route(const std::string& text) {
    auto s = router.select({.text = text});
    REQUIRE(s);
    return s.worker().url;
  }

  // What it emitted since the last call, as bytes on the wire.
  std::string take_message() {
    kvroute::sync::Batch b{.source = name, .seq = ++seq};
    outbox.drain(b.changes);
    if (note_sent) router.policy().note_sent(b.changes);
    return kvroute::sync::encode(b);
  }

  void deliver(const std::string& bytes) {
    auto b = kvroute::sync::decode(bytes);
    REQUIRE(b.ok());
    const auto snap = router.workers().snapshot();
    for (const auto& c : b->changes) {
      CHECK(router.policy().apply_change(c, *snap) == kvroute::sync::Applied::kApplied);
    }
  }

  // The match as the bound states it: whole chunks of the longest match,
  // and the URLs of the workers that hold that many (none below a chunk).
  std::pair<std::size_t, std::set<std::string>> match(const std::string& text) {
    router.policy().fold_remote({.text = text});
    std::map<kvroute::TenantId, std::size_t> bytes;
    router.policy().tree("")->visit_path(
        text, [&](const kvroute::RadixCandidates& holders, std::size_t matched) noexcept {
          for (kvroute::RadixCandidate h : holders) bytes[h.tenant] = matched;
        });
    std::size_t best = 0;
    for (auto [t, n] : bytes) best = std::max(best, n / kChunkBytes);
    std::set<std::string> who;
    const auto snap = router.workers().snapshot();
    for (auto [t, n] : bytes) {
      if (best > 0 && n / kChunkBytes == best) who.insert(snap->find({t})->url);
    }
    return {best, who};
  }
};

// Sessions of growing texts over a few shared system prompts, ASCII (so
// that code points and bytes agree).
class Workload {
 public:
  explicit Workload(std::uint64_t seed) : rng_(seed) {
    for (std::size_t i = 0; i < 3; ++i) prompts_.push_back(random_text(200 + 150 * i));
  }
  // The next request's text: a session's next turn, or a new session.
  const std::string& next() {
    if (sessions_.empty() || coin(0.25)) {
      sessions_.push_back(prompts_[rng_() % prompts_.size()] + random_text(rng_() % 300));
    } else {
      std::string& s = sessions_[rng_() % sessions_.size()];
      s += random_text(20 + rng_() % 400);
    }
    texts_.push_back(coin(0.5) ? sessions_.back() : sessions_[rng_() % sessions_.size()]);
    return texts_.back();
  }
  const std::vector<std::string>& texts() const { return texts_; }
  bool coin(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }
  std::mt19937_64& rng() { return rng_; }

 private:
  std::string random_text(std::size_t n) {
    std::string s(n, ' ');
    for (char& c : s) c = static_cast<char>('a' + rng_() % 26);
    return s;
  }
  std::mt19937_64 rng_;
  std::vector<std::string> prompts_;
  std::vector<std::string> sessions_;
  std::vector<std::string> texts_;
};

// Delivers each message to every other replica after a random delay, in
// any order; some deliveries are duplicated, some dropped and sent again
// later (at-least-once, as a stream read again after a reconnect is).
template <class P>
class FakeTransport {
 public:
  FakeTransport(std::vector<std::unique_ptr<Replica<P>>>& replicas, Workload& w)
      : replicas_(replicas), w_(w) {}

  void send(std::size_t from, std::string bytes, int now) {
    for (std::size_t to = 0; to < replicas_.size(); ++to) {
      if (to == from) continue;
      schedule(to, bytes, now);
      if (w_.coin(0.2)) schedule(to, bytes, now);  // duplicate
    }
  }
  // Delivers what is due by `now` (everything when now < 0).
  void tick(int now) {
    std::vector<Pending> due;
    for (auto it = pending_.begin(); it != pending_.end();) {
      if (now < 0 || it->at <= now) {
        due.push_back(std::move(*it));
        it = pending_.erase(it);
      } else {
        ++it;
      }
    }
    std::shuffle(due.begin(), due.end(), w_.rng());
    for (Pending& p : due) {
      if (now >= 0 && w_.coin(0.15)) {  // dropped: the sender tries again
        schedule(p.to, std::move(p.bytes), now);
        continue;
      }
      replicas_[p.to]->deliver(p.bytes);
    }
  }
  bool idle() const { return pending_.empty(); }

 private:
  struct Pending {
    int at;
    std::size_t to;
    std::string bytes;
  };
  void schedule(std::size_t to, std::string bytes, int now) {
    pending_.push_back({now + 1 + static_cast<int>(w_.rng()() % 20), to, std::move(bytes)});
  }
  std::vector<std::unique_ptr<Replica<P>>>& replicas_;
  Workload& w_;
  std::vector<Pending> pending_;
};

// With a text share, some placements carry their text (applied whole, or
// as keys when the prefix they extend has not arrived yet).
template <class P>
void check_replicas_converge(std::uint64_t seed, double text_share = 0) {
  Workload w(seed);
  std::vector<std::unique_ptr<Replica<P>>> replicas;
  for (std::size_t i = 0; i < 3; ++i) {
    std::vector<std::string> urls = kUrls;
    std::shuffle(urls.begin(), urls.end(), w.rng());
    replicas.push_back(
        std::make_unique<Replica<P>>("r" + std::to_string(i), urls, seed + i, text_share));
  }
  FakeTransport<P> net(replicas, w);
  for (int step = 0; step < 400; ++step) {
    const std::size_t at = static_cast<std::size_t>(step) % replicas.size();  // round-robin front
    replicas[at]->route(w.next());
    net.send(at, replicas[at]->take_message(), step);
    net.tick(step);
  }
  while (!net.idle()) net.tick(-1);

  // Twice: a fold for one text may credit a prefix another text shares.
  for (int round = 0; round < 2; ++round) {
    for (const std::string& t : w.texts()) {
      for (auto& r : replicas) r->match(t);
    }
  }
  std::size_t shared = 0;
  for (const std::string& t : w.texts()) {
    const auto first = replicas[0]->match(t);
    shared += first.first > 0;
    for (std::size_t i = 1; i < replicas.size(); ++i) {
      INFO("text of " << t.size() << " bytes, replica " << i);
      const auto other = replicas[i]->match(t);
      CHECK(other.first == first.first);
      CHECK(other.second == first.second);
    }
  }
  CHECK(shared > w.texts().size() / 2);  // the check compared real matches
  if (text_share > 0) {
    for (auto& r : replicas) CHECK(r->router.policy().texts_applied() > 0);
  }
}

// Three replicas select on their own threads while one transport thread
// delivers their changes; once all is delivered they agree.
void check_concurrent_replicas(double text_share) {
  Workload w(7);
  std::vector<std::unique_ptr<Replica<kvroute::CacheAware>>> replicas;
  for (std::size_t i = 0; i < 3; ++i) {
    replicas.push_back(std::make_unique<Replica<kvroute::CacheAware>>("r" + std::to_string(i),
                                                                      kUrls, 10 + i, text_share));
  }
  std::vector<std::vector<std::string>> work(replicas.size());
  for (int i = 0; i < 450; ++i) work[static_cast<std::size_t>(i) % work.size()].push_back(w.next());

  std::atomic<int> running{static_cast<int>(replicas.size())};
  std::vector<std::thread> threads;
  for (std::size_t r = 0; r < replicas.size(); ++r) {
    threads.emplace_back([&, r] {
      for (const std::string& t : work[r]) (void)replicas[r]->router.select({.text = t});
      running.fetch_sub(1);
    });
  }
  // The transport: drains each outbox and delivers to the others, while
  // the selections run.
  std::vector<std::vector<kvroute::sync::Change>> mail(replicas.size());
  auto pump = [&] {
    for (std::size_t from = 0; from < replicas.size(); ++from) {
      std::vector<kvroute::sync::Change> changes;
      replicas[from]->outbox.drain(changes);
      replicas[from]->router.policy().note_sent(changes);
      for (std::size_t to = 0; to < replicas.size(); ++to) {
        if (to == from) continue;
        const auto snap = replicas[to]->router.workers().snapshot();
        for (const auto& c : changes) (void)replicas[to]->router.policy().apply_change(c, *snap);
      }
    }
  };
  while (running.load() > 0) pump();
  for (auto& t : threads) t.join();
  pump();
  for (int round = 0; round < 2; ++round) {
    for (const std::string& t : w.texts()) {
      for (auto& r : replicas) r->match(t);
    }
  }
  for (const std::string& t : w.texts()) {
    const auto first = replicas[0]->match(t);
    for (std::size_t i = 1; i < replicas.size(); ++i) CHECK(replicas[i]->match(t) == first);
  }
}

}  // namespace

TEST_CASE("replicas: a placement on one replica reaches the others", "[sync]") {
  Replica<kvroute::CacheAware> a("a", kUrls, 1);
  Replica<kvroute::CacheAware> b("b", {kUrls.rbegin(), kUrls.rend()}, 2);
  const std::string chat = std::string(1000, 's') + " user: hello";
  const std::string to = a.route(chat);
  b.deliver(a.take_message());
  CHECK(b.take_message().size() < 64);  // applying never emits

  // Turn 2 of the chat comes to b: it routes where a sent turn 1.
  auto s = b.router.select({.text = chat + " assistant: hi. user: and then?"});
  REQUIRE(s);
  CHECK(s.worker().url == to);
  CHECK(s.decision.branch == kvroute::Branch::kCacheHit);
  // It claims turn 1 to within one chunk.
  CHECK(s.decision.claimed >= chat.size() / kChunkBytes * kChunkBytes);
}

TEST_CASE("replicas: bytes on the wire are a fraction of the text", "[sync]") {
  Replica<kvroute::CacheAware> a("a", kUrls, 1);
  std::string chat(4000, 'p');
  std::size_t text_bytes = 0, wire_bytes = 0;
  for (int turn = 0; turn < 20; ++turn) {
    chat += " user turn " + std::to_string(turn) + std::string(300, 'u');
    a.route(chat);
    text_bytes += chat.size();
    wire_bytes += a.take_message().size();
  }
  // Only the new chunks travel, 8 bytes per 128.
  CHECK(wire_bytes * 8 < text_bytes);
}

TEST_CASE("replicas: a text its worker already held emits nothing", "[sync]") {
  Replica<kvroute::LeastPrefill> lp("lp", kUrls, 1);
  Replica<kvroute::CacheAware> ca("ca", kUrls, 1);
  const std::string chat = std::string(1000, 's') + " user: hello";
  auto check = [&chat](auto& r) {
    const std::string first = r.route(chat);
    auto one = kvroute::sync::decode(r.take_message());
    REQUIRE(one.ok());
    CHECK(one->changes.size() == 1);
    CHECK(r.route(chat) == first);  // a hit on the worker that holds it all
    auto again = kvroute::sync::decode(r.take_message());
    REQUIRE(again.ok());
    CHECK(again->changes.empty());
    r.route(chat + std::string(200, 'n'));  // one new chunk: emitted
    auto more = kvroute::sync::decode(r.take_message());
    REQUIRE(more.ok());
    REQUIRE(more->changes.size() == 1);
    CHECK(std::get<kvroute::sync::Placement>(more->changes[0]).keys.size() >= 1);
  };
  check(lp);
  check(ca);
}

TEST_CASE("replicas: changes for unknown workers or schemes are ignored", "[sync]") {
  Replica<kvroute::CacheAware> a("a", kUrls, 1);
  const auto snap = a.router.workers().snapshot();
  kvroute::sync::Placement p{"", "http://elsewhere:1", 0, {1, 2}};
  CHECK(a.router.policy().apply_change(p, *snap) == kvroute::sync::Applied::kUnknownWorker);
  p.worker = kUrls[0];
  p.scheme = static_cast<kvroute::sync::KeyScheme>(77);
  CHECK(a.router.policy().apply_change(p, *snap) == kvroute::sync::Applied::kUnknownScheme);
  CHECK(a.router.policy().remote_keys() == 0);
}

TEST_CASE("replicas: a removed worker is forgotten everywhere", "[sync]") {
  Replica<kvroute::CacheAware> a("a", kUrls, 1);
  Replica<kvroute::CacheAware> b("b", kUrls, 2);
  const std::string t(2000, 'x');
  const std::string to = a.route(t);
  b.deliver(a.take_message());
  CHECK(b.match(t).second == std::set<std::string>{to});

  // a's server for `to` restarted: a removes it; b forgets its claims.
  const auto id = a.router.workers().snapshot()->find_url(to)->id;
  REQUIRE(a.router.remove_worker(id).ok());
  b.deliver(a.take_message());
  CHECK(b.match(t).first == 0);
}

TEST_CASE("replicas: cache_aware replicas converge through a lossy transport", "[sync]") {
  for (std::uint64_t seed : {1u, 2u, 3u}) {
    INFO("seed " << seed);
    check_replicas_converge<kvroute::CacheAware>(seed);
  }
}

TEST_CASE("replicas: least_prefill replicas converge through a lossy transport", "[sync]") {
  for (std::uint64_t seed : {4u, 5u}) {
    INFO("seed " << seed);
    check_replicas_converge<kvroute::LeastPrefill>(seed);
  }
}

TEST_CASE("replicas: replicas that send texts converge through a lossy transport", "[sync]") {
  for (std::uint64_t seed : {6u, 7u}) {
    INFO("seed " << seed);
    check_replicas_converge<kvroute::CacheAware>(seed, 0.5);
    check_replicas_converge<kvroute::LeastPrefill>(seed, 1.0);
  }
}

TEST_CASE("replicas: a placement with text is in the other trees at once", "[sync]") {
  Replica<kvroute::CacheAware> a("a", kUrls, 1, 1.0);
  Replica<kvroute::CacheAware> b("b", {kUrls.rbegin(), kUrls.rend()}, 2, 1.0);
  auto held = [](auto& r, const std::string& t) {  // bytes matched, no fold
    std::size_t n = 0;
    r.router.policy().tree("")->visit_path(
        t, [&n](const kvroute::RadixCandidates& h, std::size_t m) noexcept {
          if (!h.empty()) n = m;
        });
    return n;
  };
  std::string chat = std::string(1000, 's') + " user: hello";
  const std::string to = a.route(chat);
  b.deliver(a.take_message());
  CHECK(held(b, chat) == chat.size());  // tail bytes too
  for (int turn = 0; turn < 5; ++turn) {
    chat += " assistant: ok. user: turn " + std::to_string(turn) + std::string(150, 't');
    CHECK(a.route(chat) == to);
    const std::string m = a.take_message();
    CHECK(m.size() < 400);  // the new text, not the whole
    b.deliver(m);
    CHECK(held(b, chat) == chat.size());
  }
  CHECK(b.router.policy().texts_applied() == 6);
  CHECK(b.router.policy().texts_unanchored() == 0);
  CHECK(b.router.policy().remote_keys() == 0);
  CHECK(b.match(chat).second == std::set<std::string>{to});

  // A replica that missed the turns before gets the last one as keys: its
  // tree learns the text when a request there reaches it.
  Replica<kvroute::CacheAware> c("c", kUrls, 3, 1.0);
  chat += " user: one more" + std::string(300, 'm');
  a.route(chat);
  c.deliver(a.take_message());
  CHECK(c.router.policy().texts_unanchored() == 1);
  CHECK(c.router.policy().remote_keys() > 0);
  CHECK(held(c, chat) == 0);
  CHECK(c.match(chat) == std::pair{chat.size() / kChunkBytes, std::set<std::string>{to}});
}

TEST_CASE("replicas: a text the tree knows past the kept texts travels from the last kept chunk",
          "[sync]") {
  Replica<kvroute::CacheAware> a("a", kUrls, 1, 1.0);
  Replica<kvroute::CacheAware> b("b", kUrls, 2, 1.0);
  Replica<kvroute::CacheAware> c("c", kUrls, 3, 0.0);  // keys only
  const std::string p1 = std::string(1000, 's') + " user: hello";
  (void)a.route(p1);
  b.deliver(a.take_message());  // both keep p1, 7 whole chunks
  // `a` learns p1's continuation from c as keys: its tree knows 11 whole
  // chunks of p3, the texts it kept only 7.
  const std::string p2 = p1 + " assistant: " + std::string(488, 'k');
  (void)c.route(p2);
  a.deliver(c.take_message());
  const std::string p3 = p2 + " user: next" + std::string(289, 'z');
  (void)a.route(p3);
  const std::string m = a.take_message();
  CHECK(m.size() > p3.size() - 7 * kChunkBytes);  // from chunk 7 on, anchored
  CHECK(m.size() < p3.size());
  b.deliver(m);
  CHECK(b.router.policy().texts_applied() == 2);
  CHECK(b.router.policy().texts_unanchored() == 0);
  CHECK(b.match(p3).first == p3.size() / kChunkBytes);
}

TEST_CASE("replicas: a sender keeps its texts whether or not the host notes them", "[sync]") {
  for (bool noted : {true, false}) {
    INFO("note_sent " << noted);
    Replica<kvroute::CacheAware> a("a", kUrls, 1, 1.0);
    Replica<kvroute::CacheAware> b("b", {kUrls.rbegin(), kUrls.rend()}, 2, 1.0);
    a.note_sent = noted;
    b.note_sent = noted;
    (void)a.take_message();  // a host that notes does so from the start
    std::string chat = std::string(1000, 's') + " user: hello";
    const std::string to = a.route(chat);
    // The next turn is sent before the host drained the first: it still
    // travels as the new text only, anchored in the first.
    chat += " assistant: ok. user: more" + std::string(150, 't');
    CHECK(a.route(chat) == to);
    const std::string m = a.take_message();
    CHECK(m.size() < chat.size() + 400);
    b.deliver(m);
    CHECK(b.router.policy().texts_applied() == 2);
    CHECK(b.router.policy().texts_unanchored() == 0);
    // A turn placed by the other replica extends the text `a` sent: `a`
    // kept it, and takes the turn whole.
    chat += " assistant: fine. user: again" + std::string(200, 'u');
    CHECK(b.route(chat) == to);
    a.deliver(b.take_message());
    CHECK(a.router.policy().texts_applied() == 1);
    CHECK(a.router.policy().texts_unanchored() == 0);
    CHECK(a.router.policy().remote_keys() == 0);
  }
}

TEST_CASE("replicas: placements carry text while the new text is a small share", "[sync]") {
  // Counts, past the first `skip` bytes routed, the placements sent as
  // text and as keys, at a share of 0.25.
  auto run = [](auto next_text, std::size_t total, std::size_t skip) {
    Replica<kvroute::CacheAware> a("a", kUrls, 1, 0.25);
    std::size_t routed = 0, with_text = 0, keys_only = 0;
    while (routed < total) {
      const std::string t = next_text();
      a.route(t);
      routed += t.size();
      auto b = kvroute::sync::decode(a.take_message());
      REQUIRE(b.ok());
      if (routed < skip) continue;
      for (const auto& c : b->changes) {
        (std::get<kvroute::sync::Placement>(c).text.empty() ? keys_only : with_text) += 1;
      }
    }
    return std::pair{with_text, keys_only};
  };
  std::mt19937_64 rng(5);
  auto random_text = [&rng](std::size_t n) {
    std::string s(n, ' ');
    for (char& c : s) c = static_cast<char>('a' + rng() % 26);
    return s;
  };
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  // Requests that extend a known prompt by 8 KiB of new text each: keys
  // once the first 4 MiB of them have shown it.
  const std::string prompt = random_text(1024);
  const auto fresh = run([&] { return prompt + random_text(8192); }, 12 * kMiB, 6 * kMiB);
  CHECK(fresh.first == 0);
  CHECK(fresh.second > 500);
  // First requests (nothing known) say nothing about the traffic: text.
  const auto firsts = run([&] { return random_text(8192); }, 8 * kMiB, 0);
  CHECK(firsts.first > 500);
  CHECK(firsts.second == 0);
  // Sessions that grow by a few hundred bytes a turn: text throughout.
  std::vector<std::string> sessions(8);
  for (auto& s : sessions) s = random_text(16384);
  const auto growing = run(
      [&] {
        std::string& s = sessions[rng() % sessions.size()];
        s += random_text(200 + rng() % 300);
        if (s.size() > 64 * 1024) s = random_text(16384);
        return s;
      },
      12 * kMiB, 0);
  CHECK(growing.first > 300);
  CHECK(growing.second == 0);
}

TEST_CASE("replicas: a feedback cut travels to replicas whose trees take texts", "[sync]") {
  using LP = kvroute::LeastPrefill;
  // One worker, so that every text lands on it; the same placements reach
  // b in the same order, so its stamps follow a's.
  Replica<LP> a("a", {kUrls[0]}, 1, 1.0);
  Replica<LP> b("b", {kUrls[0]}, 2, 1.0);
  Replica<LP> keys("keys", {kUrls[0]}, 3, 0.0);  // takes keys only
  auto held = [](auto& r, const std::string& t) {
    std::size_t n = 0;
    r.router.policy().tree("")->visit_path(
        t, [&n](const kvroute::RadixCandidates& h, std::size_t m) noexcept {
          if (!h.empty()) n = m;
        });
    return n;
  };
  std::vector<std::string> texts;
  for (char c : {'x', 'y', 'z'}) {
    texts.push_back(std::string(1500, c) + " user: hello");
    a.route(texts.back());
    b.deliver(a.take_message());
  }
  for (const std::string& t : texts) CHECK(held(b, t) == t.size());

  // z's next turn claims z; the server had none of it: a drops the claims
  // older than z's (x and y), and so does b.
  const std::string next = texts[2] + " assistant: hi. user: more" + std::string(300, 'm');
  auto s = a.router.select({.text = next});
  REQUIRE(s);
  CHECK(s.decision.claimed >= texts[2].size());
  b.deliver(a.take_message());
  const kvroute::EvictResult e =
      a.router.policy().report_cached({.text = next}, s.decision, /*cached_tokens=*/0);
  CHECK(e.claims > 0);
  const std::string m = a.take_message();
  auto batch = kvroute::sync::decode(m);
  REQUIRE(batch.ok());
  CHECK(std::any_of(batch->changes.begin(), batch->changes.end(),
                    [](const auto& c) { return std::holds_alternative<kvroute::sync::Cut>(c); }));
  b.deliver(m);
  CHECK(held(b, texts[0]) < kChunkBytes);
  CHECK(held(b, texts[1]) < kChunkBytes);
  CHECK(held(b, next) == next.size());  // placed after the cut's claim: kept

  // A replica whose tree learns by folding keys ignores it.
  keys.router.policy().fold_remote({.text = texts[0]});  // nothing known yet
  const auto snap = keys.router.workers().snapshot();
  REQUIRE(keys.router.policy().apply_change(
              kvroute::sync::Placement{"", kUrls[0], 0, {kvroute::sync::chunk_key_at(texts[0], 0)}},
              *snap) == kvroute::sync::Applied::kApplied);
  keys.router.policy().fold_remote({.text = texts[0]});
  REQUIRE(held(keys, texts[0]) == kChunkBytes);
  keys.deliver(m);
  CHECK(held(keys, texts[0]) == kChunkBytes);
}

TEST_CASE("replicas: AnyPolicy forwards sharing to the policies that share", "[sync]") {
  kvroute::PolicyConfig cfg;
  cfg.policy = kvroute::PolicyKind::kLeastPrefill;
  kvroute::Router<kvroute::AnyPolicy> a(*kvroute::make_policy(cfg));
  kvroute::Router<kvroute::AnyPolicy> b(*kvroute::make_policy(cfg));
  for (const std::string& u : kUrls) {
    REQUIRE(a.add_worker({.url = u}).ok());
    REQUIRE(b.add_worker({.url = u}).ok());
  }
  CHECK(a.policy().shares_state());
  kvroute::sync::Outbox out;
  a.policy().set_state_sink(&out);
  const std::string t(1000, 'q');
  auto s = a.select({.text = t});
  REQUIRE(s);
  std::vector<kvroute::sync::Change> changes;
  REQUIRE(out.drain(changes) == 1);
  CHECK(b.policy().apply_change(changes[0], *b.workers().snapshot()) ==
        kvroute::sync::Applied::kApplied);
  auto t2 = b.select({.text = t + " and more"});
  CHECK(t2.worker().url == s.worker().url);

  cfg.policy = kvroute::PolicyKind::kRoundRobin;
  kvroute::Router<kvroute::AnyPolicy> rr(*kvroute::make_policy(cfg));
  REQUIRE(rr.add_worker({.url = kUrls[0]}).ok());
  CHECK_FALSE(rr.policy().shares_state());
  rr.policy().set_state_sink(&out);  // nothing to share: a no-op
  CHECK(rr.policy().apply_change(changes[0], *rr.workers().snapshot()) ==
        kvroute::sync::Applied::kNotShared);
}

TEST_CASE("replicas: selections and deliveries run concurrently", "[sync]") {
  // Under TSan this is the race check; here it also converges. Keys only,
  // then with texts.
  for (double share : {0.0, 1.0}) {
    INFO("sync_text_share " << share);
    check_concurrent_replicas(share);
  }
}
