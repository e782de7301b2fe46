// Test support: a fixed, varied request mix (text with shared prefixes, token
// ids, routing keys, implicit keys) so that every branch of every policy runs.
#ifndef KVROUTE_TESTS_SUPPORT_REQUESTS_HPP_
#define KVROUTE_TESTS_SUPPORT_REQUESTS_HPP_

#include <cstdint>
#include <string>
#include <vector>

#include "kvroute/detail/rng.hpp"
#include "kvroute/request.hpp"

namespace kvtest {

// Owns the bytes; view(i) gives the i-th request.
class RequestMix {
 public:
  explicit RequestMix(std::size_t n, std::uint64_t seed = 1) {
    kvroute::detail::SharedRng rng(seed);
    const std::vector<std::string> prefixes = {
        "You are a helpful assistant. ", "System: answer in French. ",
        "<|im_start|>system\nYou write code.<|im_end|>\n", "你好，请用中文回答。", ""};
    for (std::size_t i = 0; i < n; ++i) {
      Item it;
      it.text = prefixes[rng.below(prefixes.size())] + "question " + std::to_string(rng.below(40)) +
                std::string(rng.below(300), 'x');
      if (rng.below(3) == 0) {
        for (std::uint64_t t = 0, len = rng.below(400); t < len; ++t) {
          it.tokens.push_back(static_cast<std::uint32_t>(rng.below(50000)));
        }
      }
      switch (rng.below(5)) {
        case 0:
          it.headers.push_back({"x-smg-routing-key", "user-" + std::to_string(rng.below(30))});
          break;
        case 1:
          it.headers.push_back({"Authorization", "Bearer k" + std::to_string(rng.below(30))});
          break;
        case 2:
          it.headers.push_back({"cookie", "session=" + std::to_string(rng.below(30))});
          break;
        case 3:
          it.headers.push_back({"x-smg-routing-key", ""});
          break;
        default:
          break;
      }
      items_.push_back(std::move(it));
    }
    for (auto& it : items_) {
      for (auto& [k, v] : it.headers) it.views.push_back({k, v});
    }
  }
  std::size_t size() const { return items_.size(); }
  kvroute::RequestView view(std::size_t i, std::string_view model = "") const {
    const Item& it = items_[i % items_.size()];
    return {.text = it.text, .tokens = it.tokens, .headers = it.views, .model = model};
  }

 private:
  struct Item {
    std::string text;
    std::vector<std::uint32_t> tokens;
    std::vector<std::pair<std::string, std::string>> headers;
    std::vector<kvroute::Header> views;
  };
  std::vector<Item> items_;
};

}  // namespace kvtest

#endif  // KVROUTE_TESTS_SUPPORT_REQUESTS_HPP_
