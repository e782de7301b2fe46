// Prints a sample of kvroute's rendered metrics, for `promtool check metrics`.
#include <cstdio>

#include "support/metrics_fixture.hpp"

int main() {
  const std::string text = kvtest::render_sample_metrics();
  std::fwrite(text.data(), 1, text.size(), stdout);
  return 0;
}
