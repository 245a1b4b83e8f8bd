// Sharding strategies of the view and shape ops (rows for ONE mesh dim, [outputs | inputs]).
// All of them only move data, so Partial inputs pass through (Linearity::kLinear adds the
// P(sum)/P(avg) rows, add_partial_passthrough_rows the P(max)/P(min) ones).
#include <algorithm>

#include "dtensor/propagation/registry.h"
#include "ops/view/dtensor_op_util.h"
#include "tensor/error.h"
#include "tensor/shape_ops.h"

namespace dtensor {
namespace {

using detail::meta_tensor;

OutputMetas meta_of(const Tensor& t) {
  return {TensorMeta(t.sizes(), t.dtype())};
}

// Rows of a single-input, single-output op that maps input dim d to output dim map[d] (-1: the
// dim must be replicated), plus the Partial pass-through rows.
StrategyRows mapped_rows(absl::Span<const int64_t> map) {
  StrategyRows rows;
  for (size_t d = 0; d < map.size(); ++d) {
    if (map[d] >= 0) rows.push_back({Shard(map[d]), Shard(static_cast<int64_t>(d))});
  }
  detail::add_partial_passthrough_rows(rows, 2);
  return rows;
}

// view/reshape: groups of input dims and output dims with equal products (PyTorch view_groups).
// A dim of a 1:1 group keeps its sharding (uneven included). In a merged or split group only
// the leading dim may stay sharded, and only when the leading input and output sizes are both
// divisible by the mesh size: then every rank's block of the group is one contiguous run of
// the flattened group, of the same length before and after, at any nesting of mesh dims.
// Anything else is replicated first.
StrategyRows reshape_rows(const OpSchema& s, IntSpan in, IntSpan out) {
  Shape map(in.size(), -1);
  if (shape_numel(in) > 0) {
    const int64_t m = s.mesh().size();
    size_t i = 0, j = 0;
    while (i < in.size() && j < out.size()) {
      const size_t i0 = i, j0 = j;
      int64_t pi = in[i++], pj = out[j++];
      while (pi != pj) {
        if (pi < pj) {
          pi *= in[i++];
        } else {
          pj *= out[j++];
        }
      }
      const bool one_to_one = i - i0 == 1 && j - j0 == 1;
      if (one_to_one || (in[i0] % m == 0 && out[j0] % m == 0)) {
        map[i0] = static_cast<int64_t>(j0);
      }
    }
  }
  return mapped_rows(map);
}

Shape normalized_dims(IntSpan dims, int64_t ndim, std::string_view op) {
  Shape out;
  for (int64_t d : dims) out.push_back(normalize_dim(d, ndim, op));
  return out;
}

void register_single_input_views(Registry& r) {
  OpInfo tr;
  tr.name = "transpose";
  tr.input_names = {"self"};
  tr.linearity = Linearity::kLinear;
  tr.meta = [](const OpSchema& s) {
    return meta_of(meta_tensor(s.input(0).shape(), s.input(0).dtype())
                       .transpose(s.arg<int64_t>(0), s.arg<int64_t>(1)));
  };
  tr.strategy = [](const OpSchema& s) {
    const int64_t n = s.input(0).ndim();
    const int64_t a = normalize_dim(s.arg<int64_t>(0), n, "transpose");
    const int64_t b = normalize_dim(s.arg<int64_t>(1), n, "transpose");
    Shape map(n);
    for (int64_t d = 0; d < n; ++d) map[d] = d == a ? b : d == b ? a : d;
    return mapped_rows(map);
  };
  r.add(std::move(tr));

  OpInfo pe;
  pe.name = "permute";
  pe.input_names = {"self"};
  pe.linearity = Linearity::kLinear;
  pe.meta = [](const OpSchema& s) {
    return meta_of(meta_tensor(s.input(0).shape(), s.input(0).dtype()).permute(s.arg<Shape>(0)));
  };
  pe.strategy = [](const OpSchema& s) {
    const int64_t n = s.input(0).ndim();
    const Shape dims = normalized_dims(s.arg<Shape>(0), n, "permute");
    Shape map(n, -1);
    for (int64_t k = 0; k < static_cast<int64_t>(dims.size()); ++k) map[dims[k]] = k;
    return mapped_rows(map);
  };
  r.add(std::move(pe));

  OpInfo un;
  un.name = "unsqueeze";
  un.input_names = {"self"};
  un.linearity = Linearity::kLinear;
  un.meta = [](const OpSchema& s) {
    return meta_of(
        meta_tensor(s.input(0).shape(), s.input(0).dtype()).unsqueeze(s.arg<int64_t>(0)));
  };
  un.strategy = [](const OpSchema& s) {
    const int64_t n = s.input(0).ndim();
    const int64_t at = normalize_dim(s.arg<int64_t>(0), n + 1, "unsqueeze");
    Shape map(n);
    for (int64_t d = 0; d < n; ++d) map[d] = d < at ? d : d + 1;
    return mapped_rows(map);
  };
  r.add(std::move(un));

  // squeeze(dims): arg 0 lists the (normalised, global size-1) dims to drop.
  OpInfo sq;
  sq.name = "squeeze";
  sq.input_names = {"self"};
  sq.linearity = Linearity::kLinear;
  sq.meta = [](const OpSchema& s) {
    Shape shape;
    const Shape& dims = s.arg<Shape>(0);
    for (int64_t d = 0; d < s.input(0).ndim(); ++d) {
      if (std::find(dims.begin(), dims.end(), d) == dims.end()) {
        shape.push_back(s.input(0).shape()[d]);
      }
    }
    return OutputMetas{TensorMeta(shape, s.input(0).dtype())};
  };
  sq.strategy = [](const OpSchema& s) {
    const Shape& dims = s.arg<Shape>(0);
    Shape map(s.input(0).ndim(), -1);
    int64_t next = 0;
    for (int64_t d = 0; d < s.input(0).ndim(); ++d) {
      if (std::find(dims.begin(), dims.end(), d) == dims.end()) map[d] = next++;
    }
    return mapped_rows(map);
  };
  r.add(std::move(sq));

  // view / reshape: arg 0 is the output shape with any -1 already inferred.
  for (const char* name : {"view", "reshape"}) {
    OpInfo v;
    v.name = name;
    v.input_names = {"self"};
    v.linearity = Linearity::kLinear;
    v.meta = [](const OpSchema& s) {
      return OutputMetas{TensorMeta(s.arg<Shape>(0), s.input(0).dtype())};
    };
    v.strategy = [](const OpSchema& s) {
      return reshape_rows(s, s.input(0).shape(), s.arg<Shape>(0));
    };
    r.add(std::move(v));
  }

  OpInfo ex;
  ex.name = "expand";
  ex.input_names = {"self"};
  ex.linearity = Linearity::kLinear;
  ex.meta = [](const OpSchema& s) {
    return meta_of(meta_tensor(s.input(0).shape(), s.input(0).dtype()).expand(s.arg<Shape>(0)));
  };
  ex.strategy = [](const OpSchema& s) {
    const Shape& in = s.input(0).shape();
    const Shape& target = s.arg<Shape>(0);
    const int64_t lead = static_cast<int64_t>(target.size() - in.size());
    Shape map(in.size(), -1);
    for (size_t d = 0; d < in.size(); ++d) {
      // A broadcast dim (size 1 -> n) must be replicated; a kept dim maps through.
      if (target[lead + d] == -1 || target[lead + d] == in[d]) map[d] = lead + d;
    }
    return mapped_rows(map);
  };
  r.add(std::move(ex));
}

// narrow/slice/select touch one dim: it must be replicated unless the op keeps it whole.
void register_indexing_views(Registry& r) {
  OpInfo na;
  na.name = "narrow";
  na.input_names = {"self"};
  na.linearity = Linearity::kLinear;
  na.meta = [](const OpSchema& s) {
    return meta_of(meta_tensor(s.input(0).shape(), s.input(0).dtype())
                       .narrow(s.arg<int64_t>(0), s.arg<int64_t>(1), s.arg<int64_t>(2)));
  };
  na.strategy = [](const OpSchema& s) {
    const int64_t n = s.input(0).ndim();
    const int64_t dim = normalize_dim(s.arg<int64_t>(0), n, "narrow");
    const int64_t size = s.input(0).shape()[dim];
    const int64_t start = s.arg<int64_t>(1) < 0 ? s.arg<int64_t>(1) + size : s.arg<int64_t>(1);
    const bool whole = start == 0 && s.arg<int64_t>(2) == size;
    Shape map(n);
    for (int64_t d = 0; d < n; ++d) map[d] = (d != dim || whole) ? d : -1;
    return mapped_rows(map);
  };
  r.add(std::move(na));

  OpInfo sl;
  sl.name = "slice";
  sl.input_names = {"self"};
  sl.linearity = Linearity::kLinear;
  sl.meta = [](const OpSchema& s) {
    return meta_of(
        meta_tensor(s.input(0).shape(), s.input(0).dtype())
            .slice(s.arg<int64_t>(0), s.arg<int64_t>(1), s.arg<int64_t>(2), s.arg<int64_t>(3)));
  };
  sl.strategy = [](const OpSchema& s) {
    const int64_t n = s.input(0).ndim();
    const int64_t dim = normalize_dim(s.arg<int64_t>(0), n, "slice");
    const int64_t size = s.input(0).shape()[dim];
    const Tensor out = meta_tensor(s.input(0).shape(), s.input(0).dtype())
                           .slice(dim, s.arg<int64_t>(1), s.arg<int64_t>(2), s.arg<int64_t>(3));
    const bool whole = out.size(dim) == size && s.arg<int64_t>(3) == 1;
    Shape map(n);
    for (int64_t d = 0; d < n; ++d) map[d] = (d != dim || whole) ? d : -1;
    return mapped_rows(map);
  };
  r.add(std::move(sl));

  OpInfo se;
  se.name = "select";
  se.input_names = {"self"};
  se.linearity = Linearity::kLinear;
  se.meta = [](const OpSchema& s) {
    return meta_of(meta_tensor(s.input(0).shape(), s.input(0).dtype())
                       .select(s.arg<int64_t>(0), s.arg<int64_t>(1)));
  };
  se.strategy = [](const OpSchema& s) {
    const int64_t n = s.input(0).ndim();
    const int64_t dim = normalize_dim(s.arg<int64_t>(0), n, "select");
    Shape map(n);
    for (int64_t d = 0; d < n; ++d) map[d] = d < dim ? d : d == dim ? -1 : d - 1;
    return mapped_rows(map);
  };
  r.add(std::move(se));
}

// cat/stack take n inputs; split_with_sizes gives n outputs.
void register_multi_views(Registry& r) {
  OpInfo ca;
  ca.name = "cat";
  ca.input_names = {"tensors"};
  ca.linearity = Linearity::kLinear;
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
    const int64_t dim = normalize_dim(s.arg<int64_t>(0), n, "cat");
    const int64_t width = 1 + s.num_inputs();
    StrategyRows rows;
    for (int64_t d = 0; d < n; ++d) {
      if (d != dim) rows.push_back(detail::uniform_row(width, Shard(d)));
    }
    detail::add_partial_passthrough_rows(rows, width);
    return rows;
  };
  r.add(std::move(ca));

  OpInfo st;
  st.name = "stack";
  st.input_names = {"tensors"};
  st.linearity = Linearity::kLinear;
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
    const int64_t dim = normalize_dim(s.arg<int64_t>(0), n + 1, "stack");
    const int64_t width = 1 + s.num_inputs();
    StrategyRows rows;
    for (int64_t d = 0; d < n; ++d) {
      Placements row = detail::uniform_row(width, Shard(d));
      row[0] = Shard(d < dim ? d : d + 1);
      rows.push_back(std::move(row));
    }
    detail::add_partial_passthrough_rows(rows, width);
    return rows;
  };
  r.add(std::move(st));

  // split_with_sizes(sizes, dim): one output per size; split and chunk reduce to it.
  OpInfo sp;
  sp.name = "split";
  sp.input_names = {"self"};
  sp.linearity = Linearity::kLinear;
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
    StrategyRows rows;
    for (int64_t d = 0; d < n; ++d) {
      if (d != dim) rows.push_back(detail::uniform_row(nout + 1, Shard(d)));
    }
    detail::add_partial_passthrough_rows(rows, nout + 1);
    return rows;
  };
  r.add(std::move(sp));
}

}  // namespace

void register_view_ops(Registry& registry) {
  register_single_input_views(registry);
  register_indexing_views(registry);
  register_multi_views(registry);
}

}  // namespace dtensor
