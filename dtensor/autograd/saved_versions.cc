#include "dtensor/autograd/saved_versions.h"

#include "dtensor/tensor/error.h"

namespace dtensor::autograd {

SavedVersions::SavedVersions(std::initializer_list<Tensor> tensors) {
  for (const Tensor& t : tensors) save(t);
}

void SavedVersions::save(const Tensor& t) {
  if (!t.defined()) return;
  entries_.push_back({t.storage(), t.storage().version()});
}

void SavedVersions::check(const std::string& node) const {
  for (size_t i = 0; i < entries_.size(); ++i) {
    const Entry& e = entries_[i];
    DT_CHECK(e.storage.version() == e.version,
             "[backward] tensor %d saved for backward by %s was modified by an in-place op after "
             "it was saved (version %d, saved at version %d); use the out-of-place op or clone() "
             "it first",
             i, node, e.storage.version(), e.version);
  }
}

}  // namespace dtensor::autograd
