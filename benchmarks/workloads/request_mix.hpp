// Benchmark workload: a fixed request mix for select_worker (fixed seed):
// chat-like text over a few shared system prompts, a third with token ids,
// and routing keys / implicit keys on some requests.
#ifndef KVROUTE_BENCHMARKS_WORKLOADS_REQUEST_MIX_HPP_
#define KVROUTE_BENCHMARKS_WORKLOADS_REQUEST_MIX_HPP_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kvroute/detail/rng.hpp"
#include "kvroute/request.hpp"

namespace kvbench {

class RequestMix {
 public:
  static const RequestMix& standard() {
    static const RequestMix mix(4096, 42);
    return mix;
  }

  RequestMix(std::size_t n, std::uint64_t seed) {
    kvroute::detail::SharedRng rng(seed);
    const std::string system[] = {
        std::string(1500, 's') + "You are a helpful assistant.",
        std::string(800, 'c') + "You write C++ code.",
        std::string(2500, 'r') + "You answer questions about the attached report."};
    items_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      Item& it = items_[i];
      it.text = system[rng.below(3)] + " user " + std::to_string(rng.below(200)) +
                std::string(50 + rng.below(1500), static_cast<char>('a' + rng.below(26)));
      if (i % 3 == 0) {
        for (int t = 0; t < 600; ++t) {
          it.tokens.push_back(static_cast<std::uint32_t>(rng.below(100000)));
        }
      }
      if (i % 4 == 1) it.header = {"x-smg-routing-key", "user-" + std::to_string(rng.below(500))};
      if (i % 4 == 2) it.header = {"authorization", "Bearer " + std::to_string(rng.below(500))};
      it.view = {it.header.first, it.header.second};
    }
  }

  std::size_t size() const noexcept { return items_.size(); }

  // The i-th request, cycling over the mix.
  kvroute::RequestView view(std::size_t i) const {
    const Item& it = items_[i % items_.size()];
    kvroute::RequestView r{.text = it.text, .tokens = it.tokens};
    if (!it.header.first.empty()) r.headers = {&it.view, 1};
    return r;
  }

 private:
  struct Item {
    std::string text;
    std::vector<std::uint32_t> tokens;
    std::pair<std::string, std::string> header;
    kvroute::Header view;
  };
  std::vector<Item> items_;
};

}  // namespace kvbench

#endif  // KVROUTE_BENCHMARKS_WORKLOADS_REQUEST_MIX_HPP_
