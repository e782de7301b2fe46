// kvroute_sim: the results table, JSON and SVG chart.
#ifndef KVROUTE_EXAMPLES_SIM_REPORT_HPP_
#define KVROUTE_EXAMPLES_SIM_REPORT_HPP_

#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/config.hpp"
#include "sim/result.hpp"
#include "sim/server.hpp"
#include "sim/trace.hpp"

namespace kvsim {

struct Report {
  std::string trace;
  int servers = 0;
  std::size_t requests = 0;
  double ideal_hit_rate = 0;
  std::string model;     // the server model, in words
  std::string replicas;  // router replicas, in words ("" for one router)
  std::vector<PolicyResult> policies;
};

inline std::string model_text(const SimConfig& c) {
  if (c.server_model == ServerModel::kSimple) {
    return fmt::format(
        "simple servers: FIFO prefill at {:g} tokens/s, {:g} s per output token, "
        "{} cached tokens each; open loop",
        c.prefill_rate, c.tpot, c.cache_tokens);
  }
  return fmt::format("sglang servers: chunked prefill {}, KV pool {} tokens each; {}",
                     c.sglang.chunked_prefill_size, c.cache_tokens,
                     c.closed_loop ? "closed-loop sessions" : "open loop");
}

inline std::string sync_text(const Replicas& r) {
  const std::string texts =
      r.text_share > 0
          ? fmt::format(
                " (texts while requests that extend known text add at most {:g} of their bytes)",
                r.text_share)
          : " (keys only)";
  const std::string every = r.load_period_s > 0
                                ? fmt::format("every {:g} ms", r.load_period_s * 1e3)
                                : std::string("at every change");
  switch (r.sync) {
    case SyncMode::kOff:
      return "unsynced";
    case SyncMode::kTrees:
      return fmt::format("synced: state changes only{}, after {:g} ms", texts, r.delay_s * 1e3);
    case SyncMode::kLoads:
      return fmt::format("synced: loads only ({}), after {:g} ms", every, r.delay_s * 1e3);
    case SyncMode::kOn:
      break;
  }
  return fmt::format("synced: state changes{} and loads ({}), after {:g} ms", texts, every,
                     r.delay_s * 1e3);
}

inline std::string replicas_text(const Replicas& r) {
  if (r.count <= 1) return "";
  return fmt::format(
      "{} replicas of each kvroute policy behind a round-robin front, {}; oracle and sticky: "
      "one router (references)",
      r.count, sync_text(r));
}

// The report's header fields for `tr` run under `cfg`.
inline Report make_report(const Trace& tr, const SimConfig& cfg) {
  Report rep;
  rep.trace = tr.name;
  rep.servers = cfg.servers;
  rep.requests = tr.requests.size();
  rep.ideal_hit_rate = ideal_hit_rate(tr);
  rep.model = model_text(cfg);
  rep.replicas = replicas_text(cfg.replicas);
  return rep;
}

// One line per column of table().
inline constexpr const char* kLegend =
    "hit: cached / prompt tokens; ttft_*: time to first token, mean, median, 99th percentile;\n"
    "imbal: most prefilled tokens on one server / the servers' mean; sel_us, sel_p99: the\n"
    "router's decision time, mean and 99th percentile, wall-clock microseconds; rej: requests\n"
    "larger than a server's KV pool (rejected); branches: the decisions' branches\n";
// The replicas' columns, when a row ran on several.
inline constexpr const char* kSyncLegend =
    "sync_B/req: bytes the replicas sent each other (state-change and load batches as encoded on\n"
    "the wire) per routed request; sync/text: the same over the routed requests' text bytes\n";

inline std::string branches_text(const PolicyResult& p) {
  std::vector<std::pair<std::int64_t, std::string>> v;
  for (const auto& [k, c] : p.branches) v.emplace_back(-c, k);
  std::sort(v.begin(), v.end());
  std::string out;
  for (const auto& [c, k] : v) {
    if (!out.empty()) out += ' ';
    out += fmt::format("{}={}", k, -c);
  }
  return out;
}

// The replicas' columns of one row ("-" for a single router).
inline std::string sync_cells(const PolicyResult& p) {
  if (p.replicas <= 1) return fmt::format(" {:>10} {:>9}", "-", "-");
  return fmt::format(" {:>10.0f} {:>9.4f}", sync_bytes_per_request(p), sync_bytes_per_text_byte(p));
}

inline std::string table(const Report& r) {
  std::string out = fmt::format(
      "trace {}: {} requests, {} servers, ideal hit rate (one infinite cache) {:.3f}\n{}\n",
      r.trace, r.requests, r.servers, r.ideal_hit_rate, r.model);
  if (!r.replicas.empty()) out += r.replicas + "\n";
  bool sync = false;
  std::size_t w = 25;
  for (const PolicyResult& p : r.policies) {
    sync = sync || p.replicas > 1;
    w = std::max(w, p.name.size());
  }
  out += fmt::format("\n{:<{}} {:>6} {:>9} {:>9} {:>9} {:>6} {:>9} {:>9} {:>4}", "policy", w, "hit",
                     "ttft_mean", "ttft_p50", "ttft_p99", "imbal", "sel_us", "sel_p99", "rej");
  if (sync) out += fmt::format(" {:>10} {:>9}", "sync_B/req", "sync/text");
  out += "  branches\n";
  for (const PolicyResult& p : r.policies) {
    out += fmt::format(
        "{:<{}} {:>6.3f} {:>8.3f}s {:>8.3f}s {:>8.3f}s {:>6.2f} {:>9.2f} {:>9.2f} {:>4}", p.name, w,
        p.hit_rate, p.ttft_mean, p.ttft_p50, p.ttft_p99, p.imbalance, p.select_us_mean,
        p.select_us_p99, p.rejected);
    if (sync) out += sync_cells(p);
    out += "  " + branches_text(p) + "\n";
  }
  return out + "\n" + kLegend + (sync ? kSyncLegend : "");
}

// A replicated row's "sync" object.
inline nlohmann::ordered_json sync_json(const PolicyResult& p) {
  return {{"replicas", p.replicas},
          {"bytes_per_request", sync_bytes_per_request(p)},
          {"bytes_per_text_byte", sync_bytes_per_text_byte(p)},
          {"change_bytes", p.change_bytes},
          {"load_bytes", p.load_bytes},
          {"text_bytes", p.text_bytes},
          {"changes", p.changes},
          {"not_applied", p.not_applied},
          {"dropped", p.dropped}};
}

// Keys in the documented order.
inline nlohmann::ordered_json to_json(const Report& r) {
  nlohmann::ordered_json j;
  j["trace"] = r.trace;
  j["servers"] = r.servers;
  j["ideal_hit_rate"] = r.ideal_hit_rate;
  j["model"] = r.model;
  if (!r.replicas.empty()) j["replicas"] = r.replicas;
  j["policies"] = nlohmann::ordered_json::array();
  for (const PolicyResult& p : r.policies) {
    nlohmann::ordered_json b = nlohmann::ordered_json::object();
    for (const auto& [k, c] : p.branches) b[k] = c;
    j["policies"].push_back({{"name", p.name},
                             {"hit_rate", p.hit_rate},
                             {"ttft_mean_s", p.ttft_mean},
                             {"ttft_p50_s", p.ttft_p50},
                             {"ttft_p99_s", p.ttft_p99},
                             {"imbalance", p.imbalance},
                             {"select_us_mean", p.select_us_mean},
                             {"select_us_p99", p.select_us_p99},
                             {"rejected", p.rejected},
                             {"branches", b}});
    if (p.replicas > 1) j["policies"].back()["sync"] = sync_json(p);
  }
  return j;
}

inline std::string xml_escape(std::string_view s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '&':
        o += "&amp;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

// The bar colour of a policy, and the legend's classes in that order.
inline const char* bar_color(std::string_view name) {
  if (name == "oracle" || name == "sticky") return "#999999";
  if (name.rfind("least_prefill", 0) == 0) return "#d62728";
  if (name.rfind("cache_aware", 0) == 0) return "#ff7f0e";
  return "#1f77b4";
}
inline constexpr std::pair<const char*, const char*> kSvgLegend[] = {
    {"#d62728", "least_prefill"},
    {"#ff7f0e", "cache_aware"},
    {"#1f77b4", "other kvroute policies"},
    {"#999999", "references (oracle, sticky)"},
};

// The legend row at height y: one swatch per colour class, then the ideal
// hit rate's dashed line.
inline std::string svg_legend(int x, int y) {
  std::string s = fmt::format("<g class=\"legend\">\n");
  for (const auto& [color, label] : kSvgLegend) {
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"12\" fill=\"{}\"/>\n", x,
                     y - 10, color);
    s += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", x + 16, y, label);
    x += 24 + 7 * static_cast<int>(std::string_view(label).size());
  }
  s += fmt::format(
      "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\" "
      "stroke-dasharray=\"4,3\"/>\n",
      x, y - 4, x + 20, y - 4);
  s += fmt::format("<text x=\"{}\" y=\"{}\">ideal hit rate</text>\n</g>\n", x + 24, y);
  return s;
}

// One row of bars: the policy's hit rate at x1 and its p99 TTFT at x2
// (`w2` pixels).
inline std::string svg_row(const PolicyResult& p, int y, int x1, int x2, int label_w, int panel_w,
                           int row, double w2) {
  const char* color = bar_color(p.name);
  std::string s = fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n",
                              label_w - 8, y + 14, xml_escape(p.name));
  const double w1 = std::clamp(p.hit_rate, 0.0, 1.0) * panel_w;
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>\n", x1,
                   y + 2, w1, row - 6, color);
  s += fmt::format("<text x=\"{:.1f}\" y=\"{}\">{:.3f}</text>\n", x1 + w1 + 4, y + 14, p.hit_rate);
  s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>\n", x2,
                   y + 2, w2, row - 6, color);
  s += fmt::format("<text x=\"{:.1f}\" y=\"{}\">{:.2f}</text>\n", x2 + w2 + 4, y + 14, p.ttft_p99);
  return s;
}

// Two horizontal bar panels: hit rate (with the ideal as a line) and p99
// TTFT (log scale), one row per policy, and a legend of the colours.
inline std::string svg(const Report& r) {
  const int row = 22, top = 56, label_w = 190, panel_w = 300, gap = 60;
  const int n = static_cast<int>(r.policies.size());
  const int width = label_w + 2 * panel_w + gap + 80;
  const int height = top + n * row + 64;
  double max_p99 = 0.001, min_p99 = 1e9;
  for (const PolicyResult& p : r.policies) {
    max_p99 = std::max(max_p99, p.ttft_p99);
    min_p99 = std::min(min_p99, std::max(p.ttft_p99, 0.001));
  }
  const double lo = std::log10(std::max(min_p99 / 2, 0.001));
  const double hi = std::log10(max_p99 * 1.2);
  auto px_p99 = [&](double v) {
    const double x = (std::log10(std::max(v, 0.001)) - lo) / std::max(hi - lo, 1e-9);
    return std::clamp(x, 0.0, 1.0) * panel_w;
  };
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" "
      "fill=\"white\"/>\n",
      width, height);
  s += fmt::format(
      "<text x=\"10\" y=\"20\" font-size=\"14\" font-weight=\"bold\">{} ({} "
      "requests, {} servers)</text>\n",
      xml_escape(r.trace), r.requests, r.servers);
  const int x1 = label_w, x2 = label_w + panel_w + gap;
  s += fmt::format(
      "<text x=\"{}\" y=\"44\">server-side token hit rate (line: ideal {:.3f})</text>\n", x1,
      r.ideal_hit_rate);
  s += fmt::format("<text x=\"{}\" y=\"44\">p99 TTFT, s (log scale)</text>\n", x2);
  for (int i = 0; i < n; ++i) {
    const PolicyResult& p = r.policies[static_cast<std::size_t>(i)];
    s += svg_row(p, top + i * row, x1, x2, label_w, panel_w, row, px_p99(p.ttft_p99));
  }
  const double ix = x1 + std::clamp(r.ideal_hit_rate, 0.0, 1.0) * panel_w;
  s += fmt::format(
      "<line x1=\"{:.1f}\" y1=\"{}\" x2=\"{:.1f}\" y2=\"{}\" stroke=\"black\" "
      "stroke-dasharray=\"4,3\"/>\n",
      ix, top - 4, ix, top + n * row);
  s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", x1,
                   top - 4, x1, top + n * row);
  s += fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"black\"/>\n", x2,
                   top - 4, x2, top + n * row);
  s += svg_legend(10, top + n * row + 34);
  s += "</svg>\n";
  return s;
}

}  // namespace kvsim

#endif  // KVROUTE_EXAMPLES_SIM_REPORT_HPP_
