// -----------------------------------------------------------------------------
// File: kvroute/sync/redis/detail/keys.hpp
// -----------------------------------------------------------------------------
//
// Not API. The names of the Redis keys the replicator uses (replicator.hpp
// lists them), all under one prefix. A model's name is used as it is:
// Redis keys are binary-safe, and the fixed part after the prefix
// (":stream:", ":snapshot:") keeps a model's keys apart from the fleet's.
//
// Thread safety: a value.

#ifndef KVROUTE_SYNC_REDIS_DETAIL_KEYS_HPP_
#define KVROUTE_SYNC_REDIS_DETAIL_KEYS_HPP_

#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "kvroute/config.hpp"

KVROUTE_NAMESPACE_BEGIN
namespace sync {
namespace redis_detail {

// The one field of every stream entry: the encoded sync::Batch.
inline constexpr std::string_view kBatchField = "b";

struct Keys {
  std::string prefix;

  std::string stream(std::string_view model) const {
    return absl::StrCat(prefix, ":stream:", absl::string_view(model.data(), model.size()));
  }
  std::string snapshot(std::string_view model) const {
    return absl::StrCat(prefix, ":snapshot:", absl::string_view(model.data(), model.size()));
  }
  std::string fleet() const { return absl::StrCat(prefix, ":fleet"); }
  std::string models() const { return absl::StrCat(prefix, ":models"); }
};

}  // namespace redis_detail
}  // namespace sync
KVROUTE_NAMESPACE_END

#endif  // KVROUTE_SYNC_REDIS_DETAIL_KEYS_HPP_
