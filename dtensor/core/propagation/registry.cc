#include "dtensor/core/propagation/registry.h"

#include <absl/container/flat_hash_map.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <shared_mutex>

#include "dtensor/tensor/error.h"

namespace dtensor {

struct Registry::Impl {
  mutable std::shared_mutex mu;
  std::deque<OpInfo> ops;  // deque: references stay valid as ops are added
  absl::flat_hash_map<std::string, const OpInfo*> by_name;
  absl::flat_hash_map<OpId, const OpInfo*> by_id;
};

namespace {
// OpIds are unique across every Registry of the process, so the process-wide propagation
// cache never confuses two registries' ops.
std::atomic<OpId> next_op_id{0};
}  // namespace

Registry::Registry() : impl_(std::make_unique<Impl>()) {}
Registry::~Registry() = default;

const OpInfo& Registry::add(OpInfo info) {
  DT_CHECK(!info.name.empty(), "[Registry] op name must not be empty");
  DT_CHECK(info.strategy && info.meta && info.kernel,
           "[Registry] op '%s' needs a strategy, a meta function and a kernel", info.name);
  DT_CHECK(!info.data_dependent_shape || (info.linearity == Linearity::kNone && !info.inplace),
           "[Registry] op '%s' has a data-dependent output shape: it must have linearity kNone "
           "and not be in-place (its outputs are Replicate)",
           info.name);
  std::unique_lock lock(impl_->mu);
  DT_CHECK(!impl_->by_name.contains(info.name), "[Registry] op '%s' is already registered",
           info.name);
  info.id = next_op_id.fetch_add(1);
  impl_->ops.push_back(std::move(info));
  const OpInfo* stored = &impl_->ops.back();
  impl_->by_name.emplace(stored->name, stored);
  impl_->by_id.emplace(stored->id, stored);
  return *stored;
}

const OpInfo* Registry::find(std::string_view name) const {
  std::shared_lock lock(impl_->mu);
  // Debian's Abseil has its own string_view type.
  auto it = impl_->by_name.find(absl::string_view(name.data(), name.size()));
  return it == impl_->by_name.end() ? nullptr : it->second;
}

const OpInfo& Registry::get(std::string_view name) const {
  const OpInfo* info = find(name);
  DT_CHECK(info != nullptr, "[Registry] unknown op '%s' (%d ops registered)", name, size());
  return *info;
}

const OpInfo& Registry::get(OpId id) const {
  std::shared_lock lock(impl_->mu);
  auto it = impl_->by_id.find(id);
  DT_CHECK(it != impl_->by_id.end(), "[Registry] op id %d is not registered here", id);
  return *it->second;
}

int64_t Registry::size() const {
  std::shared_lock lock(impl_->mu);
  return static_cast<int64_t>(impl_->ops.size());
}

std::vector<std::string> Registry::names() const {
  std::shared_lock lock(impl_->mu);
  std::vector<std::string> out;
  out.reserve(impl_->ops.size());
  for (const OpInfo& op : impl_->ops) out.push_back(op.name);
  return out;
}

Registry& op_registry() {
  static Registry* registry = new Registry();  // never destroyed: used until process exit
  return *registry;
}

}  // namespace dtensor
