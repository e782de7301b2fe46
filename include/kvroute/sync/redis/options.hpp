// -----------------------------------------------------------------------------
// File: kvroute/sync/redis/options.hpp
// -----------------------------------------------------------------------------
//
// The configuration of RedisReplicator (replicator.hpp): where Redis is
// (`parse_redis_url`), the names it uses there, how often it sends, reads
// and snapshots, and how it waits for a Redis that is down. validate()
// names the bad field and its value, as every kvroute configuration error
// does, so that a host can report a bad flag before it starts anything.
//
// URL forms:
//
//   redis://[[user]:password@]host[:port][/db]   TCP; port 6379, db 0 by default;
//                                                 an IPv6 host in brackets
//   unix:///path/to/socket[?db=N][&user=U][&password=P]   a unix socket
//   redis+unix:///path/to/socket[?...]                      the same
//
// Passwords are taken literally (no percent-decoding); rediss:// (TLS) is
// refused, since Debian's hiredis is built without it.
//
// Thread safety: values and pure functions.
//
// Example:
//
//   absl::StatusOr<kvroute::sync::RedisAddress> a =
//       kvroute::sync::parse_redis_url("unix:///run/redis/redis.sock");
//   kvroute::sync::RedisReplicator::Options o{.url = "redis://10.0.0.5:6379/2",
//                                             .replica = "router-a"};
//   absl::Status s = o.validate();

#ifndef KVROUTE_SYNC_REDIS_OPTIONS_HPP_
#define KVROUTE_SYNC_REDIS_OPTIONS_HPP_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "kvroute/config.hpp"
#include "kvroute/sync/wire.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace sync {

// Where a Redis server listens.
struct RedisAddress {
  enum class Kind : std::uint8_t { kTcp, kUnix };
  Kind kind = Kind::kTcp;
  std::string host{};  // kTcp
  int port = 6379;     // kTcp
  std::string path{};  // kUnix
  int db = 0;
  std::string user{};      // AUTH user (Redis 6 ACLs); empty: the default user
  std::string password{};  // empty: no AUTH

  // The address without the password, for messages.
  std::string to_string() const {
    const std::string db_part = db == 0 ? "" : absl::StrCat(kind == Kind::kUnix ? "?db=" : "/", db);
    if (kind == Kind::kUnix) return absl::StrCat("unix://", path, db_part);
    const bool v6 = absl::StrContains(host, ':');
    return absl::StrCat("redis://", password.empty() ? "" : "***@", v6 ? "[" : "", host,
                        v6 ? "]" : "", ":", port, db_part);
  }
};

namespace redis_detail {

inline absl::Status bad_url(std::string_view url, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("url: '", absl::CHexEscape(absl::string_view(url.data(), url.size())), "' ",
                   absl::string_view(why.data(), why.size())));
}

// A decimal integer in [lo, hi].
inline bool parse_int(std::string_view s, int lo, int hi, int& out) {
  if (s.empty() || s.size() > 10 || s.find_first_not_of("0123456789") != std::string_view::npos) {
    return false;
  }
  std::int64_t v = 0;
  if (!absl::SimpleAtoi(absl::string_view(s.data(), s.size()), &v) || v < lo || v > hi) {
    return false;
  }
  out = static_cast<int>(v);
  return true;
}

// A unix URL's query: db=N, user=U, password=P, joined by '&'.
inline absl::Status parse_unix_query(std::string_view url, std::string_view query,
                                     RedisAddress& a) {
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view item = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    const std::size_t eq = item.find('=');
    const std::string_view key = item.substr(0, eq);
    const std::string_view value =
        eq == std::string_view::npos ? std::string_view() : item.substr(eq + 1);
    if (key == "db" && eq != std::string_view::npos) {
      if (!parse_int(value, 0, 1 << 30, a.db)) {
        return bad_url(url, "has a bad database number in ?db=");
      }
    } else if (key == "password" && eq != std::string_view::npos) {
      a.password.assign(value);
    } else if (key == "user" && eq != std::string_view::npos) {
      a.user.assign(value);
    } else {
      return bad_url(url,
                     absl::StrCat("has a bad query item '",
                                  absl::CHexEscape(absl::string_view(item.data(), item.size())),
                                  "' (db=N, user=U, password=P)"));
    }
  }
  if (!a.user.empty() && a.password.empty()) {
    return bad_url(url, "has a user without a password");
  }
  return absl::OkStatus();
}

inline absl::StatusOr<RedisAddress> parse_unix_url(std::string_view url, std::string_view rest) {
  RedisAddress a;
  a.kind = RedisAddress::Kind::kUnix;
  std::string_view path = rest;
  if (const std::size_t q = rest.find('?'); q != std::string_view::npos) {
    path = rest.substr(0, q);
    if (absl::Status s = parse_unix_query(url, rest.substr(q + 1), a); !s.ok()) return s;
  }
  if (path.empty() || path.front() != '/') {
    return bad_url(url, "needs an absolute socket path (unix:///path/to/socket)");
  }
  a.path.assign(path);
  return a;
}

// host[:port] or [v6]:port.
inline absl::Status parse_host_port(std::string_view url, std::string_view hp, RedisAddress& a) {
  std::string_view port;
  if (!hp.empty() && hp.front() == '[') {
    const std::size_t close = hp.find(']');
    if (close == std::string_view::npos) return bad_url(url, "has an unclosed '[' in its host");
    a.host.assign(hp.substr(1, close - 1));
    const std::string_view after = hp.substr(close + 1);
    if (!after.empty() && after.front() != ':') return bad_url(url, "has bytes after ']'");
    if (!after.empty()) port = after.substr(1);
  } else if (const std::size_t colon = hp.rfind(':'); colon != std::string_view::npos) {
    a.host.assign(hp.substr(0, colon));
    port = hp.substr(colon + 1);
  } else {
    a.host.assign(hp);
  }
  if (a.host.empty()) return bad_url(url, "has no host");
  if (hp.front() != '[' && absl::StrContains(a.host, ':')) {
    return bad_url(url, "has an IPv6 host outside brackets (redis://[::1]:6379)");
  }
  if (absl::StrContains(absl::string_view(hp.data(), hp.size()), ':') &&
      !parse_int(port, 1, 65535, a.port)) {
    return bad_url(url, absl::StrCat("has a bad port '",
                                     absl::CHexEscape(absl::string_view(port.data(), port.size())),
                                     "' (1 to 65535)"));
  }
  return absl::OkStatus();
}

inline absl::StatusOr<RedisAddress> parse_tcp_url(std::string_view url, std::string_view rest) {
  RedisAddress a;
  std::string_view authority = rest;
  if (const std::size_t slash = rest.find('/'); slash != std::string_view::npos) {
    authority = rest.substr(0, slash);
    const std::string_view db = rest.substr(slash + 1);
    if (!db.empty() && !parse_int(db, 0, 1 << 30, a.db)) {
      return bad_url(url, "has a bad database number after '/'");
    }
  }
  if (const std::size_t at = authority.rfind('@'); at != std::string_view::npos) {
    const std::string_view userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    const std::size_t colon = userinfo.find(':');
    if (colon == std::string_view::npos) {
      return bad_url(url, "has user info without a password (use redis://:password@host)");
    }
    a.user.assign(userinfo.substr(0, colon));
    a.password.assign(userinfo.substr(colon + 1));
  }
  if (absl::Status s = parse_host_port(url, authority, a); !s.ok()) return s;
  return a;
}

}  // namespace redis_detail

// Parses a Redis URL (the forms above). InvalidArgument names what is wrong.
inline absl::StatusOr<RedisAddress> parse_redis_url(std::string_view url) {
  using redis_detail::bad_url;
  const std::size_t sep = url.find("://");
  if (sep == std::string_view::npos) {
    return bad_url(url, "is not a Redis URL (redis://host:port[/db] or unix:///path)");
  }
  const std::string_view scheme = url.substr(0, sep);
  const std::string_view rest = url.substr(sep + 3);
  if (scheme == "unix" || scheme == "redis+unix") return redis_detail::parse_unix_url(url, rest);
  if (scheme == "redis") return redis_detail::parse_tcp_url(url, rest);
  if (scheme == "rediss") return bad_url(url, "asks for TLS, which this build does not support");
  return bad_url(url, "has an unknown scheme (redis://, unix:// or redis+unix://)");
}

// See replicator.hpp for what each setting does; docs/replicas.md
// lists them with the keys and the failure modes.
struct RedisReplicatorOptions {
  std::string url = "redis://127.0.0.1:6379";
  // This replica's name, unique in the fleet (a host name, a pod name). It
  // names its load reports; a replica restarted under the same name
  // replaces its own earlier reports.
  std::string replica{};
  // Every key starts with it: several fleets can share one Redis.
  std::string key_prefix = "kvroute";

  // How often the changes the policy emitted are sent.
  std::chrono::milliseconds flush_interval{50};
  // They are also sent as soon as the outbox holds this many bytes (0:
  // only every flush_interval), which is looked at every tenth of
  // flush_interval. At high request rates this keeps the outbox small:
  // what a selection writes there then stays in the CPU's caches instead
  // of pushing the policy's trees out of them (benchmarks/sync_benchmark.cpp,
  // BM_SyncChatPaired), and a burst does not fill it.
  std::size_t flush_bytes = std::size_t{32} << 10;
  // How often this replica's load is sent, the other replicas' load applied
  // and the list of models read.
  std::chrono::milliseconds load_interval{250};
  // Another replica's load stops counting after this long without a report.
  std::chrono::milliseconds load_ttl{3000};
  // How often a snapshot of each model is written (0: never).
  std::chrono::milliseconds snapshot_interval{30000};

  // How long Redis holds a read open when there is nothing new (XREAD
  // BLOCK; Redis ends it on its own timer, 100 ms at its default hz). A
  // model followed meanwhile is read from the next read on. Flushes do not
  // wait for it: reads have a connection of their own.
  std::chrono::milliseconds read_block{100};
  // Entries read per stream per read.
  std::size_t read_count = 1000;
  // Each model's stream keeps about this many entries (XADD MAXLEN ~).
  std::size_t stream_max_len = 10000;
  // The fleet stream (load reports, worker removals) keeps about this many.
  std::size_t fleet_max_len = 2000;

  std::chrono::milliseconds connect_timeout{1000};
  // A reply slower than this (a read's: than read_block plus this) drops
  // the connection and reconnects.
  std::chrono::milliseconds command_timeout{2000};
  // Reconnection: the wait doubles from backoff_min to backoff_max after
  // each failed attempt, each wait drawn between half and all of it.
  std::chrono::milliseconds backoff_min{100};
  std::chrono::milliseconds backoff_max{5000};

  // Returns OK, or InvalidArgument naming the first bad field and its value.
  absl::Status validate() const {
    auto bad = [](std::string_view field, const auto& v, std::string_view why) {
      return absl::InvalidArgumentError(
          absl::StrCat("redis replicator ", absl::string_view(field.data(), field.size()), ": ", v,
                       " ", absl::string_view(why.data(), why.size())));
    };
    if (absl::StatusOr<RedisAddress> a = parse_redis_url(url); !a.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("redis replicator ", a.status().message()));
    }
    if (replica.empty()) return bad("replica", "''", "must name this replica (non-empty)");
    if (replica.size() > kMaxNameBytes) {
      return bad("replica", absl::StrCat(replica.size(), " bytes"), "is longer than 4096 bytes");
    }
    if (key_prefix.empty()) return bad("key_prefix", "''", "must be non-empty");
    const std::pair<std::string_view, std::chrono::milliseconds> positive[] = {
        {"flush_interval", flush_interval},
        {"load_interval", load_interval},
        {"read_block", read_block},
        {"connect_timeout", connect_timeout},
        {"backoff_min", backoff_min}};
    for (const auto& [field, v] : positive) {
      if (v.count() <= 0) return bad(field, absl::StrCat(v.count(), " ms"), "must be > 0");
    }
    if (load_ttl <= load_interval) {
      return bad(
          "load_ttl", absl::StrCat(load_ttl.count(), " ms"),
          absl::StrCat("must be longer than load_interval (", load_interval.count(), " ms)"));
    }
    if (snapshot_interval.count() < 0) {
      return bad("snapshot_interval", absl::StrCat(snapshot_interval.count(), " ms"),
                 "must be >= 0 (0: never)");
    }
    if (command_timeout <= read_block) {
      return bad("command_timeout", absl::StrCat(command_timeout.count(), " ms"),
                 absl::StrCat("must be longer than read_block (", read_block.count(), " ms)"));
    }
    if (backoff_max < backoff_min) {
      return bad("backoff_max", absl::StrCat(backoff_max.count(), " ms"),
                 absl::StrCat("must be >= backoff_min (", backoff_min.count(), " ms)"));
    }
    if (read_count == 0) return bad("read_count", 0, "must be > 0");
    if (stream_max_len == 0) return bad("stream_max_len", 0, "must be > 0");
    if (fleet_max_len == 0) return bad("fleet_max_len", 0, "must be > 0");
    return absl::OkStatus();
  }
};

}  // namespace sync
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_SYNC_REDIS_OPTIONS_HPP_
