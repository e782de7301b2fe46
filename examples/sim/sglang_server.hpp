// kvroute_sim: one server running SGLang's scheduler, event by event.
//
// What it models (sources in examples/sim/README.md, "Server model"):
//
// - One KV pool of cache_tokens per server, shared by the radix cache and
//   the running requests. A waiting request is admitted, first come first
//   served, only when its uncached prompt tokens and its output tokens fit
//   in the pool after evicting unpinned cache (least recently used first);
//   otherwise it and everything behind it wait. An admitted request pins
//   its cached prefix; its own blocks enter the cache, pinned, as its
//   prefill computes them (whole blocks after each chunk, the rest when
//   its prefill ends).
// - Continuous batching with prefill first: every step is either one
//   prefill batch of at most chunked_prefill_size new tokens (the oldest
//   unfinished prefill continues first, then admitted requests in order;
//   the last one may be cut into chunks) or one decode step over every
//   running request. Step times follow SglangModel.
// - The first token comes with the end of a request's last prefill chunk;
//   it then decodes its remaining output tokens one step at a time.
// - When a request finishes, its prompt and generated tokens stay in the
//   cache, unpinned: the generated ones under the block ids of the
//   session's next request when that request continues this one (its
//   prompt is this prompt plus the answer plus a new turn), else as one
//   block no later prompt shares.
//
// Decode steps are not simulated one by one: a run of decode steps lasts
// until the first running request finishes, and an arrival cuts the run at
// the end of the step in flight.
//
// Thread-compatible; driven by the simulation loop (sglang_sim.hpp), which
// calls step_end() at the time next_event() names.
#ifndef KVROUTE_EXAMPLES_SIM_SGLANG_SERVER_HPP_
#define KVROUTE_EXAMPLES_SIM_SGLANG_SERVER_HPP_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <deque>
#include <limits>
#include <unordered_map>
#include <vector>

#include "sim/config.hpp"
#include "sim/server.hpp"
#include "sim/trace.hpp"

namespace kvsim {

// Per block id: how many requests not yet sent will use it (the oracle's
// knowledge of the future, kept by the simulation loop).
using BlockUses = std::unordered_map<std::uint64_t, std::int32_t>;

class SglangServer {
 public:
  static constexpr double kIdle = std::numeric_limits<double>::infinity();
  // Names the block of an answer no later prompt shares.
  static constexpr std::uint64_t kAnswerTag = 0xA25E'0000'0000'0000ull;

  // What a step's end produced, for the simulation loop.
  struct Done {
    std::vector<std::size_t> first_token;  // requests whose first token came
    std::vector<std::size_t> finished;     // requests whose response ended
  };

  SglangServer(const Trace& tr, const SglangModel& m, std::int64_t pool)
      : tr_(tr), m_(m), pool_(pool), cache_(pool) {}

  // True if request j can ever run here (its prompt and output fit the pool).
  bool fits(std::size_t j) const {
    const SimRequest& r = tr_.requests[j];
    return r.input_tokens + r.output_tokens <= pool_;
  }

  // Request j arrives at `now` (fits(j)). Returns true when the time of the
  // next event changed (then a new event must be scheduled).
  bool arrive(std::size_t j, double now) {
    Job& job = jobs_[j];
    job = Job{};
    waiting_.push_back(j);
    job.est = estimate(tr_.requests[j]);
    add_pending(tr_.requests[j], +1);
    queued_s_ += job.est.seconds;
    queued_need_ += job.est.need;
    ++in_flight_;
    if (kind_ == Kind::kIdle) return start(now);
    if (kind_ == Kind::kDecode) return cut_decode(now);
    return false;
  }

  // The end of the current step: applies it and starts the next one.
  void step_end(double now, Done& out) {
    if (kind_ == Kind::kPrefill) {
      end_prefill(out);
    } else if (kind_ == Kind::kDecode) {
      end_decode(out);
    }
    kind_ = Kind::kIdle;
    start(now);
  }

  double next_event() const noexcept { return kind_ == Kind::kIdle ? kIdle : end_; }
  // Bumped whenever next_event() changes, so that stale events are ignored.
  std::uint64_t generation() const noexcept { return gen_; }

  std::int64_t cached(std::size_t j) const { return jobs_.at(j).cached; }
  std::int64_t in_flight() const noexcept { return in_flight_; }
  std::int64_t prefilled() const noexcept { return prefilled_; }
  const PrefixCache& cache() const noexcept { return cache_; }
  std::int64_t reserved() const noexcept { return reserved_; }

  // The server model's prediction of r's time to first token if it arrived
  // now: the step in flight, the prefill work queued ahead (waiting
  // requests' uncached tokens as estimated on arrival, and the rest of a
  // chunked prefill), r's own prefill over the prefix this server holds or
  // will hold once the requests queued here have prefilled, and when r
  // would not fit the pool behind them, the decode time until enough
  // running requests have finished.
  double predict_ttft(const SimRequest& r, double now) const { return predict(r, now).ttft; }

  // The oracle's cost of sending r here: its predicted time to first token
  // plus the delay its prefill adds to the requests that will queue behind
  // it, as many (Little's law) as are waiting here now; and, given the
  // future's block uses, the prefill of the cached tokens that later
  // requests will use and that r's admission would evict. Without that
  // last term a greedy reference thrashes small pools: each placement is
  // cheapest where it pushes out the next turn of another session.
  double oracle_cost(const SimRequest& r, double now, const BlockUses* future) const {
    const Prediction p = predict(r, now);
    double cost = p.ttft + p.prefill * static_cast<double>(waiting_.size());
    if (future != nullptr) cost += m_.prefill_alone(evicted_in_use(r, p.need, *future), 0);
    return cost;
  }

 private:
  enum class Kind { kIdle, kPrefill, kDecode };

  struct Estimate {
    std::int64_t need = 0;  // pool tokens it would reserve
    double seconds = 0;     // its prefill alone
  };
  struct Job {
    std::int64_t cached = 0;           // prefix tokens matched at admission
    std::int64_t done = 0;             // context tokens computed (cached + prefilled)
    std::size_t pinned = 0;            // leading blocks it pins
    std::int64_t reserved = 0;         // pool tokens reserved and not yet in the cache
    std::int64_t prompt_reserved = 0;  // of which for its prompt
    std::uint64_t end_step = 0;        // decode step count at which it finishes
    Estimate est;                      // at arrival, for the oracle
  };
  struct Slice {
    std::size_t job;
    std::int64_t tokens;
  };

  struct Prediction {
    double ttft = 0;
    double prefill = 0;     // r's own prefill
    std::int64_t need = 0;  // pool tokens r would reserve
  };
  Prediction predict(const SimRequest& r, double now) const {
    double t = 0;
    if (kind_ == Kind::kPrefill) {
      t += std::max(0.0, end_ - now);
      for (const Slice& s : batch_) {  // the rest of a request cut by this step
        const Job& job = jobs_.at(s.job);
        const std::int64_t done = job.done + s.tokens;
        t += m_.prefill_alone(tr_.requests[s.job].input_tokens - done, done);
      }
    }
    if (kind_ == Kind::kDecode) t += std::max(0.0, decode_boundary_after(now) - now);
    t += queued_s_;
    const Estimate e = estimate(r);
    t += e.seconds;
    const std::int64_t free = pool_ - cache_.pinned() - reserved_ - queued_need_;
    if (e.need > free) t += memory_wait(e.need - free);
    return {t, e.seconds, e.need};
  }

  // Tokens that admitting r (needing `need` pool tokens) would evict and
  // that requests not yet sent will use: the least recently used unpinned
  // blocks past those the requests queued ahead will evict first, less
  // the blocks r or they will pin.
  std::int64_t evicted_in_use(const SimRequest& r, std::int64_t need,
                              const BlockUses& future) const {
    const std::int64_t ahead = cache_.used() + reserved_ + queued_need_ - pool_;
    std::int64_t skip = std::max<std::int64_t>(0, ahead);
    std::int64_t take = std::max<std::int64_t>(0, ahead + need) - skip;
    if (take <= 0) return 0;
    const std::size_t own = cache_.match(r).blocks;
    std::int64_t in_use = 0;
    cache_.for_each_evictable([&](std::uint64_t b, std::int64_t tokens) {
      if (pending_.count(b) != 0 ||
          std::find(r.blocks.begin(), r.blocks.begin() + static_cast<std::ptrdiff_t>(own), b) !=
              r.blocks.begin() + static_cast<std::ptrdiff_t>(own)) {
        return true;  // pinned before it could be evicted
      }
      if (skip > 0) {
        skip -= tokens;
        return true;
      }
      if (future.count(b) != 0) in_use += tokens;
      take -= tokens;
      return take > 0;
    });
    return in_use;
  }

  // The prefix of r this server holds or will hold once the requests
  // queued here have prefilled (at most all but r's last token, as SGLang
  // always computes one), and what r would then cost.
  Estimate estimate(const SimRequest& r) const {
    std::int64_t cached = 0;
    for (std::size_t k = 0; k < r.blocks.size(); ++k) {
      const std::int64_t need = r.block_tokens(k);
      const std::int64_t have =
          pending_.count(r.blocks[k]) != 0 ? need : cache_.tokens_of(r.blocks[k]);
      cached += std::min(have, need);
      if (have < need) break;
    }
    cached = std::max<std::int64_t>(0, std::min(cached, r.input_tokens - 1));
    const std::int64_t uncached = r.input_tokens - cached;
    return {uncached + r.output_tokens, m_.prefill_alone(uncached, cached)};
  }

  void add_pending(const SimRequest& r, int delta) {
    for (std::uint64_t b : r.blocks) {
      int& c = pending_[b];
      c += delta;
      if (c == 0) pending_.erase(b);
    }
  }

  // Admits waiting request j if its tokens fit: matches and pins its
  // prefix, reserves its uncached prompt and output tokens, evicts.
  bool admit(std::size_t j) {
    const SimRequest& r = tr_.requests[j];
    Job& job = jobs_[j];
    const PrefixCache::Match m = cache_.match(r);
    cache_.pin(r, m.blocks);
    job.cached = std::max<std::int64_t>(0, std::min(m.tokens, r.input_tokens - 1));
    const std::int64_t need = r.input_tokens - job.cached + r.output_tokens;
    if (need + cache_.pinned() + reserved_ > pool_) {
      cache_.unpin(r, m.blocks);
      return false;
    }
    job.pinned = m.blocks;
    job.done = job.cached;
    job.reserved = need;
    job.prompt_reserved = r.input_tokens - job.cached;
    reserved_ += need;
    cache_.evict_to(pool_ - reserved_);
    queued_s_ -= job.est.seconds;
    queued_need_ -= job.est.need;
    return true;
  }

  bool start(double now) {
    if (start_prefill(now) || start_decode(now)) return true;
    kind_ = Kind::kIdle;
    ++gen_;
    return true;
  }

  // One prefill batch: the chunked request first, then admitted ones.
  bool start_prefill(double now) {
    batch_.clear();
    std::int64_t budget = m_.chunked_prefill_size;
    std::int64_t tokens = 0;
    double pairs = 0;
    auto take = [&](std::size_t j) {
      const Job& job = jobs_[j];
      const std::int64_t n = std::min(budget, tr_.requests[j].input_tokens - job.done);
      batch_.push_back({j, n});
      tokens += n;
      pairs +=
          static_cast<double>(n) * (static_cast<double>(job.done) + static_cast<double>(n) / 2);
      budget -= n;
    };
    if (chunked_ != kNoRequest) take(chunked_);
    while (budget > 0 && !waiting_.empty() && admit(waiting_.front())) {
      take(waiting_.front());
      waiting_.pop_front();
    }
    if (batch_.empty()) return false;
    kind_ = Kind::kPrefill;
    end_ = now + m_.prefill_step(tokens, pairs);
    ++gen_;
    return true;
  }

  void end_prefill(Done& out) {
    chunked_ = kNoRequest;
    for (const Slice& s : batch_) {
      const SimRequest& r = tr_.requests[s.job];
      Job& job = jobs_[s.job];
      job.done += s.tokens;
      prefilled_ += s.tokens;
      if (job.done < r.input_tokens) {
        // As SGLang caches a chunked request's computed prefix: the blocks
        // it has computed enter the cache, pinned.
        insert_prompt(s.job, static_cast<std::size_t>(job.done / kBlockTokens));
        chunked_ = s.job;
        continue;
      }
      // Prefill done: its blocks enter the cache, pinned, and its first
      // token is out.
      insert_prompt(s.job, r.blocks.size());
      add_pending(r, -1);
      out.first_token.push_back(s.job);
      if (r.output_tokens <= 1) {
        finish(s.job, out);
      } else {
        job.end_step = steps_ + static_cast<std::uint64_t>(r.output_tokens - 1);
        running_.push_back(s.job);
        context_ += r.input_tokens + 1;
      }
    }
  }

  // Holds job j's prompt blocks before block `to`, pinned, returning what
  // they take from its reservation (all that is left of the prompt's, once
  // the prompt is complete).
  void insert_prompt(std::size_t j, std::size_t to) {
    const SimRequest& r = tr_.requests[j];
    Job& job = jobs_[j];
    if (to <= job.pinned) return;
    std::int64_t tokens = 0;
    for (std::size_t k = job.pinned; k < to; ++k) tokens += r.block_tokens(k);
    cache_.hold(r, job.pinned, to);
    job.pinned = to;
    const std::int64_t freed =
        to == r.blocks.size() ? job.prompt_reserved : std::min(tokens, job.prompt_reserved);
    job.prompt_reserved -= freed;
    job.reserved -= freed;
    reserved_ -= freed;
    cache_.evict_to(pool_ - reserved_);
  }

  // Decode until the first running request finishes.
  bool start_decode(double now) {
    if (running_.empty()) return false;
    std::uint64_t first = std::numeric_limits<std::uint64_t>::max();
    for (std::size_t j : running_) first = std::min(first, jobs_[j].end_step);
    run_steps_ = first - steps_;
    run_start_ = now;
    kind_ = Kind::kDecode;
    end_ = now + decode_time(run_steps_);
    ++gen_;
    return true;
  }

  // Time of the current run's first k decode steps: the context grows by
  // one token per running request per step.
  double decode_time(std::uint64_t k) const {
    const auto b = static_cast<std::int64_t>(running_.size());
    const double kd = static_cast<double>(k);
    return kd * m_.decode_step(b, context_) +
           m_.decode_ctx_s * static_cast<double>(b) * kd * (kd - 1) / 2;
  }

  // Steps of the current run complete by `now`, plus the one in flight.
  std::uint64_t decode_steps_by(double now) const {
    const double elapsed = now - run_start_;
    const double a = m_.decode_ctx_s * static_cast<double>(running_.size()) / 2;
    const double b = m_.decode_step(static_cast<std::int64_t>(running_.size()), context_) - a;
    double k = a > 0 ? (-b + std::sqrt(b * b + 4 * a * elapsed)) / (2 * a) : elapsed / b;
    auto steps = static_cast<std::uint64_t>(std::max(1.0, std::ceil(k)));
    while (steps > 1 && decode_time(steps - 1) >= elapsed) --steps;
    while (decode_time(steps) < elapsed) ++steps;
    return std::min(steps, run_steps_);
  }

  double decode_boundary_after(double now) const {
    return run_start_ + decode_time(decode_steps_by(now));
  }

  // An arrival during a decode run: the run ends with the step in flight.
  bool cut_decode(double now) {
    const std::uint64_t k = decode_steps_by(now);
    if (k >= run_steps_) return false;
    run_steps_ = k;
    end_ = run_start_ + decode_time(k);
    ++gen_;
    return true;
  }

  void end_decode(Done& out) {
    steps_ += run_steps_;
    context_ += static_cast<std::int64_t>(running_.size() * run_steps_);
    std::vector<std::size_t> still;
    still.reserve(running_.size());
    for (std::size_t j : running_) {
      if (jobs_[j].end_step > steps_) {
        still.push_back(j);
        continue;
      }
      context_ -= tr_.requests[j].input_tokens + tr_.requests[j].output_tokens;
      finish(j, out);
    }
    running_.swap(still);
  }

  // The response ended: generated tokens enter the cache, everything is
  // unpinned, the reservation is returned.
  void finish(std::size_t j, Done& out) {
    const SimRequest& r = tr_.requests[j];
    Job& job = jobs_[j];
    cache_generated(j);
    cache_.unpin(r, job.pinned);
    reserved_ -= job.reserved;
    job.reserved = 0;
    cache_.evict_to(pool_ - reserved_);
    --in_flight_;
    out.finished.push_back(j);
  }

  // Request j's generated tokens, deepest first so that its prefix stays
  // more recent than they are.
  void cache_generated(std::size_t j) {
    const SimRequest& r = tr_.requests[j];
    const std::size_t full = static_cast<std::size_t>(r.input_tokens / kBlockTokens);
    const std::size_t nx = tr_.next_in_session.empty() ? kNoRequest : tr_.next_in_session[j];
    const SimRequest* next = nx == kNoRequest ? nullptr : &tr_.requests[nx];
    const bool continues = next != nullptr && next->blocks.size() > full &&
                           (full == 0 || next->blocks[full - 1] == r.blocks[full - 1]);
    if (!continues) {
      cache_.put(chain(r.blocks.empty() ? 0 : r.blocks.back(), kAnswerTag ^ j), r.output_tokens);
      return;
    }
    const std::int64_t end = r.input_tokens + r.output_tokens;
    for (std::size_t k = next->blocks.size(); k-- > full;) {
      const std::int64_t tokens =
          std::min(end - static_cast<std::int64_t>(k) * kBlockTokens, next->block_tokens(k));
      if (tokens > 0) cache_.put(next->blocks[k], tokens);
    }
  }

  // Decode time until running requests holding `tokens` pool tokens have
  // finished (their prompts become evictable, their reservations free).
  double memory_wait(std::int64_t tokens) const {
    std::vector<std::pair<std::uint64_t, std::int64_t>> ends;
    ends.reserve(running_.size());
    for (std::size_t j : running_) {
      const SimRequest& r = tr_.requests[j];
      ends.emplace_back(jobs_.at(j).end_step, r.input_tokens + jobs_.at(j).reserved);
    }
    std::sort(ends.begin(), ends.end());
    const double step = m_.decode_step(static_cast<std::int64_t>(running_.size()), context_);
    for (const auto& [end_step, held] : ends) {
      tokens -= held;
      if (tokens <= 0) return static_cast<double>(end_step - steps_) * step;
    }
    return ends.empty() ? 0 : static_cast<double>(ends.back().first - steps_) * step;
  }

  const Trace& tr_;
  SglangModel m_;
  std::int64_t pool_;
  PrefixCache cache_;
  std::int64_t reserved_ = 0;  // admitted requests' tokens not yet in the cache
  std::unordered_map<std::size_t, Job> jobs_;
  std::deque<std::size_t> waiting_;
  std::vector<Slice> batch_;
  std::size_t chunked_ = kNoRequest;
  std::vector<std::size_t> running_;
  std::int64_t context_ = 0;  // running requests' prompt and generated tokens
  std::uint64_t steps_ = 0;   // decode steps run
  Kind kind_ = Kind::kIdle;
  double end_ = 0;  // of the current step (or decode run)
  double run_start_ = 0;
  std::uint64_t run_steps_ = 0;
  std::uint64_t gen_ = 0;
  std::int64_t in_flight_ = 0;
  std::int64_t prefilled_ = 0;
  // For the oracle: blocks the requests waiting or prefilling here will
  // insert, their prefill seconds and pool tokens as estimated on arrival.
  std::unordered_map<std::uint64_t, int> pending_;
  double queued_s_ = 0;
  std::int64_t queued_need_ = 0;
};

}  // namespace kvsim

#endif  // KVROUTE_EXAMPLES_SIM_SGLANG_SERVER_HPP_
