// What the router fuzz driver (router_driver.hpp) reads its bytes as: a
// policy configuration, worker specs and requests. Each is a few bytes, each
// byte choosing from a small table of values that matter (budgets of a few
// characters, thresholds at their bounds, extreme but valid flag values,
// header values naming present, removed and unknown workers, text sharing
// prefixes with earlier requests, invalid UTF-8).
#ifndef KVROUTE_TESTS_FUZZ_ROUTER_INPUTS_HPP_
#define KVROUTE_TESTS_FUZZ_ROUTER_INPUTS_HPP_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "fuzz/byte_reader.hpp"
#include "kvroute/policy_config.hpp"
#include "kvroute/request.hpp"
#include "kvroute/worker_set.hpp"

namespace kvfuzz {

// A configuration that passes Validate, every field from its table.
inline kvroute::PolicyConfig decode_policy_config(ByteReader& in) {
  using std::chrono::seconds;
  constexpr std::uint64_t kU64Max = std::numeric_limits<std::uint64_t>::max();
  constexpr double kHuge = std::numeric_limits<double>::max();
  constexpr double kTiny = std::numeric_limits<double>::denorm_min();
  static constexpr std::uint64_t kTreeSizes[] = {1, 2, 3, 5, 16, 64, 1000, 1u << 26, kU64Max};
  static constexpr double kThresholds[] = {0.3, 0.0, 1.0, 0.5, 1e-9};
  static constexpr std::uint64_t kAbs[] = {64, 0, 1, 2, kU64Max};
  static constexpr double kRel[] = {1.5, 1.0, 1.0001, 2.0, kHuge};
  static constexpr std::int64_t kSeconds[] = {120, 1, 2, 5, 14400, (std::int64_t{1} << 32) - 1};
  static constexpr std::int64_t kIdle[] = {14400, 0, 1, 3, 120, (std::int64_t{1} << 32) - 1};
  static constexpr std::uint32_t kPrefix[] = {256, 1, 2, 5, 0xFFFFFFFFu};
  static constexpr double kFactors[] = {1.25, 1.0, 2.0, kHuge};
  static constexpr double kBounded[] = {0.0, 1.0, 1.25, 3.0, kHuge};
  static constexpr double kWeights[] = {0.4, 0.0, 1.0, kTiny, kHuge};
  static constexpr double kCharsPerToken[] = {4.0, 1.0, 0.25, 1e-300, kTiny, 1e300, kHuge};

  kvroute::PolicyConfig c;
  c.policy = kvroute::kAllPolicyKinds[in.next() % kvroute::kAllPolicyKinds.size()];
  c.max_tree_size = in.pick(kTreeSizes);
  c.cache_threshold = in.pick(kThresholds);
  c.balance_abs_threshold = in.pick(kAbs);
  c.balance_rel_threshold = in.pick(kRel);
  c.eviction_interval = seconds(in.pick(kSeconds));
  c.max_idle = seconds(in.pick(kIdle));
  c.assignment_mode = static_cast<kvroute::AssignmentMode>(in.next() % 3);
  c.prefix_token_count = in.pick(kPrefix);
  c.prefix_hash_load_factor = in.pick(kFactors);
  c.bucket_adjust_interval = seconds(in.pick(kSeconds));
  c.bounded_load_factor = in.pick(kBounded);
  // A fixed weight: the checks model least_prefill's fixed rule (the
  // adaptive rule's running means are not modelled; its unit tests cover it).
  c.queue_weight = in.pick(kWeights);
  c.chars_per_token = in.pick(kCharsPerToken);
  c.seed = in.next();
  return c;
}

inline std::string describe_config(const kvroute::PolicyConfig& c) {
  std::ostringstream o;
  o.precision(17);
  o << to_string(c.policy) << ", max_tree_size " << c.max_tree_size << ", cache_threshold "
    << c.cache_threshold << ", balance " << c.balance_abs_threshold << " / "
    << c.balance_rel_threshold << ", eviction_interval " << c.eviction_interval.count()
    << " s, max_idle " << c.max_idle.count() << " s, " << to_string(c.assignment_mode)
    << ", prefix " << c.prefix_token_count << " x " << c.prefix_hash_load_factor << ", bucket "
    << c.bucket_adjust_interval.count() << " s, bounded " << c.bounded_load_factor
    << ", queue_weight " << c.queue_weight.value_or(-1) << ", chars_per_token " << c.chars_per_token
    << ", seed " << c.seed;
  return o.str();
}

// A request that owns its bytes; view() points into them.
struct OwnedRequest {
  std::string text;
  std::vector<std::uint32_t> tokens;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string model;

  // `scratch` holds the header views and must outlive the result.
  kvroute::RequestView view(std::vector<kvroute::Header>& scratch) const {
    scratch.clear();
    for (const auto& [name, value] : headers) scratch.push_back({name, value});
    return {.text = text, .tokens = tokens, .headers = scratch, .model = model};
  }

  std::string describe() const {
    std::string out = "text " + show_bytes(text.size() > 48 ? text.substr(0, 48) + "..." : text);
    if (text.size() > 48) out += " (" + std::to_string(text.size()) + " bytes)";
    out += ", " + std::to_string(tokens.size()) + " tokens, model " + show_bytes(model);
    for (const auto& [name, value] : headers)
      out += ", " + show_bytes(name) + ": " + show_bytes(value);
    return out;
  }
};

// A worker spec and whether WorkerSet must accept its fields (a duplicate
// URL aside).
struct FuzzSpec {
  kvroute::WorkerSpec spec;
  bool valid = true;
};

// Generates specs and requests; remembers earlier texts (so that requests
// share prefixes) and the models it invented.
class RouterInputs {
 public:
  static constexpr std::size_t kUrls = 8;

  static std::string url(std::size_t i) { return "http://w" + std::to_string(i) + ":8000"; }

  // Mostly "", "m0" to "m2"; sometimes a model never seen before, or the
  // latest such one.
  std::string model(ByteReader& in) {
    const std::uint8_t b = in.next() % 16;
    if (b < 6) return "";
    if (b < 12) return "m" + std::to_string((b - 6) / 2);
    if (b == 12 || fresh_models_ == 0) return "new" + std::to_string(fresh_models_++);
    return "new" + std::to_string(fresh_models_ - 1);
  }

  FuzzSpec spec(ByteReader& in) {
    const std::uint8_t b = in.next();
    FuzzSpec s;
    s.spec.healthy = (b & 0xC0) != 0xC0;
    switch (b % 16) {
      case 0:
        s.spec.url = "";
        s.valid = false;
        break;
      case 1:
        s.spec.url = "http://a b:1";
        s.valid = false;
        break;
      case 2:
        s.spec.url = std::string("http://a\x01:1");
        s.valid = false;
        break;
      default:
        s.spec.url = url(b % kUrls);
        break;
    }
    s.spec.model = model(in);
    if (b % 16 == 3) {
      s.spec.model = std::string(kvroute::kMaxModelBytes + 1, 'm');
      s.valid = false;
    } else if (b % 16 == 4) {
      s.spec.model = "m\n";
      s.valid = false;
    }
    return s;
  }

  OwnedRequest request(ByteReader& in) {
    OwnedRequest r;
    r.text = text(in);
    const std::uint8_t t = in.next();
    static constexpr std::uint32_t kTokens[] = {0, 1, 2, 7, 1u << 31, 0xFFFFFFFFu};
    for (int i = 0; i < t % 6; ++i) r.tokens.push_back(in.pick(kTokens));
    const int headers = in.next() % 4;
    for (int i = 0; i < headers; ++i) r.headers.push_back(header(in));
    r.model = model(in);
    return r;
  }

 private:
  static constexpr std::size_t kMaxHistory = 16;

  // Optionally a prefix of an earlier text (cut anywhere, even inside a
  // character, or whole), then up to 7 pieces.
  std::string text(ByteReader& in) {
    static const std::string kLong(3000, 'x');
    static const std::string kPieces[] = {"a",
                                          "b",
                                          "ab",
                                          "abc",
                                          "You are a helpful assistant. ",
                                          "\xC3\xA9",
                                          "\xC3",
                                          "\x80",
                                          std::string(1, '\0'),
                                          "\xE4\xBD\xA0",
                                          "\xF0\x9F\xA4\x96",
                                          "\xFF",
                                          "\xED\xA0\x80",
                                          "xyz",
                                          kLong};
    const std::uint8_t b = in.next();
    std::string s;
    if ((b & 1) != 0 && !history_.empty()) {
      const std::string& h = history_[in.next() % history_.size()];
      const std::uint8_t cut = in.next();  // half the time the whole text
      s = h.substr(0, cut >= 0x80 ? h.size() : cut % (h.size() + 1));
    }
    for (int i = 0; i < ((b >> 1) & 7); ++i) s += in.pick(kPieces);
    if (history_.size() < kMaxHistory) {
      history_.push_back(s);
    } else {
      history_[b % kMaxHistory] = s;
    }
    return s;
  }

  std::pair<std::string, std::string> header(ByteReader& in) {
    static const std::string kNames[] = {"x-smg-routing-key",
                                         "X-SMG-Routing-Key",
                                         "x-smg-target-worker",
                                         "authorization",
                                         "x-forwarded-for",
                                         "cookie",
                                         "x-other",
                                         std::string("x-smg-routing-key\0", 18)};
    static const std::string kOdd[] = {"007", "+1", " 1", "4294967295", "99999999999"};
    std::string name = in.pick(kNames);
    const std::uint8_t b = in.next();
    switch (b % 8) {
      case 0:
        return {name, ""};
      case 4:
        return {name, std::string("k\r\n\0\xFF", 5)};
      case 5:
        return {name, url(in.next() % kUrls)};
      case 6:
        return {name, std::to_string(in.next() % 12)};
      case 7:
        return {name, in.pick(kOdd)};
      default:
        return {name, "k" + std::to_string(b % 8)};
    }
  }

  std::vector<std::string> history_;
  int fresh_models_ = 0;
};

}  // namespace kvfuzz

#endif  // KVROUTE_TESTS_FUZZ_ROUTER_INPUTS_HPP_
