// The DTensor forms of the index family (registered in index_strategy.cc).
#include <absl/strings/str_format.h>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/check_ranks.h"
#include "dtensor/core/factories.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/common/detail/index_helpers.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/register_all.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {

DTensor gather(const DTensor& self, int64_t dim, const DTensor& index) {
  static const OpInfo& op = ops_op("gather");
  const ArgValue args[] = {dim};
  return dispatch(op, {&self, &index}, args);
}

DTensor scatter_add(const DTensor& self, int64_t dim, const DTensor& index, const DTensor& src) {
  static const OpInfo& op = ops_op("scatter_add");
  const ArgValue args[] = {dim};
  return dispatch(op, {&self, &index, &src}, args);
}

DTensor scatter(const DTensor& self, int64_t dim, const DTensor& index, const DTensor& src) {
  static const OpInfo& op = ops_op("scatter");
  const ArgValue args[] = {dim};
  return dispatch(op, {&self, &index, &src}, args);
}

DTensor scatter(const DTensor& self, int64_t dim, const DTensor& index, const Scalar& value) {
  static const OpInfo& op = ops_op("scatter.value");
  const ArgValue args[] = {scalar_arg(value), dim};
  return dispatch(op, {&self, &index}, args);
}

DTensor scatter_reduce(const DTensor& self, int64_t dim, const DTensor& index, const DTensor& src,
                       std::string_view reduce, bool include_self) {
  static const OpInfo& op = ops_op("scatter_reduce");
  // The op's args hold a string of static storage: the canonical name of the reduction.
  const std::string_view name =
      detail::scatter_reduce_name(detail::parse_scatter_reduce(reduce, "scatter_reduce"));
  const ArgValue args[] = {dim, name, include_self};
  return dispatch(op, {&self, &index, &src}, args);
}

DTensor index_add(const DTensor& self, int64_t dim, const DTensor& index, const DTensor& source,
                  const Scalar& alpha) {
  static const OpInfo& op = ops_op("index_add");
  const ArgValue args[] = {scalar_arg(alpha), dim};
  return dispatch(op, {&self, &index, &source}, args);
}

DTensor index_select(const DTensor& self, int64_t dim, const DTensor& index) {
  DT_CHECK(self.defined() && index.defined(), "[index_select] arguments must be defined");
  DT_CHECK(index.dim() <= 1, "[index_select] argument index must be 0-d or 1-d, got shape %s",
           shape_str(index.shape()));
  DT_CHECK(self.dim() >= 1, "[index_select] argument self must have at least one dim");
  const detail::SelectShapes s = detail::index_select_shapes(self.shape(), dim, index.numel());
  return gather(self, s.dim, expand(reshape(index, s.along), s.out));
}

DTensor take_along_dim(const DTensor& self, const DTensor& indices, int64_t dim) {
  const detail::AlongDimShapes s =
      detail::take_along_dim_shapes(self.shape(), indices.shape(), dim);
  return gather(expand(self, s.self), s.dim, expand(indices, s.indices));
}

DTensor one_hot(const DTensor& index, int64_t num_classes) {
  static const OpInfo& op = ops_op("one_hot");
  if (num_classes < 0) {
    DT_CHECK(index.numel() > 0, "[one_hot] cannot infer num_classes from an empty tensor");
    num_classes = amax(index).full_tensor().to(Device(kCPU)).item<int64_t>() + 1;
  }
  const ArgValue args[] = {num_classes};
  return dispatch(op, {&index}, args);
}

}  // namespace dtensor
