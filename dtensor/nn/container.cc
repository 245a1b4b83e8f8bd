#include "dtensor/nn/container.h"

#include "dtensor/tensor/error.h"

namespace dtensor::nn {

Sequential::Sequential(std::vector<ModulePtr> modules) {
  for (ModulePtr& m : modules) append(std::move(m));
}

Sequential::Sequential(std::vector<std::pair<std::string, ModulePtr>> named_modules) {
  for (auto& [name, m] : named_modules) {
    for (const auto& [n, c] : named_children()) {
      DT_CHECK(n != name, "[Sequential] two modules are named '%s'", name);
    }
    register_module(std::move(name), std::move(m));
  }
}

Sequential& Sequential::append(ModulePtr module) {
  register_module(std::to_string(size()), std::move(module));
  return *this;
}

const ModulePtr& Sequential::ptr(int64_t i) const {
  const auto n = static_cast<int64_t>(size());
  DT_CHECK(i >= -n && i < n, "[Sequential] index %d is out of range for a Sequential of %d modules",
           i, n);
  return named_children()[static_cast<size_t>(i < 0 ? i + n : i)].second;
}

DTensor Sequential::forward(const DTensor& x) {
  DTensor y = x;
  for (const auto& [name, m] : named_children()) y = (*m)(y);
  return y;
}

}  // namespace dtensor::nn
