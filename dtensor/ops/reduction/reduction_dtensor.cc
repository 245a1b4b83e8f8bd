// DTensor forms of the reductions: each looks its op up once and dispatches it (strategies and
// kernels are registered in reduction_strategy.cc).
#include "dtensor/autograd/dispatch.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/reduction/reduction.h"

namespace dtensor {
namespace {

ArgValue dims_arg(IntSpan dims) {
  return Shape(dims.begin(), dims.end());
}

DTensor reduce(const OpInfo& info, const DTensor& x, IntSpan dims, bool keepdim) {
  const ArgValue args[] = {dims_arg(dims), keepdim};
  return dispatch(info, {&x}, args);
}

// var / std: args (correction [runtime], dims, keepdim).
DTensor with_correction(const OpInfo& info, const DTensor& x, IntSpan dims, int64_t correction,
                        bool keepdim) {
  const ArgValue args[] = {correction, dims_arg(dims), keepdim};
  return dispatch(info, {&x}, args);
}

// var_mean / std_mean: with_correction's args, two outputs (the statistic, the mean).
std::pair<DTensor, DTensor> with_correction_mean(const OpInfo& info, const DTensor& x, IntSpan dims,
                                                 int64_t correction, bool keepdim) {
  const ArgValue args[] = {correction, dims_arg(dims), keepdim};
  DTensorList outs = dispatch_multi(info, {&x}, args);
  return {std::move(outs[0]), std::move(outs[1])};
}

DTensorValuesIndices along_dim(const OpInfo& info, const DTensor& x, int64_t dim, bool keepdim) {
  const ArgValue args[] = {dim, keepdim};
  DTensorList outs = dispatch_multi(info, {&x}, args);
  return {std::move(outs[0]), std::move(outs[1])};
}

DTensor arg_reduce(const OpInfo& info, const DTensor& x, std::optional<int64_t> dim, bool keepdim) {
  const ArgValue args[] = {dim ? ArgValue(*dim) : ArgValue(), keepdim};
  return dispatch(info, {&x}, args);
}

}  // namespace

// The reductions with args (dims, keepdim).
#define DT_REDUCE_DIMS(fn)                                   \
  DTensor fn(const DTensor& x, IntSpan dims, bool keepdim) { \
    static const OpInfo& info = ops_op(#fn);                 \
    return reduce(info, x, dims, keepdim);                   \
  }

DT_REDUCE_DIMS(sum)

DT_REDUCE_DIMS(mean)

DTensor var(const DTensor& x, IntSpan dims, int64_t correction, bool keepdim) {
  static const OpInfo& info = ops_op("var");
  return with_correction(info, x, dims, correction, keepdim);
}

DT_REDUCE_DIMS(amax)

DT_REDUCE_DIMS(amin)

DTensor max(const DTensor& x) {
  static const OpInfo& info = ops_op("max");
  return dispatch(info, {&x});
}

DTensor min(const DTensor& x) {
  static const OpInfo& info = ops_op("min");
  return dispatch(info, {&x});
}

DTensorValuesIndices max(const DTensor& x, int64_t dim, bool keepdim) {
  static const OpInfo& info = ops_op("max.dim");
  return along_dim(info, x, dim, keepdim);
}

DTensorValuesIndices min(const DTensor& x, int64_t dim, bool keepdim) {
  static const OpInfo& info = ops_op("min.dim");
  return along_dim(info, x, dim, keepdim);
}

DTensor argmax(const DTensor& x, std::optional<int64_t> dim, bool keepdim) {
  static const OpInfo& info = ops_op("argmax");
  return arg_reduce(info, x, dim, keepdim);
}

DTensor argmin(const DTensor& x, std::optional<int64_t> dim, bool keepdim) {
  static const OpInfo& info = ops_op("argmin");
  return arg_reduce(info, x, dim, keepdim);
}

DTensor std(const DTensor& x, IntSpan dims, int64_t correction, bool keepdim) {
  static const OpInfo& info = ops_op("std");
  return with_correction(info, x, dims, correction, keepdim);
}

std::pair<DTensor, DTensor> var_mean(const DTensor& x, IntSpan dims, int64_t correction,
                                     bool keepdim) {
  static const OpInfo& info = ops_op("var_mean");
  return with_correction_mean(info, x, dims, correction, keepdim);
}

std::pair<DTensor, DTensor> std_mean(const DTensor& x, IntSpan dims, int64_t correction,
                                     bool keepdim) {
  static const OpInfo& info = ops_op("std_mean");
  return with_correction_mean(info, x, dims, correction, keepdim);
}

DT_REDUCE_DIMS(logsumexp)

DTensor vector_norm(const DTensor& x, double ord, IntSpan dims, bool keepdim) {
  static const OpInfo& info = ops_op("vector_norm");
  const ArgValue args[] = {ord, dims_arg(dims), keepdim};
  return dispatch(info, {&x}, args);
}

DTensor dist(const DTensor& a, const DTensor& b, double p) {
  return vector_norm(a - b, p);
}

DT_REDUCE_DIMS(any)

DT_REDUCE_DIMS(all)

#undef DT_REDUCE_DIMS

}  // namespace dtensor
