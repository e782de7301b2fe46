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

#include "sim/simulator.hpp"

namespace kvsim {

struct Report {
  std::string trace;
  int servers = 0;
  std::size_t requests = 0;
  double ideal_hit_rate = 0;
  std::vector<PolicyResult> policies;
};

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

inline std::string table(const Report& r) {
  std::string out = fmt::format(
      "trace {}: {} requests, {} servers, ideal hit rate (one infinite cache) {:.3f}\n\n", r.trace,
      r.requests, r.servers, r.ideal_hit_rate);
  out += fmt::format("{:<25} {:>6} {:>9} {:>9} {:>9} {:>6} {:>9} {:>9}  {}\n", "policy", "hit",
                     "ttft_mean", "ttft_p50", "ttft_p99", "imbal", "sel_us", "sel_p99", "branches");
  for (const PolicyResult& p : r.policies) {
    out += fmt::format(
        "{:<25} {:>6.3f} {:>8.3f}s {:>8.3f}s {:>8.3f}s {:>6.2f} {:>9.2f} {:>9.2f}  {}\n", p.name,
        p.hit_rate, p.ttft_mean, p.ttft_p50, p.ttft_p99, p.imbalance, p.select_us_mean,
        p.select_us_p99, branches_text(p));
  }
  return out;
}

// Keys in the documented order.
inline nlohmann::ordered_json to_json(const Report& r) {
  nlohmann::ordered_json j;
  j["trace"] = r.trace;
  j["servers"] = r.servers;
  j["ideal_hit_rate"] = r.ideal_hit_rate;
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
                             {"branches", b}});
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

// Two horizontal bar panels: hit rate (with the ideal as a line) and p99
// TTFT (log scale), one row per policy.
inline std::string svg(const Report& r) {
  const int row = 22, top = 56, label_w = 190, panel_w = 300, gap = 60;
  const int n = static_cast<int>(r.policies.size());
  const int width = label_w + 2 * panel_w + gap + 80;
  const int height = top + n * row + 40;
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
    const int y = top + i * row;
    const bool ref = p.name == "oracle" || p.name == "sticky";
    const char* color = ref ? "#999999"
                            : (p.name.rfind("least_prefill", 0) == 0 ? "#d62728"
                               : p.name.rfind("cache_aware", 0) == 0 ? "#ff7f0e"
                                                                     : "#1f77b4");
    s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", label_w - 8, y + 14,
                     xml_escape(p.name));
    const double w1 = std::clamp(p.hit_rate, 0.0, 1.0) * panel_w;
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>\n", x1,
                     y + 2, w1, row - 6, color);
    s +=
        fmt::format("<text x=\"{:.1f}\" y=\"{}\">{:.3f}</text>\n", x1 + w1 + 4, y + 14, p.hit_rate);
    const double w2 = px_p99(p.ttft_p99);
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{:.1f}\" height=\"{}\" fill=\"{}\"/>\n", x2,
                     y + 2, w2, row - 6, color);
    s +=
        fmt::format("<text x=\"{:.1f}\" y=\"{}\">{:.2f}</text>\n", x2 + w2 + 4, y + 14, p.ttft_p99);
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
  s += "</svg>\n";
  return s;
}

}  // namespace kvsim

#endif  // KVROUTE_EXAMPLES_SIM_REPORT_HPP_
