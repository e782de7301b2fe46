#include "kvroute/request.hpp"

#include <catch2/catch.hpp>
#include <string>

TEST_CASE("request: header lookup is case-insensitive; absent differs from empty", "[request]") {
  const kvroute::Header h[] = {{"X-SMG-Routing-Key", "user-42"}, {"cookie", ""}};
  const kvroute::RequestView r{.headers = h};
  CHECK(r.header("x-smg-routing-key") == "user-42");
  CHECK(r.header("COOKIE") == "");
  CHECK_FALSE(r.header("authorization").has_value());
}

TEST_CASE("request: HeaderList owns headers built from temporaries", "[request]") {
  kvroute::HeaderList list;
  for (int i = 0; i < 100; ++i) {
    // Each name and value is a temporary gone after this statement.
    list.add("x-h" + std::to_string(i), std::string(40, static_cast<char>('a' + i % 26)));
  }
  list.add("X-SMG-Routing-Key", std::to_string(1234567));
  CHECK(list.size() == 101);
  const kvroute::RequestView r{.headers = list.view()};
  CHECK(r.header("x-smg-routing-key") == "1234567");
  CHECK(r.header("x-h0") == std::string(40, 'a'));
  CHECK(r.header("x-h99") == std::string(40, static_cast<char>('a' + 99 % 26)));
  // A moved list keeps its headers where they were.
  kvroute::HeaderList moved = std::move(list);
  CHECK(kvroute::RequestView{.headers = moved.view()}.header("x-h50") ==
        std::string(40, static_cast<char>('a' + 50 % 26)));
}
