// The DTensor forms of the scan family (registered in scan_strategy.cc).
#include <algorithm>
#include <functional>
#include <vector>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/common/detail/cumprod_backward.h"
#include "dtensor/ops/common/detail/reduction_backward.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/register_all.h"
#include "dtensor/ops/scan/detail/scan_kernels.h"
#include "dtensor/ops/scan/scan.h"
#include "dtensor/ops/view/copy_ops.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

DTensorValuesIndices pair(DTensorList outs) {
  return {std::move(outs[0]), std::move(outs[1])};
}

}  // namespace

DTensor cumsum(const DTensor& x, int64_t dim) {
  static const OpInfo& op = ops_op("cumsum");
  const ArgValue args[] = {dim};
  return dispatch(op, {&x}, args);
}

DTensor cumprod(const DTensor& x, int64_t dim) {
  static const OpInfo& op = ops_op("cumprod");
  const ArgValue args[] = {dim};
  return dispatch(op, {&x}, args);
}

DTensor prod(const DTensor& x) {
  static const OpInfo& op = ops_op("prod");
  return dispatch(op, {&x}, {});
}

DTensor prod(const DTensor& x, int64_t dim, bool keepdim) {
  static const OpInfo& op = ops_op("prod.dim_int");
  const ArgValue args[] = {dim, keepdim};
  return dispatch(op, {&x}, args);
}

DTensor detail::cumprod_backward(const DTensor& grad, const DTensor& x, int64_t dim) {
  static const OpInfo& op = ops_op("cumprod_backward");
  const ArgValue args[] = {dim};
  return dispatch(op, {&grad, &x}, args);
}

DTensorValuesIndices cummax(const DTensor& x, int64_t dim) {
  static const OpInfo& op = ops_op("cummax");
  const ArgValue args[] = {dim};
  return pair(dispatch_multi(op, {&x}, args));
}

DTensorValuesIndices cummin(const DTensor& x, int64_t dim) {
  static const OpInfo& op = ops_op("cummin");
  const ArgValue args[] = {dim};
  return pair(dispatch_multi(op, {&x}, args));
}

DTensorValuesIndices sort(const DTensor& x, int64_t dim, bool descending) {
  static const OpInfo& op = ops_op("sort");
  const ArgValue args[] = {dim, descending};
  return pair(dispatch_multi(op, {&x}, args));
}

DTensor argsort(const DTensor& x, int64_t dim, bool descending) {
  static const OpInfo& op = ops_op("argsort");
  const ArgValue args[] = {dim, descending};
  return dispatch(op, {&x}, args);
}

DTensorValuesIndices topk(const DTensor& x, int64_t k, int64_t dim, bool largest) {
  static const OpInfo& op = ops_op("topk");
  const ArgValue args[] = {k, dim, largest};
  return pair(dispatch_multi(op, {&x}, args));
}

DTensorValuesIndices kthvalue(const DTensor& x, int64_t k, int64_t dim, bool keepdim) {
  static const OpInfo& op = ops_op("kthvalue");
  const ArgValue args[] = {k, dim, keepdim};
  return pair(dispatch_multi(op, {&x}, args));
}

DTensor logcumsumexp(const DTensor& x, int64_t dim) {
  static const OpInfo& op = ops_op("logcumsumexp");
  const ArgValue args[] = {dim};
  return dispatch(op, {&x}, args);
}

DTensor median(const DTensor& x) {
  static const OpInfo& op = ops_op("median");
  return dispatch(op, {&x}, {});
}

// The dim normalised here: the gradient (value_selecting_backward) takes it normalised.
DTensorValuesIndices median(const DTensor& x, int64_t dim, bool keepdim) {
  static const OpInfo& op = ops_op("median.dim");
  const ArgValue args[] = {normalize_dim(dim, std::max<int64_t>(x.dim(), 1), "median"), keepdim};
  return pair(dispatch_multi(op, {&x}, args));
}

DTensorValuesIndices mode(const DTensor& x, int64_t dim, bool keepdim) {
  static const OpInfo& op = ops_op("mode");
  const ArgValue args[] = {normalize_dim(dim, std::max<int64_t>(x.dim(), 1), "mode"), keepdim};
  return pair(dispatch_multi(op, {&x}, args));
}

}  // namespace dtensor
