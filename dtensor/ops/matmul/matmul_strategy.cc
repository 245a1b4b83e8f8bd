// Registration of the matmul family: strategies (rows for ONE mesh dim; the engine expands
// them), meta functions and local kernels. The Megatron rows for mm:
//   [S(0) | S(0), R]     row-sharded a: each rank computes its rows
//   [S(1) | R, S(1)]     column-sharded b: each rank computes its columns
//   [P(sum) | S(1), S(0)] contraction dim sharded: each rank holds a partial sum
// Batch dims shard like pointwise dims (broadcast batch dims replicated). Without a bias the
// products are multilinear (a Partial operand times a replicated one stays Partial). mm, bmm,
// addmm and baddbmm take their product rows from the einsum generator ("mk,kn->mn",
// "bmk,bkn->bmn"; einsum_strategy.cc), which yields exactly the rows above in this order;
// matmul keeps matmul_rows (its 1-d and broadcast batch rules depend on the operand ranks).
#include <optional>

#include "dtensor/autograd/function.h"
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/ops/common/detail/op_checks.h"
#include "dtensor/ops/common/detail/strategy_util.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/detail/einsum.h"
#include "dtensor/ops/matmul/detail/matmul_backward.h"
#include "dtensor/ops/matmul/einsum.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/register_all.h"
#include "dtensor/tensor/error.h"

namespace dtensor {
namespace {

// Where the dims of a (batched) product live, for matmul's broadcasting rules.
struct MatmulDims {
  Shape out;                   // output shape
  int64_t batch = 0;           // number of output batch dims
  std::optional<int64_t> a_n;  // a's row dim (absent for a 1-d a)
  int64_t a_k = 0;             // a's contraction dim
  int64_t b_k = 0;             // b's contraction dim
  std::optional<int64_t> b_m;  // b's column dim (absent for a 1-d b)
  std::optional<int64_t> out_n;
  std::optional<int64_t> out_m;
};

MatmulDims matmul_dims(std::string_view op, const Shape& a, const Shape& b) {
  DT_CHECK(!a.empty() && !b.empty(), "[%s] both arguments need at least 1 dim, got %s and %s", op,
           shape_str(a), shape_str(b));
  MatmulDims m;
  const int64_t an = static_cast<int64_t>(a.size()), bn = static_cast<int64_t>(b.size());
  m.a_k = an - 1;
  if (an >= 2) m.a_n = an - 2;
  m.b_k = bn >= 2 ? bn - 2 : 0;
  if (bn >= 2) m.b_m = bn - 1;
  DT_CHECK(a[m.a_k] == b[m.b_k], "[%s] shapes %s and %s cannot be multiplied (%d != %d)", op,
           shape_str(a), shape_str(b), a[m.a_k], b[m.b_k]);
  const int64_t a_batch = std::max<int64_t>(an - 2, 0), b_batch = std::max<int64_t>(bn - 2, 0);
  m.out = detail::broadcast_pair(op, IntSpan(a.data(), a_batch), IntSpan(b.data(), b_batch),
                                 "other (batch dims)");
  m.batch = static_cast<int64_t>(m.out.size());
  if (m.a_n) {
    m.out_n = static_cast<int64_t>(m.out.size());
    m.out.push_back(a[*m.a_n]);
  }
  if (m.b_m) {
    m.out_m = static_cast<int64_t>(m.out.size());
    m.out.push_back(b[*m.b_m]);
  }
  return m;
}

// Rows [out | a, b] for a @ b: the batch dims, a's rows, b's columns, and the contraction
// (Partial). Ops with a bias add its placement to each row themselves (bias_placement below).
StrategyRows matmul_rows(const Shape& a, const Shape& b, const MatmulDims& m) {
  StrategyRows rows;
  const int64_t a_batch = std::max<int64_t>(static_cast<int64_t>(a.size()) - 2, 0);
  const int64_t b_batch = std::max<int64_t>(static_cast<int64_t>(b.size()) - 2, 0);
  for (int64_t d = 0; d < m.batch; ++d) {
    const int64_t i = d - (m.batch - a_batch), j = d - (m.batch - b_batch);
    const Placement pa = i >= 0 && a[i] == m.out[d] ? Shard(i) : Replicate();
    const Placement pb = j >= 0 && b[j] == m.out[d] ? Shard(j) : Replicate();
    if (pa.is_replicate() && pb.is_replicate()) continue;
    rows.push_back({Shard(d), pa, pb});
  }
  if (m.out_n) rows.push_back({Shard(*m.out_n), Shard(*m.a_n), Replicate()});
  if (m.out_m) rows.push_back({Shard(*m.out_m), Replicate(), Shard(*m.b_m)});
  rows.push_back({Partial(), Shard(m.a_k), Shard(m.b_k)});
  return rows;
}

// The placement of a bias broadcast to `out` that matches output placement `p` of one row:
// sharded along its aligned dim when it has the full size there, Partial when the output is
// Partial (bias partitioned, so the sum over ranks adds it once), replicated otherwise.
Placement bias_placement(const Shape& bias, const Shape& out, const Placement& p) {
  if (p.is_partial()) return p;
  if (!p.is_shard()) return Replicate();
  const int64_t k =
      p.dim() - (static_cast<int64_t>(out.size()) - static_cast<int64_t>(bias.size()));
  return k >= 0 && bias[k] == out[p.dim()] ? Shard(k) : Replicate();
}

void check_2d(const OpSchema& s, int64_t i) {
  DT_CHECK(s.input(i).ndim() == 2, "[%s] argument %s must be 2-d, got shape %s", s.name(),
           s.op().input_name(i), shape_str(s.input(i).shape()));
}

void check_dtypes(const OpSchema& s) {
  for (int64_t i = 1; i < s.num_inputs(); ++i) {
    DT_CHECK(s.input(i).dtype() == s.input(0).dtype(),
             "[%s] argument %s has dtype %s, expected %s (operands share one dtype)", s.name(),
             s.op().input_name(i), dtype_name(s.input(i).dtype()), dtype_name(s.input(0).dtype()));
  }
}

void check_bias(const OpSchema& s, int64_t i, const Shape& out) {
  const Shape& bias = s.input(i).shape();
  DT_CHECK(bias.size() <= out.size(), "[%s] argument %s with shape %s does not broadcast to %s",
           s.name(), s.op().input_name(i), shape_str(bias), shape_str(out));
  for (size_t k = 0; k < bias.size(); ++k) {
    const int64_t o = out[out.size() - bias.size() + k];
    DT_CHECK(bias[k] == o || bias[k] == 1,
             "[%s] argument %s with shape %s does not broadcast to %s", s.name(),
             s.op().input_name(i), shape_str(bias), shape_str(out));
  }
}

using Locals = absl::Span<const Tensor>;

constexpr std::string_view kMmEquation = "mk,kn->mn";
constexpr std::string_view kBmmEquation = "bmk,bkn->bmn";

OpInfo product_op(const char* name, std::vector<std::string> inputs,
                  Tensor (*kernel)(const KernelContext&, Locals)) {
  OpInfo info = detail::make_op(name, std::move(inputs));
  info.kernel = single_output(kernel);
  return info;
}

}  // namespace

void register_matmul_ops(Registry& reg) {
  // mm(self[n, k], mat2[k, m]).
  OpInfo mm = product_op("mm", {"self", "mat2"},
                         [](const KernelContext&, Locals l) { return dtensor::mm(l[0], l[1]); });
  mm.linearity = Linearity::kMultilinear;
  mm.meta = [](const OpSchema& s) {
    check_2d(s, 0);
    check_2d(s, 1);
    check_dtypes(s);
    return OutputMetas{TensorMeta(matmul_dims("mm", s.input(0).shape(), s.input(1).shape()).out,
                                  s.input(0).dtype())};
  };
  mm.strategy = [](const OpSchema& s) {
    const Shape shapes[] = {s.input(0).shape(), s.input(1).shape()};
    return detail::einsum_strategy_rows(kMmEquation, shapes);
  };
  mm.samples = [](int64_t w) {
    using detail::sample;
    return std::vector<OpSample>{{{sample({3 * w + 1, 2 * w}), sample({2 * w, 5})}, {}},
                                 {{sample({4, w + 1}), sample({w + 1, 3})}, {}},
                                 {{sample({1, 3}), sample({3, 1})}, {}}};
  };
  mm.backward = detail::mm_backward;
  reg.add(std::move(mm));

  // bmm(self[B, n, k], mat2[B, k, m]): equal batch sizes.
  OpInfo bmm = product_op("bmm", {"self", "mat2"},
                          [](const KernelContext&, Locals l) { return dtensor::bmm(l[0], l[1]); });
  bmm.linearity = Linearity::kMultilinear;
  bmm.meta = [](const OpSchema& s) {
    const Shape &a = s.input(0).shape(), &b = s.input(1).shape();
    DT_CHECK(a.size() == 3 && b.size() == 3 && a[0] == b[0],
             "[bmm] expected 3-d operands with equal batch sizes, got %s and %s", shape_str(a),
             shape_str(b));
    check_dtypes(s);
    return OutputMetas{TensorMeta(matmul_dims("bmm", a, b).out, s.input(0).dtype())};
  };
  bmm.strategy = [](const OpSchema& s) {
    const Shape shapes[] = {s.input(0).shape(), s.input(1).shape()};
    return detail::einsum_strategy_rows(kBmmEquation, shapes);
  };
  bmm.samples = [](int64_t w) {
    using detail::sample;
    return std::vector<OpSample>{{{sample({2, 3 * w + 1, 4}), sample({2, 4, 3})}, {}},
                                 {{sample({w + 1, 2, 3}), sample({w + 1, 3, 2 * w})}, {}},
                                 {{sample({2, detail::short_size(w), 4}), sample({2, 4, 3})}, {}}};
  };
  bmm.backward = detail::bmm_backward;
  reg.add(std::move(bmm));

  // matmul(self, other): torch.matmul's 1-d and broadcasting rules.
  OpInfo matmul = product_op("matmul", {"self", "other"}, [](const KernelContext&, Locals l) {
    return dtensor::matmul(l[0], l[1]);
  });
  matmul.linearity = Linearity::kMultilinear;
  matmul.meta = [](const OpSchema& s) {
    check_dtypes(s);
    return OutputMetas{TensorMeta(matmul_dims("matmul", s.input(0).shape(), s.input(1).shape()).out,
                                  s.input(0).dtype())};
  };
  matmul.strategy = [](const OpSchema& s) {
    const Shape &a = s.input(0).shape(), &b = s.input(1).shape();
    return matmul_rows(a, b, matmul_dims("matmul", a, b));
  };
  matmul.samples = [](int64_t w) {
    using detail::sample;
    return std::vector<OpSample>{{{sample({3 * w + 1, 2 * w}), sample({2 * w, 5})}, {}},
                                 {{sample({2, 3, w + 1}), sample({w + 1, 4})}, {}},
                                 {{sample({5}), sample({5, 3 * w + 1})}, {}},
                                 {{sample({3 * w + 1, 4}), sample({4})}, {}},
                                 {{sample({2, 1, 3, 4}), sample({w + 1, 4, 2})}, {}},
                                 {{sample({detail::short_size(w), 4}), sample({4, 3})}, {}}};
  };
  matmul.backward = detail::matmul_backward;
  reg.add(std::move(matmul));

  // dot(self[n], other[n]) -> 0-d: both sharded alike give Partial(sum).
  OpInfo dot = product_op("dot", {"self", "other"},
                          [](const KernelContext&, Locals l) { return dtensor::dot(l[0], l[1]); });
  dot.linearity = Linearity::kMultilinear;
  dot.meta = [](const OpSchema& s) {
    const Shape &a = s.input(0).shape(), &b = s.input(1).shape();
    DT_CHECK(a.size() == 1 && b.size() == 1 && a[0] == b[0],
             "[dot] expected two 1-d tensors of one size, got shapes %s and %s", shape_str(a),
             shape_str(b));
    check_dtypes(s);
    return OutputMetas{TensorMeta(Shape{}, s.input(0).dtype())};
  };
  dot.strategy = [](const OpSchema&) { return StrategyRows{{Partial(), Shard(0), Shard(0)}}; };
  dot.samples = [](int64_t w) {
    using detail::sample;
    return std::vector<OpSample>{{{sample({3 * w + 1}), sample({3 * w + 1})}, {}},
                                 {{sample({w - 1}), sample({w - 1})}, {}}};
  };
  dot.backward = detail::dot_backward;
  reg.add(std::move(dot));

  // outer(self[n], vec2[m]) -> [n, m]: self sharded gives rows, vec2 sharded columns.
  OpInfo outer = product_op("outer", {"self", "vec2"}, [](const KernelContext&, Locals l) {
    return dtensor::outer(l[0], l[1]);
  });
  outer.linearity = Linearity::kMultilinear;
  outer.meta = [](const OpSchema& s) {
    const Shape &a = s.input(0).shape(), &b = s.input(1).shape();
    DT_CHECK(a.size() == 1 && b.size() == 1,
             "[outer] expected two 1-d tensors, got shapes %s and %s", shape_str(a), shape_str(b));
    check_dtypes(s);
    return OutputMetas{TensorMeta(Shape{a[0], b[0]}, s.input(0).dtype())};
  };
  outer.strategy = [](const OpSchema&) {
    return StrategyRows{{Shard(0), Shard(0), Replicate()}, {Shard(1), Replicate(), Shard(0)}};
  };
  outer.samples = [](int64_t w) {
    using detail::sample;
    return std::vector<OpSample>{{{sample({3 * w + 1}), sample({2 * w + 1})}, {}},
                                 {{sample({2}), sample({w + 2})}, {}},
                                 {{sample({detail::short_size(w)}), sample({3})}, {}}};
  };
  outer.backward = detail::outer_backward;
  reg.add(std::move(outer));

  // addmm(self = bias, mat1, mat2; beta, alpha runtime): beta * bias + alpha * mat1 @ mat2;
  // baddbmm(self, batch1, batch2; beta, alpha) the same with bmm.
  for (const bool batched : {false, true}) {
    const char* name = batched ? "baddbmm" : "addmm";
    OpInfo op = product_op(
        name, {"self", batched ? "batch1" : "mat1", batched ? "batch2" : "mat2"},
        batched
            ? +[](const KernelContext& c,
                  Locals l) { return dtensor::baddbmm(l[0], l[1], l[2], c.scalar(0), c.scalar(1)); }
            : +[](const KernelContext& c, Locals l) {
                return dtensor::addmm(l[0], l[1], l[2], c.scalar(0), c.scalar(1));
              });
    op.schema_info.static_argnum = 2;
    op.meta = [batched, name](const OpSchema& s) {
      const Shape &a = s.input(1).shape(), &b = s.input(2).shape();
      if (batched) {
        DT_CHECK(a.size() == 3 && b.size() == 3 && a[0] == b[0],
                 "[baddbmm] expected 3-d operands with equal batch sizes, got %s and %s",
                 shape_str(a), shape_str(b));
      } else {
        check_2d(s, 1);
        check_2d(s, 2);
      }
      check_dtypes(s);
      const MatmulDims m = matmul_dims(name, a, b);
      check_bias(s, 0, m.out);
      return OutputMetas{TensorMeta(m.out, s.input(1).dtype())};
    };
    op.strategy = [name, batched](const OpSchema& s) {
      const Shape &bias = s.input(0).shape(), &a = s.input(1).shape(), &b = s.input(2).shape();
      const MatmulDims m = matmul_dims(name, a, b);
      const Shape shapes[] = {a, b};
      StrategyRows rows;
      for (const Placements& r :
           detail::einsum_strategy_rows(batched ? kBmmEquation : kMmEquation, shapes)) {
        rows.push_back({r[0], bias_placement(bias, m.out, r[0]), r[1], r[2]});
      }
      return rows;
    };
    op.samples =
        batched ? SampleFn([](int64_t w) {
          using detail::sample;
          return std::vector<OpSample>{
              {{sample({4}), sample({w + 1, 3, 2 * w}), sample({w + 1, 2 * w, 4})}, {0.5, 2.0}},
              {{sample({2, 3 * w + 1, 3}), sample({2, 3 * w + 1, w + 1}), sample({2, w + 1, 3})},
               {1.0, 1.0}},
              {{sample({4}), sample({2, detail::short_size(w), 3}), sample({2, 3, 4})},
               {1.0, 1.0}}};
        })
                : SampleFn([](int64_t w) {
                    using detail::sample;
                    return std::vector<OpSample>{
                        {{sample({5}), sample({3 * w + 1, 2 * w}), sample({2 * w, 5})}, {0.5, 2.0}},
                        {{sample({3 * w + 1, 5}), sample({3 * w + 1, w + 1}), sample({w + 1, 5})},
                         {1.0, 1.0}},
                        {{sample({5}), sample({detail::short_size(w), 3}), sample({3, 5})},
                         {1.0, 1.0}}};
                  });
    op.backward = batched ? detail::baddbmm_backward : detail::addmm_backward;
    op.saved_inputs = 6u;  // mat1, mat2 (the bias's gradient needs only its spec)
    reg.add(std::move(op));
  }

  // linear(input[..., in], weight[out, in]) and linear.bias(..., bias[out]): input @ weight^T
  // (+ bias). Colwise: [S(last) | R, S(0), S(0)]; rowwise: [P | S(last), S(1), P] (a
  // replicated bias is partitioned first: kept on coordinate 0, zeros elsewhere, so the sum
  // over ranks adds it once). Without a bias the product is multilinear; with one it is affine
  // (no Partial pass-through).
  for (const bool has_bias : {false, true}) {
    OpInfo linear =
        has_bias ? product_op("linear.bias", {"input", "weight", "bias"},
                              [](const KernelContext&, Locals l) {
                                return dtensor::linear(l[0], l[1], l[2]);
                              })
                 : product_op("linear", {"input", "weight"}, [](const KernelContext&, Locals l) {
                     return dtensor::linear(l[0], l[1]);
                   });
    linear.linearity = has_bias ? Linearity::kNone : Linearity::kMultilinear;
    linear.meta = [](const OpSchema& s) {
      const Shape &x = s.input(0).shape(), &w = s.input(1).shape();
      check_2d(s, 1);
      check_dtypes(s);
      DT_CHECK(!x.empty() && x.back() == w[1],
               "[%s] input with shape %s does not match weight with shape %s (in features %d)",
               s.name(), shape_str(x), shape_str(w), w[1]);
      Shape out = x;
      out.back() = w[0];
      if (s.num_inputs() == 3) check_bias(s, 2, out);
      return OutputMetas{TensorMeta(out, s.input(0).dtype())};
    };
    linear.strategy = [](const OpSchema& s) {
      const Shape& x = s.input(0).shape();
      const int64_t last = static_cast<int64_t>(x.size()) - 1;
      const bool bias = s.num_inputs() == 3;
      Shape out = x;
      out.back() = s.input(1).shape()[0];
      StrategyRows rows;
      auto add_row = [&](Placement o, Placement px, Placement pw) {
        Placements row = {o, px, pw};
        if (bias) row.push_back(bias_placement(s.input(2).shape(), out, o));
        rows.push_back(std::move(row));
      };
      for (int64_t d = 0; d < last; ++d) add_row(Shard(d), Shard(d), Replicate());
      add_row(Shard(last), Replicate(), Shard(0));
      add_row(Partial(), Shard(last), Shard(1));
      return rows;
    };
    linear.samples = [has_bias](int64_t w) {
      using detail::sample;
      std::vector<OpSample> out = {{{sample({2, 3 * w + 1, 2 * w}), sample({5, 2 * w})}, {}},
                                   {{sample({3 * w + 1, 4}), sample({w + 1, 4})}, {}},
                                   {{sample({detail::short_size(w), 4}), sample({3, 4})}, {}}};
      if (has_bias) {
        out[0].inputs.push_back(sample({5}));
        out[1].inputs.push_back(sample({w + 1}));
        out[2].inputs.push_back(sample({3}));
      }
      return out;
    };
    linear.backward = detail::linear_backward;
    linear.saved_inputs = 3u;  // input, weight
    reg.add(std::move(linear));
  }
}

}  // namespace dtensor
