#include "kvroute/worker_set.hpp"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using kvroute::WorkerId;
using kvroute::WorkerSet;

TEST_CASE("worker_set: ids are stable, increasing and never reused", "[worker_set]") {
  WorkerSet ws;
  auto a = ws.add({.url = "http://a"});
  auto b = ws.add({.url = "http://b"});
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->value == 0);
  CHECK(b->value == 1);
  REQUIRE(ws.remove(*a).ok());
  auto c = ws.add({.url = "http://a"});  // same URL again: a new identity
  REQUIRE(c.ok());
  CHECK(c->value == 2);
  auto snap = ws.snapshot();
  CHECK(snap->find(*a) == nullptr);
  REQUIRE(snap->find(*c) != nullptr);
  CHECK(snap->find(*c)->url == "http://a");
  CHECK(snap->find_url("http://b")->id == *b);
}

TEST_CASE("worker_set: bad workers are rejected with the field and value", "[worker_set]") {
  WorkerSet ws;
  auto empty = ws.add({.url = ""});
  CHECK(empty.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(empty.status().message()), Catch::Contains("worker url"));

  auto ctl = ws.add({.url = "http://a\nb"});
  CHECK(ctl.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK_THAT(std::string(ctl.status().message()), Catch::Contains("http://a\\nb"));

  auto space = ws.add({.url = "http://a b"});
  CHECK(space.status().code() == absl::StatusCode::kInvalidArgument);

  auto huge = ws.add({.url = std::string(5000, 'x')});
  CHECK_THAT(std::string(huge.status().message()), Catch::Contains("5000"));

  auto model = ws.add({.url = "http://m", .model = std::string("a\0b", 3)});
  CHECK_THAT(std::string(model.status().message()), Catch::Contains("worker model"));

  REQUIRE(ws.add({.url = "http://a"}).ok());
  auto dup = ws.add({.url = "http://a"});
  CHECK(dup.status().code() == absl::StatusCode::kAlreadyExists);
  CHECK_THAT(std::string(dup.status().message()),
             Catch::Contains("http://a") && Catch::Contains("worker 0"));

  // Nothing was lost: the one good worker is still the only one.
  CHECK(ws.snapshot()->size() == 1);
}

TEST_CASE("worker_set: a batch add is all or nothing", "[worker_set]") {
  WorkerSet ws;
  std::vector<kvroute::WorkerSpec> specs = {
      {.url = "http://a"}, {.url = "http://b"}, {.url = "http://a"}};
  auto r = ws.add(specs);
  CHECK(r.status().code() == absl::StatusCode::kAlreadyExists);
  CHECK(ws.snapshot()->empty());
  specs.pop_back();
  r = ws.add(specs);
  REQUIRE(r.ok());
  CHECK(r->size() == 2);
  CHECK(ws.snapshot()->size() == 2);
}

TEST_CASE("worker_set: unknown ids are NotFound, and change nothing", "[worker_set]") {
  WorkerSet ws;
  REQUIRE(ws.add({.url = "http://a"}).ok());
  const auto gen = ws.snapshot()->generation();
  CHECK(ws.remove(WorkerId{7}).code() == absl::StatusCode::kNotFound);
  CHECK(ws.set_healthy(WorkerId{7}, false).code() == absl::StatusCode::kNotFound);
  CHECK_THAT(std::string(ws.remove(WorkerId{7}).message()), Catch::Contains("7"));
  CHECK(ws.remove(WorkerId{}).code() == absl::StatusCode::kNotFound);
  CHECK(ws.snapshot()->generation() == gen);
}

TEST_CASE("worker_set: snapshots are immutable views", "[worker_set]") {
  WorkerSet ws;
  auto a = *ws.add({.url = "http://a"});
  auto before = ws.snapshot();
  REQUIRE(ws.set_healthy(a, false).ok());
  REQUIRE(ws.add({.url = "http://b"}).ok());
  CHECK(before->size() == 1);
  CHECK(before->find(a)->healthy);
  auto after = ws.snapshot();
  CHECK(after->size() == 2);
  CHECK_FALSE(after->find(a)->healthy);
  CHECK(after->generation() > before->generation());
}

TEST_CASE("worker_set: model groups include model-less workers", "[worker_set]") {
  WorkerSet ws;
  auto any = *ws.add({.url = "http://any"});
  auto l1 = *ws.add({.url = "http://llama1", .model = "llama"});
  auto q1 = *ws.add({.url = "http://qwen1", .model = "qwen"});
  auto l2 = *ws.add({.url = "http://llama2", .model = "llama", .healthy = false});
  auto snap = ws.snapshot();

  auto ids = [](const kvroute::ModelGroup& g) {
    std::vector<std::uint32_t> v;
    for (auto* w : g.members()) v.push_back(w->id.value);
    return v;
  };
  CHECK(ids(snap->group("")) ==
        std::vector<std::uint32_t>{any.value, l1.value, q1.value, l2.value});
  CHECK(ids(snap->group("llama")) == std::vector<std::uint32_t>{any.value, l1.value, l2.value});
  CHECK(snap->group("llama").available().size() == 2);
  CHECK(ids(snap->group("qwen")) == std::vector<std::uint32_t>{any.value, q1.value});
  // A model nobody declared is served by the model-less workers alone.
  CHECK(ids(snap->group("mistral")) == std::vector<std::uint32_t>{any.value});
  CHECK(snap->group("llama").model() == "llama");
}

TEST_CASE("worker_set: membership version and ring survive health flips", "[worker_set]") {
  WorkerSet ws;
  auto a = *ws.add({.url = "http://a"});
  REQUIRE(ws.add({.url = "http://b"}).ok());
  auto s1 = ws.snapshot();
  const auto* ring1 = &s1->group("").ring();
  REQUIRE(ws.set_healthy(a, false).ok());
  auto s2 = ws.snapshot();
  CHECK(s2->group("").membership_version() == s1->group("").membership_version());
  CHECK(&s2->group("").ring() == ring1);  // not rebuilt
  REQUIRE(ws.add({.url = "http://c"}).ok());
  auto s3 = ws.snapshot();
  CHECK(s3->group("").membership_version() != s1->group("").membership_version());
  CHECK(s3->group("").ring().size() == 3u * kvroute::detail::HashRing::kVirtualNodes);
}

TEST_CASE("worker_set: 100000 workers in one batch", "[worker_set]") {
  WorkerSet ws;
  std::vector<kvroute::WorkerSpec> specs;
  specs.reserve(100000);
  for (int i = 0; i < 100000; ++i) {
    specs.push_back({.url = "http://10.1." + std::to_string(i / 250) + "." +
                            std::to_string(i % 250) + ":30000"});
  }
  auto ids = ws.add(specs);
  REQUIRE(ids.ok());
  auto snap = ws.snapshot();
  CHECK(snap->size() == 100000);
  CHECK(snap->group("").available().size() == 100000);
  CHECK(snap->find(WorkerId{99999})->url == specs.back().url);
  CHECK(snap->find_url(specs[1234].url)->id == WorkerId{1234});
}

TEST_CASE("worker_set: an open circuit holds a healthy worker out of selection", "[worker_set]") {
  WorkerSet ws;
  auto a = *ws.add({.url = "http://a"});
  auto b = *ws.add({.url = "http://b"});
  REQUIRE(ws.set_circuit_open(a, true).ok());
  auto snap = ws.snapshot();
  CHECK(snap->find(a)->healthy);
  CHECK_FALSE(snap->find(a)->available());
  REQUIRE(snap->group("").available().size() == 1);
  CHECK(snap->group("").available()[0]->id == b);
  // Health and circuit are independent: a health flip does not close it.
  REQUIRE(ws.set_healthy(a, false).ok());
  REQUIRE(ws.set_healthy(a, true).ok());
  CHECK_FALSE(ws.snapshot()->find(a)->available());
  REQUIRE(ws.set_circuit_open(a, false).ok());
  CHECK(ws.snapshot()->find(a)->available());
  CHECK(ws.set_circuit_open(WorkerId{9}, true).code() == absl::StatusCode::kNotFound);
}
