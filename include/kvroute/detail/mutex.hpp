// -----------------------------------------------------------------------------
// File: kvroute/detail/mutex.hpp
// -----------------------------------------------------------------------------
//
// Not API. `detail::Mutex`, the lock every kvroute component uses: a reader-
// writer mutex over std::shared_mutex, carrying Abseil's thread-safety
// annotations so that clang's -Wthread-safety checks kvroute's locking.
//
// Why not absl::Mutex: a prebuilt Abseil (Debian's among them) is not built
// with ThreadSanitizer, and absl::Mutex synchronises through its own atomics
// and futex calls, which TSan cannot see; every TSan run would then report
// false races on data the mutex does protect. std::shared_mutex is a pthread
// rwlock, which TSan intercepts. Likewise, use std::call_once, not
// absl::call_once.
//
// Thread safety: it is a mutex.

#ifndef KVROUTE_DETAIL_MUTEX_HPP_
#define KVROUTE_DETAIL_MUTEX_HPP_

#include <shared_mutex>

#include "absl/base/thread_annotations.h"
#include "kvroute/config.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace detail {

class ABSL_LOCKABLE Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() { mu_.lock(); }
  void unlock() ABSL_UNLOCK_FUNCTION() { mu_.unlock(); }
  bool try_lock() ABSL_EXCLUSIVE_TRYLOCK_FUNCTION(true) { return mu_.try_lock(); }
  void lock_shared() ABSL_SHARED_LOCK_FUNCTION() { mu_.lock_shared(); }
  bool try_lock_shared() ABSL_SHARED_TRYLOCK_FUNCTION(true) { return mu_.try_lock_shared(); }
  void unlock_shared() ABSL_UNLOCK_FUNCTION() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Exclusive lock for a scope. Takes a pointer, like absl::MutexLock.
class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

// Shared (reader) lock for a scope.
class ABSL_SCOPED_LOCKABLE ReaderMutexLock {
 public:
  explicit ReaderMutexLock(Mutex* mu) ABSL_SHARED_LOCK_FUNCTION(mu) : mu_(mu) {
    mu_->lock_shared();
  }
  ~ReaderMutexLock() ABSL_UNLOCK_FUNCTION() { mu_->unlock_shared(); }
  ReaderMutexLock(const ReaderMutexLock&) = delete;
  ReaderMutexLock& operator=(const ReaderMutexLock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace detail
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_DETAIL_MUTEX_HPP_
