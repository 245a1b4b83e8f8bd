#include "dtensor/compile/detail/replay_pool.h"

#include <memory>
#include <utility>

namespace dtensor::compiler {

void ReplayPool::recycle(Tensor& t) {
  if (count_ < limit_ && t.defined() && t.storage().sole_owner()) {
    const Storage& s = t.storage();
    dtensor::detail::note_storage_kept(s);
    kept_[Key{s.nbytes(), s.device()}].push_back(s);
    ++count_;
    bytes_ += static_cast<int64_t>(s.nbytes());
  }
  // Destroyed and made again empty in place (assigning an empty Tensor would copy its unused
  // inline shape storage too).
  std::destroy_at(&t);
  std::construct_at(&t);
}

Storage ReplayPool::take(size_t nbytes, Device device) {
  if (count_ == 0) return Storage();
  auto it = kept_.find(Key{nbytes, device});
  if (it == kept_.end() || it->second.empty()) return Storage();
  Storage s = std::move(it->second.back());
  it->second.pop_back();
  --count_;
  bytes_ -= static_cast<int64_t>(nbytes);
  s.bump_version();  // new contents: nothing may take it for the dead value's memory
  dtensor::detail::note_storage_reused(s);
  return s;
}

ReplayPool::~ReplayPool() {
  for (auto& [key, storages] : kept_) {
    for (const Storage& s : storages) dtensor::detail::note_storage_reused(s);  // then freed
  }
}

}  // namespace dtensor::compiler
