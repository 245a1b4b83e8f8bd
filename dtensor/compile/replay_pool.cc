#include "dtensor/compile/detail/replay_pool.h"

#include <memory>
#include <utility>

namespace dtensor::compiler {

void ReplayPool::recycle(Tensor& t) {
  if (count_ < limit_ && t.defined() && t.storage().sole_owner()) {
    const Storage& s = t.storage();
    dtensor::detail::note_storage_kept(s);
    SizeClass& c = classes_[Key{s.nbytes(), s.device()}];
    c.kept.push_back(s);
    --c.drawn;
    ++count_;
    bytes_.fetch_add(static_cast<int64_t>(s.nbytes()), std::memory_order_relaxed);
  }
  // Destroyed and made again empty in place (assigning an empty Tensor would copy its unused
  // inline shape storage too).
  std::destroy_at(&t);
  std::construct_at(&t);
}

Storage ReplayPool::take(size_t nbytes, Device device) {
  // Counted even when none is kept: the next replay finds one (trim keeps what was asked for).
  SizeClass& c = classes_[Key{nbytes, device}];
  if (++c.drawn > c.most_drawn) c.most_drawn = c.drawn;
  if (c.kept.empty()) return Storage();
  Storage s = std::move(c.kept.back());
  c.kept.pop_back();
  --count_;
  bytes_.fetch_sub(static_cast<int64_t>(nbytes), std::memory_order_relaxed);
  s.bump_version();  // new contents: nothing may take it for the dead value's memory
  dtensor::detail::note_storage_reused(s);
  return s;
}

void ReplayPool::shrink(const Key& key, SizeClass& c, size_t keep) {
  while (c.kept.size() > keep) {
    dtensor::detail::note_storage_reused(c.kept.back());  // then freed
    c.kept.pop_back();
    --count_;
    bytes_.fetch_sub(static_cast<int64_t>(key.nbytes), std::memory_order_relaxed);
  }
}

void ReplayPool::trim() {
  for (auto& [key, c] : classes_) {
    shrink(key, c, static_cast<size_t>(c.most_drawn));
    c.drawn = c.most_drawn = 0;
  }
}

void ReplayPool::release() {
  begin_use();
  release_all();
  end_use();
}

void ReplayPool::release_all() {
  for (auto& [key, c] : classes_) shrink(key, c, 0);
}

ReplayPool::~ReplayPool() {
  dtensor::detail::unregister_storage_pool(this);  // no release may reach it from now on
  release_all();
}

}  // namespace dtensor::compiler
