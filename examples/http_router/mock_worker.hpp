// -----------------------------------------------------------------------------
// File: http_router/mock_worker.hpp
// -----------------------------------------------------------------------------
//
// `kvroute_http_router --mock-worker`: a stand-in for an SGLang worker, for
// the end-to-end tests and the overhead benchmark. It serves /generate,
// /v1/chat/completions and /v1/completions (streamed as SSE when asked),
// /health and /v1/models, and keeps an exact prefix cache of the prompts it
// served: a radix tree with one tenant and a budget of --mock-cache-chars
// characters, least recently used prompts evicted beyond it (SGLang's
// RadixCache keeps its KV cache the same way). Each reply reports the
// cached prefix in SGLang's (meta_info.cached_tokens) and OpenAI's
// (usage.prompt_tokens_details.cached_tokens) fields, at 4 characters a
// token, and names the worker in X-Mock-Worker (its port).
//
// For the tests it can misbehave (--mock-mode, or POST /mock/mode with the
// mode's name as the body; flags.hpp lists the modes) and tells what it saw
// on GET /mock/stats: {"requests", "cancelled" (requests whose connection
// closed before the reply ended), "connections" (ever accepted),
// "cache_chars", "last_request_id"}. It exits at once on SIGTERM, requests
// in flight and all (a worker that dies).
//
// Thread safety: the handler runs on every lane at once; its state is
// atomics, a mutex-guarded string and the thread-safe tree.

#ifndef KVROUTE_EXAMPLES_HTTP_ROUTER_MOCK_WORKER_HPP_
#define KVROUTE_EXAMPLES_HTTP_ROUTER_MOCK_WORKER_HPP_

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "http_router/flags.hpp"
#include "http_router/session.hpp"
#include "kvroute/radix_tree.hpp"

namespace kvexample {

class MockWorker : public Handler {
 public:
  explicit MockWorker(const MockFlags& flags);
  void set_port(std::uint16_t port) { port_ = std::to_string(port); }
  // The server's counters, for /mock/stats ("connections": ever accepted).
  void set_counters(const ServerCounters* c) { counters_ = c; }
  void handle(const std::shared_ptr<Session>& session, Request req) override;

 private:
  struct Usage {
    long long prompt_tokens = 0;
    long long cached_tokens = 0;
  };

  void generate(const std::shared_ptr<Session>& s, const Request& req);
  Usage serve_from_cache(const std::string& text);
  std::string reply_body(const std::string& path, const Usage& u, bool malformed) const;
  void stream(const std::shared_ptr<Session>& s, const std::string& path, Usage u);
  void set_mode(const std::shared_ptr<Session>& s, const Request& req);
  std::string stats() const;
  Response tagged(Response res) const;

  const MockFlags flags_;
  std::string port_;
  const ServerCounters* counters_ = nullptr;
  std::atomic<MockMode> mode_;
  kvroute::ApproxRadixTree cache_;
  std::atomic<std::uint64_t> requests_{0};
  std::shared_ptr<std::atomic<std::uint64_t>> cancelled_;
  mutable std::mutex mu_;
  std::string last_request_id_;
};

}  // namespace kvexample

#endif  // KVROUTE_EXAMPLES_HTTP_ROUTER_MOCK_WORKER_HPP_
