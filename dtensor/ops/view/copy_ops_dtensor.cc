// The DTensor forms of copy_ops (registered in copy_ops_strategy.cc).
#include <algorithm>

#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/function.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/register_all.h"
#include "dtensor/ops/view/copy_ops.h"
#include "dtensor/ops/view/detail/copy_ops.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/error.h"

namespace dtensor {

#define DT_COPY_OP(name)                    \
  []() -> const OpInfo& {                   \
    static const OpInfo& op = ops_op(name); \
    return op;                              \
  }()

DTensor clone(const DTensor& x) {
  return dispatch(DT_COPY_OP("clone"), {&x});
}
DTensor contiguous(const DTensor& x) {
  return dispatch(DT_COPY_OP("contiguous"), {&x});
}
DTensor flip(const DTensor& x, IntSpan dims) {
  const ArgValue args[] = {Shape(dims.begin(), dims.end())};
  return dispatch(DT_COPY_OP("flip"), {&x}, args);
}
DTensor roll(const DTensor& x, IntSpan shifts, IntSpan dims) {
  detail::check_roll_args(shifts, dims);
  if (dims.empty()) return reshape(roll(reshape(x, {-1}), shifts, Shape{0}), x.shape());
  const ArgValue args[] = {Shape(shifts.begin(), shifts.end()), Shape(dims.begin(), dims.end())};
  return dispatch(DT_COPY_OP("roll"), {&x}, args);
}
DTensor repeat(const DTensor& x, IntSpan repeats) {
  const ArgValue args[] = {Shape(repeats.begin(), repeats.end())};
  return dispatch(DT_COPY_OP("repeat"), {&x}, args);
}
DTensor tile(const DTensor& x, IntSpan reps) {
  return repeat(x, detail::tile_repeats(reps, x.dim()));
}
DTensor tril(const DTensor& x, int64_t diagonal) {
  const ArgValue args[] = {diagonal};
  return dispatch(DT_COPY_OP("tril"), {&x}, args);
}
DTensor triu(const DTensor& x, int64_t diagonal) {
  const ArgValue args[] = {diagonal};
  return dispatch(DT_COPY_OP("triu"), {&x}, args);
}
DTensor repeat_interleave(const DTensor& x, int64_t repeats, int64_t dim) {
  const ArgValue args[] = {repeats, dim};
  return dispatch(DT_COPY_OP("repeat_interleave.self_int"), {&x}, args);
}
DTensor diagonal(const DTensor& x, int64_t offset, int64_t dim1, int64_t dim2) {
  const ArgValue args[] = {offset, dim1, dim2};
  return dispatch(DT_COPY_OP("diagonal"), {&x}, args);
}
DTensor movedim(const DTensor& x, IntSpan source, IntSpan destination) {
  return permute(x, detail::movedim_permutation(source, destination, x.dim()));
}
DTensor unflatten(const DTensor& x, int64_t dim, IntSpan sizes) {
  return reshape(x, detail::unflatten_shape(x.shape(), dim, sizes));
}
std::vector<DTensor> unbind(const DTensor& x, int64_t dim) {
  const int64_t d = normalize_dim(dim, x.dim(), "unbind");
  std::vector<DTensor> out;
  for (int64_t i = 0; i < x.size(d); ++i) out.push_back(select(x, d, i));
  return out;
}

#undef DT_COPY_OP

}  // namespace dtensor
