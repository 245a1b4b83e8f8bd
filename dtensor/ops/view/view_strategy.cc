// Registration of the view and shape ops: strategies (rows for ONE mesh dim, [outputs |
// inputs]), meta functions and local kernels. All of them only move data, so Partial inputs
// pass through (Linearity::kLinear adds the P(sum)/P(avg) rows, add_partial_passthrough_rows
// the P(max)/P(min) ones). Kernels that change shapes take their local target shape from the
// chosen output spec (KernelContext), since a shard's shape differs from the global one.
#include <algorithm>

#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/core/propagation/registry.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/view/detail/view_backward.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/shape_ops.h"

namespace dtensor {
namespace {

using detail::meta_tensor;

OutputMetas meta_of(const Tensor& t) {
  return {TensorMeta(t.sizes(), t.dtype())};
}

// The map [f(0), ..., f(n - 1)].
template <typename F>
Shape dim_map(int64_t n, F f) {
  Shape map(n);
  for (int64_t d = 0; d < n; ++d) map[d] = f(d);
  return map;
}

// The dim map of view/reshape: groups of input dims and output dims with equal products
// (PyTorch view_groups). A dim of a 1:1 group keeps its sharding (uneven included). In a merged
// or split group only the leading dim may stay sharded, and only when the leading input and
// output sizes are both divisible by the mesh size: then every rank's block of the group is one
// contiguous run of the flattened group, of the same length before and after, at any nesting of
// mesh dims. Anything else is replicated first.
Shape reshape_map(const OpSchema& s, IntSpan in, IntSpan out) {
  Shape map(in.size(), -1);
  if (shape_numel(in) == 0) return map;
  // Size-1 dims hold no layout: they are inserted or dropped freely, so groups are formed from
  // the other dims only ([1, 1, h] -> [h] keeps a shard of h). A size-1 input dim maps nowhere.
  Shape ia, oa;  // indices of the dims of size != 1
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] != 1) ia.push_back(static_cast<int64_t>(d));
  }
  for (size_t d = 0; d < out.size(); ++d) {
    if (out[d] != 1) oa.push_back(static_cast<int64_t>(d));
  }
  const int64_t m = s.mesh().size();
  size_t i = 0, j = 0;
  while (i < ia.size() && j < oa.size()) {
    const size_t i0 = i, j0 = j;
    int64_t pi = in[ia[i++]], pj = out[oa[j++]];
    while (pi != pj) {
      if (pi < pj) {
        pi *= in[ia[i++]];
      } else {
        pj *= out[oa[j++]];
      }
    }
    const bool one_to_one = i - i0 == 1 && j - j0 == 1;
    if (one_to_one || (in[ia[i0]] % m == 0 && out[oa[j0]] % m == 0)) map[ia[i0]] = oa[j0];
  }
  return map;
}

Shape normalized_dims(IntSpan dims, int64_t ndim, std::string_view op) {
  Shape out;
  for (int64_t d : dims) out.push_back(normalize_dim(d, ndim, op));
  return out;
}

// The output of a view op: the op applied to `in` (a storage-less tensor of input 0's shape,
// so bad arguments raise the Tensor op's own errors) with the schema's args.
using ViewFn = Tensor (*)(const Tensor& in, const OpSchema& s);
// Input dim -> output dim map (see mapped_rows) of a single-input view for the schema.
using DimMapFn = Shape (*)(const OpSchema& s);
// The local kernel: the op on this rank's shard.
using LocalViewFn = Tensor (*)(const KernelContext& c, const Tensor& local);

// Sample calls of the view ops (args valid for the shapes; shards even, uneven and empty).
std::vector<OpSample> view_samples_of(std::string_view name, int64_t w);
std::vector<OpSample> view_samples(std::string_view name, int64_t w) {
  std::vector<OpSample> out = view_samples_of(name, w);
  // A leading dim of w - 1, kept by every op: its last shard is empty on w ranks.
  using detail::sample;
  const int64_t s = detail::short_size(w);
  auto one = [](SampleInput in, ArgList args) {
    return OpSample{{std::move(in)}, std::move(args)};
  };
  if (name == "transpose") out.push_back(one(sample({s, 4}), {int64_t{0}, int64_t{1}}));
  if (name == "permute") out.push_back(one(sample({s, 3, 2}), {Shape{2, 0, 1}}));
  if (name == "unsqueeze") out.push_back(one(sample({s, 5}), {int64_t{1}}));
  if (name == "squeeze") out.push_back(one(sample({s, 1, 3}), {Shape{1}}));
  if (name == "view" || name == "reshape") out.push_back(one(sample({s, 6}), {Shape{s, 2, 3}}));
  if (name == "expand") out.push_back(one(sample({s, 1}), {Shape{s, 4}}));
  if (name == "narrow") out.push_back(one(sample({s, 5}), {int64_t{1}, int64_t{0}, int64_t{3}}));
  if (name == "slice") {
    out.push_back(one(sample({s, 5}), {int64_t{1}, int64_t{0}, int64_t{5}, int64_t{2}}));
  }
  if (name == "select") out.push_back(one(sample({s, 5}), {int64_t{1}, int64_t{2}}));
  if (name == "cat") out.push_back({{sample({s, 3}), sample({s, 2})}, {int64_t{1}}});
  if (name == "stack") out.push_back({{sample({s, 3}), sample({s, 3})}, {int64_t{0}}});
  if (name == "split") out.push_back(one(sample({s, 5}), {Shape{2, 3}, int64_t{1}}));
  return out;
}

std::vector<OpSample> view_samples_of(std::string_view name, int64_t w) {
  using detail::sample;
  const int64_t n = 3 * w + 1;
  auto one = [](SampleInput in, ArgList args) {
    return OpSample{{std::move(in)}, std::move(args)};
  };
  if (name == "transpose") {
    return {one(sample({n, 5, 2}), {int64_t{0}, int64_t{2}}),
            one(sample({4, 2 * w}), {int64_t{0}, int64_t{1}})};
  }
  if (name == "permute") return {one(sample({n, 5, 2}), {Shape{2, 0, 1}})};
  if (name == "unsqueeze") {
    return {one(sample({n, 5}), {int64_t{1}}), one(sample({n, 5}), {int64_t{0}})};
  }
  if (name == "squeeze") {
    return {one(sample({n, 1, 5}), {Shape{1}}), one(sample({1, 2 * w}), {Shape{0}})};
  }
  if (name == "view" || name == "reshape") {
    return {one(sample({2 * w, 6}), {Shape{12 * w}}), one(sample({2 * w, 6}), {Shape{2 * w, 2, 3}}),
            one(sample({n, 4}), {Shape{4 * n}}), one(sample({4, n}), {Shape{2, 2, n}})};
  }
  if (name == "expand") {
    return {one(sample({1, 5}), {Shape{n, 5}}), one(sample({n, 1}), {Shape{2, n, 4}})};
  }
  if (name == "narrow") {
    return {one(sample({n, 5}), {int64_t{0}, int64_t{1}, int64_t{2}}),
            one(sample({n, 5}), {int64_t{1}, int64_t{0}, int64_t{5}})};
  }
  if (name == "slice") {
    return {one(sample({n, 5}), {int64_t{0}, int64_t{1}, n - 1, int64_t{2}}),
            one(sample({n, 5}), {int64_t{1}, int64_t{0}, int64_t{5}, int64_t{1}})};
  }
  if (name == "select") {
    return {one(sample({n, 5}), {int64_t{0}, int64_t{2}}),
            one(sample({n, 5}), {int64_t{1}, int64_t{-1}})};
  }
  if (name == "cat") {
    return {{{sample({n, 5}), sample({2, 5}), sample({w, 5})}, {int64_t{0}}},
            {{sample({4, 2}), sample({4, n})}, {int64_t{1}}}};
  }
  if (name == "stack") {
    return {{{sample({n, 5}), sample({n, 5})}, {int64_t{0}}},
            {{sample({n, 5}), sample({n, 5}), sample({n, 5})}, {int64_t{2}}}};
  }
  if (name == "split") {
    return {one(sample({n, 5}), {Shape{w, 2 * w + 1}, int64_t{0}}),
            one(sample({n, 5}), {Shape{2, 3}, int64_t{1}})};
  }
  return {};
}

// Registers a single-input, single-output op that only moves data (Partial passes through):
// its output meta comes from `view` (or `meta` when set), its strategy is mapped_rows(map_of),
// its kernel `kernel`.
void add_mapped_view(Registry& r, const char* name, ViewFn view, DimMapFn map_of,
                     LocalViewFn kernel, MetaFn meta = nullptr) {
  OpInfo op = detail::make_op(name, {"self"}, Linearity::kLinear);
  op.view = true;
  op.saved_inputs = 0;  // backward needs the specs only
  op.samples = [name](int64_t w) { return view_samples(name, w); };
  op.backward = detail::view_grad(name);
  op.kernel = single_output(
      [kernel](const KernelContext& c, absl::Span<const Tensor> l) { return kernel(c, l[0]); });
  if (meta) {
    op.meta = std::move(meta);
  } else {
    op.meta = [view](const OpSchema& s) {
      return meta_of(view(meta_tensor(s.input(0).shape(), s.input(0).dtype()), s));
    };
  }
  op.strategy = [map_of](const OpSchema& s) { return detail::mapped_rows(map_of(s)); };
  r.add(std::move(op));
}

int64_t arg_dim(const OpSchema& s, int64_t i, int64_t ndim, std::string_view op) {
  return normalize_dim(s.arg<int64_t>(i), ndim, op);
}

void register_single_input_views(Registry& r) {
  add_mapped_view(
      r, "transpose",
      [](const Tensor& t, const OpSchema& s) {
        return t.transpose(s.arg<int64_t>(0), s.arg<int64_t>(1));
      },
      [](const OpSchema& s) {
        const int64_t n = s.input(0).ndim();
        const int64_t a = arg_dim(s, 0, n, "transpose"), b = arg_dim(s, 1, n, "transpose");
        return dim_map(n, [&](int64_t d) { return d == a ? b : d == b ? a : d; });
      },
      [](const KernelContext& c, const Tensor& l) {
        return l.transpose(c.arg<int64_t>(0), c.arg<int64_t>(1));
      });
  add_mapped_view(
      r, "permute", [](const Tensor& t, const OpSchema& s) { return t.permute(s.arg<Shape>(0)); },
      [](const OpSchema& s) {
        const int64_t n = s.input(0).ndim();
        const Shape dims = normalized_dims(s.arg<Shape>(0), n, "permute");
        Shape map(n, -1);
        for (int64_t k = 0; k < static_cast<int64_t>(dims.size()); ++k) map[dims[k]] = k;
        return map;
      },
      [](const KernelContext& c, const Tensor& l) { return l.permute(c.arg<Shape>(0)); });
  add_mapped_view(
      r, "unsqueeze",
      [](const Tensor& t, const OpSchema& s) { return t.unsqueeze(s.arg<int64_t>(0)); },
      [](const OpSchema& s) {
        const int64_t n = s.input(0).ndim();
        const int64_t at = arg_dim(s, 0, n + 1, "unsqueeze");
        return dim_map(n, [&](int64_t d) { return d < at ? d : d + 1; });
      },
      [](const KernelContext& c, const Tensor& l) { return l.unsqueeze(c.arg<int64_t>(0)); });
  // squeeze(dims): arg 0 lists the (normalised, global size-1) dims to drop.
  add_mapped_view(
      r, "squeeze", nullptr,
      [](const OpSchema& s) {
        const Shape& dims = s.arg<Shape>(0);
        Shape map(s.input(0).ndim(), -1);
        int64_t next = 0;
        for (int64_t d = 0; d < s.input(0).ndim(); ++d) {
          if (std::find(dims.begin(), dims.end(), d) == dims.end()) map[d] = next++;
        }
        return map;
      },
      // Exactly the global size-1 dims go (a shard may have size 0 where the global size is 1,
      // and a local squeeze() would keep it).
      [](const KernelContext& c, const Tensor& l) { return l.reshape(c.output_shard(0).shape); },
      [](const OpSchema& s) {
        Shape shape;
        const Shape& dims = s.arg<Shape>(0);
        for (int64_t d = 0; d < s.input(0).ndim(); ++d) {
          if (std::find(dims.begin(), dims.end(), d) == dims.end()) {
            shape.push_back(s.input(0).shape()[d]);
          }
        }
        return OutputMetas{TensorMeta(shape, s.input(0).dtype())};
      });
  // view / reshape (and flatten, which dispatches as reshape): arg 0 is the output shape with
  // any -1 already inferred.
  for (const char* name : {"view", "reshape"}) {
    add_mapped_view(
        r, name, nullptr,
        [](const OpSchema& s) { return reshape_map(s, s.input(0).shape(), s.arg<Shape>(0)); },
        [](const KernelContext& c, const Tensor& l) {
          const Shape shape = c.output_shard(0).shape;
          return c.op().name == "view" ? l.view(shape) : l.reshape(shape);
        },
        [](const OpSchema& s) {
          return OutputMetas{TensorMeta(s.arg<Shape>(0), s.input(0).dtype())};
        });
  }
  add_mapped_view(
      r, "expand", [](const Tensor& t, const OpSchema& s) { return t.expand(s.arg<Shape>(0)); },
      [](const OpSchema& s) {
        const Shape& in = s.input(0).shape();
        const Shape& target = s.arg<Shape>(0);
        const int64_t lead = static_cast<int64_t>(target.size() - in.size());
        // A broadcast dim (size 1 -> n) must be replicated; a kept dim maps through.
        return dim_map(static_cast<int64_t>(in.size()), [&](int64_t d) {
          return target[lead + d] == -1 || target[lead + d] == in[d] ? lead + d : int64_t{-1};
        });
      },
      [](const KernelContext& c, const Tensor& l) { return l.expand(c.output_shard(0).shape); });
}

// narrow/slice/select touch one dim: it must be replicated unless the op keeps it whole.
void register_indexing_views(Registry& r) {
  add_mapped_view(
      r, "narrow",
      [](const Tensor& t, const OpSchema& s) {
        return t.narrow(s.arg<int64_t>(0), s.arg<int64_t>(1), s.arg<int64_t>(2));
      },
      [](const OpSchema& s) {
        const int64_t n = s.input(0).ndim();
        const int64_t dim = arg_dim(s, 0, n, "narrow");
        const int64_t size = s.input(0).shape()[dim];
        const int64_t start = s.arg<int64_t>(1) < 0 ? s.arg<int64_t>(1) + size : s.arg<int64_t>(1);
        const bool whole = start == 0 && s.arg<int64_t>(2) == size;
        return dim_map(n, [&](int64_t d) { return d != dim || whole ? d : int64_t{-1}; });
      },
      [](const KernelContext& c, const Tensor& l) {
        // A dim the op keeps whole may be sharded: the shard is the answer as it is.
        const int64_t d = normalize_dim(c.arg<int64_t>(0), l.dim(), "narrow");
        if (l.size(d) == c.output_shard(0).shape[d]) return l;
        return l.narrow(d, c.arg<int64_t>(1), c.arg<int64_t>(2));
      });
  add_mapped_view(
      r, "slice",
      [](const Tensor& t, const OpSchema& s) {
        return t.slice(s.arg<int64_t>(0), s.arg<int64_t>(1), s.arg<int64_t>(2), s.arg<int64_t>(3));
      },
      [](const OpSchema& s) {
        const int64_t n = s.input(0).ndim();
        const int64_t dim = arg_dim(s, 0, n, "slice");
        const Tensor out = meta_tensor(s.input(0).shape(), s.input(0).dtype())
                               .slice(dim, s.arg<int64_t>(1), s.arg<int64_t>(2), s.arg<int64_t>(3));
        const bool whole = out.size(dim) == s.input(0).shape()[dim] && s.arg<int64_t>(3) == 1;
        return dim_map(n, [&](int64_t d) { return d != dim || whole ? d : int64_t{-1}; });
      },
      [](const KernelContext& c, const Tensor& l) {
        const int64_t d = normalize_dim(c.arg<int64_t>(0), l.dim(), "slice");
        const int64_t step = c.arg<int64_t>(3);
        if (l.size(d) == c.output_shard(0).shape[d] && step == 1) return l;
        return l.slice(d, c.arg<int64_t>(1), c.arg<int64_t>(2), step);
      });
  add_mapped_view(
      r, "select",
      [](const Tensor& t, const OpSchema& s) {
        return t.select(s.arg<int64_t>(0), s.arg<int64_t>(1));
      },
      [](const OpSchema& s) {
        const int64_t n = s.input(0).ndim();
        const int64_t dim = arg_dim(s, 0, n, "select");
        return dim_map(n, [&](int64_t d) { return d < dim ? d : d == dim ? int64_t{-1} : d - 1; });
      },
      [](const KernelContext& c, const Tensor& l) {
        return l.select(c.arg<int64_t>(0), c.arg<int64_t>(1));
      });
}

// cat/stack take n inputs; split_with_sizes gives n outputs.
// Rows of cat (`new_dim` false: every dim but the joined `dim`) and stack (`new_dim` true:
// every input dim; the output's shifted past the new `dim`): each input and the output sharded
// alike, plus the Partial passthrough rows. `width` = 1 output + the inputs.
StrategyRows join_rows(int64_t n, int64_t dim, int64_t width, bool new_dim) {
  StrategyRows rows;
  for (int64_t d = 0; d < n; ++d) {
    if (!new_dim && d == dim) continue;
    Placements row = detail::uniform_row(width, Shard(d));
    if (new_dim && d >= dim) row[0] = Shard(d + 1);
    rows.push_back(std::move(row));
  }
  detail::add_partial_passthrough_rows(rows, width);
  return rows;
}

void register_multi_views(Registry& r) {
  OpInfo ca = detail::make_op("cat", {"tensors"}, Linearity::kLinear);
  ca.saved_inputs = 0;
  ca.kernel = single_output([](const KernelContext& c, absl::Span<const Tensor> l) {
    return cat(std::vector<Tensor>(l.begin(), l.end()), c.arg<int64_t>(0));
  });
  ca.meta = [](const OpSchema& s) {
    const DTensorSpec& first = s.input(0);
    const int64_t dim = normalize_dim(s.arg<int64_t>(0), first.ndim(), "cat");
    Shape shape = first.shape();
    for (int64_t i = 1; i < s.num_inputs(); ++i) {
      const DTensorSpec& x = s.input(i);
      DT_CHECK(x.ndim() == first.ndim() && x.dtype() == first.dtype(),
               "[cat] tensor %d has shape %s and dtype %s, expected %d dims and dtype %s", i,
               shape_str(x.shape()), dtype_name(x.dtype()), first.ndim(),
               dtype_name(first.dtype()));
      for (int64_t d = 0; d < first.ndim(); ++d) {
        DT_CHECK(d == dim || x.shape()[d] == shape[d],
                 "[cat] tensor %d has shape %s, expected size %d at dim %d (cat dim %d)", i,
                 shape_str(x.shape()), shape[d], d, dim);
      }
      shape[dim] += x.shape()[dim];
    }
    return OutputMetas{TensorMeta(shape, first.dtype())};
  };
  ca.strategy = [](const OpSchema& s) {
    const int64_t n = s.input(0).ndim();
    return join_rows(n, normalize_dim(s.arg<int64_t>(0), n, "cat"), 1 + s.num_inputs(),
                     /*new_dim=*/false);
  };
  ca.samples = [name = ca.name](int64_t w) { return view_samples(name, w); };
  ca.backward = detail::view_grad(ca.name);
  r.add(std::move(ca));

  OpInfo st = detail::make_op("stack", {"tensors"}, Linearity::kLinear);
  st.saved_inputs = 0;
  st.kernel = single_output([](const KernelContext& c, absl::Span<const Tensor> l) {
    return stack(std::vector<Tensor>(l.begin(), l.end()), c.arg<int64_t>(0));
  });
  st.meta = [](const OpSchema& s) {
    const DTensorSpec& first = s.input(0);
    const int64_t dim = normalize_dim(s.arg<int64_t>(0), first.ndim() + 1, "stack");
    for (int64_t i = 1; i < s.num_inputs(); ++i) {
      DT_CHECK(s.input(i).shape() == first.shape() && s.input(i).dtype() == first.dtype(),
               "[stack] tensor %d has shape %s and dtype %s, expected shape %s and dtype %s", i,
               shape_str(s.input(i).shape()), dtype_name(s.input(i).dtype()),
               shape_str(first.shape()), dtype_name(first.dtype()));
    }
    Shape shape = first.shape();
    shape.insert(shape.begin() + dim, s.num_inputs());
    return OutputMetas{TensorMeta(shape, first.dtype())};
  };
  st.strategy = [](const OpSchema& s) {
    const int64_t n = s.input(0).ndim();
    return join_rows(n, normalize_dim(s.arg<int64_t>(0), n + 1, "stack"), 1 + s.num_inputs(),
                     /*new_dim=*/true);
  };
  st.samples = [name = st.name](int64_t w) { return view_samples(name, w); };
  st.backward = detail::view_grad(st.name);
  r.add(std::move(st));

  // split_with_sizes(sizes, dim): one output per size; split and chunk reduce to it.
  OpInfo sp = detail::make_op("split", {"self"}, Linearity::kLinear);
  sp.view = true;
  sp.saved_inputs = 0;
  sp.kernel = [](const KernelContext& c, absl::Span<const Tensor> l, absl::Span<Tensor> outs) {
    std::vector<Tensor> parts = split(l[0], c.arg<Shape>(0), c.arg<int64_t>(1));
    std::copy(parts.begin(), parts.end(), outs.begin());
  };
  sp.meta = [](const OpSchema& s) {
    const std::vector<Tensor> parts = split(meta_tensor(s.input(0).shape(), s.input(0).dtype()),
                                            s.arg<Shape>(0), s.arg<int64_t>(1));
    OutputMetas metas;
    for (const Tensor& p : parts) metas.push_back(TensorMeta(p.sizes(), p.dtype()));
    return metas;
  };
  sp.strategy = [](const OpSchema& s) {
    const int64_t n = s.input(0).ndim();
    const int64_t dim = normalize_dim(s.arg<int64_t>(1), n, "split");
    const int64_t nout = static_cast<int64_t>(s.arg<Shape>(0).size());
    StrategyRows rows = detail::rows_all_but(n, dim, nout + 1);
    detail::add_partial_passthrough_rows(rows, nout + 1);
    return rows;
  };
  sp.samples = [name = sp.name](int64_t w) { return view_samples(name, w); };
  sp.backward = detail::view_grad(sp.name);
  r.add(std::move(sp));
}

// select_backward / slice_backward: the output's dims map to the gradient's (select removed
// `dim`); `dim` itself is whole in the output.
StrategyRows backward_rows(const OpSchema& s, bool removes_dim) {
  const int64_t n = static_cast<int64_t>(s.arg<Shape>(0).size());
  const int64_t dim = normalize_dim(s.arg<int64_t>(1), n, s.name());
  StrategyRows rows;
  for (int64_t d = 0; d < n; ++d) {
    if (d == dim) continue;
    rows.push_back({Shard(d), Shard(removes_dim && d > dim ? d - 1 : d)});
  }
  return rows;
}

// select_backward(grad; input_shape, dim, index) and slice_backward(grad; input_shape, dim,
// start, end, step), the ops view_backward.cc's formulas dispatch: zeros of input_shape with
// `grad` written at the selected index / slice. Every other dim may stay sharded; linear in grad.
void register_view_backward_ops(Registry& reg) {
  using detail::gradient_op;
  using detail::sample;
  using detail::short_size;
  for (const bool is_select : {true, false}) {
    OpInfo op =
        gradient_op(is_select ? "select_backward" : "slice_backward", {"grad"}, Linearity::kLinear);
    op.meta = [](const OpSchema& s) {
      return OutputMetas{TensorMeta(s.arg<Shape>(0), s.input(0).dtype())};
    };
    op.strategy = [is_select](const OpSchema& s) { return backward_rows(s, is_select); };
    // Linear in grad: its gradient is the forward view of the incoming one (create_graph).
    op.differentiable = true;
    op.backward = detail::view_grad(op.name);
    op.kernel = single_output([is_select](const KernelContext& c, absl::Span<const Tensor> l) {
      Tensor out = zeros(c.output_shard(0).shape, TensorOptions(l[0].dtype(), l[0].device()));
      const int64_t dim = c.arg<int64_t>(1);
      Tensor target = is_select
                          ? out.select(dim, c.arg<int64_t>(2))
                          : out.slice(dim, c.arg<int64_t>(2), c.arg<int64_t>(3), c.arg<int64_t>(4));
      if (target.numel() > 0) target.copy_(l[0]);
      return out;
    });
    op.samples = [is_select](int64_t w) {
      const int64_t n = 3 * w + 1, s = short_size(w);
      if (is_select) {
        return std::vector<OpSample>{{{sample({n})}, {Shape{n, 5}, int64_t{1}, int64_t{2}}},
                                     {{sample({5})}, {Shape{n, 5}, int64_t{0}, int64_t{-1}}},
                                     {{sample({s})}, {Shape{s, 5}, int64_t{1}, int64_t{2}}}};
      }
      return std::vector<OpSample>{
          {{sample({n, 2})}, {Shape{n, 5}, int64_t{1}, int64_t{1}, int64_t{5}, int64_t{2}}},
          {{sample({w, 5})}, {Shape{n, 5}, int64_t{0}, int64_t{1}, w + 1, int64_t{1}}},
          {{sample({s, 2})}, {Shape{s, 5}, int64_t{1}, int64_t{1}, int64_t{5}, int64_t{2}}}};
    };
    reg.add(std::move(op));
  }
}

}  // namespace

void register_view_ops(Registry& registry) {
  register_single_input_views(registry);
  register_indexing_views(registry);
  register_multi_views(registry);
  register_view_backward_ops(registry);
}

}  // namespace dtensor
