// The workers behind the router (see fleet.hpp).
#include "http_router/fleet.hpp"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "http_router/log.hpp"

namespace kvexample {

Fleet::Fleet(kvroute::AnyPolicy policy, kvroute::CircuitBreaker::Options breaker)
    : router_(std::move(policy)), breakers_(router_.circuits(), breaker) {}

absl::StatusOr<std::shared_ptr<WorkerInfo>> Fleet::add(const WorkerAddress& address) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [id, w] : by_id_) {
    if (w->address.url == address.url) {
      return absl::AlreadyExistsError(
          absl::StrCat("worker ", address.url, " is already routed to"));
    }
  }
  absl::StatusOr<kvroute::WorkerId> id = router_.add_worker({.url = address.url});
  if (!id.ok()) return id.status();
  auto info = std::make_shared<WorkerInfo>(address, *id);
  by_id_[id->value] = info;
  log_info("worker {} added", address.url);
  return info;
}

absl::Status Fleet::remove(const std::string& url) {
  std::shared_ptr<WorkerInfo> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = by_id_.begin(); it != by_id_.end(); ++it) {
      if (it->second->address.url == url) {
        gone = it->second;
        by_id_.erase(it);
        break;
      }
    }
  }
  if (gone == nullptr) return absl::NotFoundError(absl::StrCat("no worker ", url));
  if (absl::Status s = router_.remove_worker(gone->id); !s.ok()) return s;
  breakers_.forget(gone->id);
  log_info("worker {} removed", url);
  if (on_removed_) on_removed_(url);
  return absl::OkStatus();
}

std::shared_ptr<WorkerInfo> Fleet::find(kvroute::WorkerId id) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_id_.find(id.value);
  return it == by_id_.end() ? nullptr : it->second;
}

std::vector<std::shared_ptr<WorkerInfo>> Fleet::list() const {
  std::vector<std::shared_ptr<WorkerInfo>> out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [id, w] : by_id_) out.push_back(w);
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a->id.value < b->id.value; });
  return out;
}

void Fleet::set_healthy(const WorkerInfo& w, bool healthy, std::string_view why) {
  auto snap = router_.workers().snapshot();
  const kvroute::Worker* cur = snap->find(w.id);
  if (cur == nullptr || cur->healthy == healthy) return;
  if (!router_.set_healthy(w.id, healthy).ok()) return;
  if (healthy) {
    log_info("worker {} is healthy again ({})", w.address.url, why);
  } else {
    log_warning("worker {} is unhealthy ({})", w.address.url, why);
  }
}

void Fleet::note_breaker(WorkerInfo& w) {
  const auto state = breakers_.state(w.id);
  const int now = static_cast<int>(state);
  const int before = w.logged_breaker.exchange(now);
  if (before == now) return;
  const auto from = static_cast<kvroute::CircuitBreaker::State>(before);
  if (state == kvroute::CircuitBreaker::State::kOpen) {
    log_warning("worker {} circuit {} -> open", w.address.url, kvroute::to_string(from));
  } else {
    log_info("worker {} circuit {} -> {}", w.address.url, kvroute::to_string(from),
             kvroute::to_string(state));
  }
}

void Fleet::refresh_breakers() {
  breakers_.refresh();
  for (const auto& w : list()) note_breaker(*w);
}

}  // namespace kvexample
