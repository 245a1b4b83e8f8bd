#include "test_ops.h"

#include <algorithm>

#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/error.h"

namespace dtensor::testing {
namespace {

StrategyRows shard_rows(int64_t ndim, int64_t width) {
  StrategyRows rows;
  for (int64_t d = 0; d < ndim; ++d) rows.push_back(Placements(width, Shard(d)));
  return rows;
}

OutputMetas same_meta(const OpSchema& s) {
  return {s.input(0).meta()};
}

TestOps register_test_ops() {
  Registry& reg = op_registry();
  TestOps ops{};

  OpInfo add;
  add.name = "t_add";
  add.input_names = {"self", "other"};
  add.schema_info.static_argnum = 1;  // alpha is a runtime value
  add.linearity = Linearity::kLinear;
  add.meta = [](const OpSchema& s) {
    DT_CHECK(s.input(0).shape() == s.input(1).shape(),
             "[t_add] argument other has shape %s, expected %s", shape_str(s.input(1).shape()),
             shape_str(s.input(0).shape()));
    return same_meta(s);
  };
  add.strategy = [](const OpSchema& s) { return shard_rows(s.input(0).ndim(), 3); };
  add.kernel = single_output([](const KernelContext& c, absl::Span<const Tensor> l) {
    return naive_add(l[0], l[1], c.scalar(0).to_double());
  });
  ops.add = &reg.add(std::move(add));

  OpInfo scale;
  scale.name = "t_scale";
  scale.input_names = {"self"};
  scale.schema_info.static_argnum = 1;
  scale.linearity = Linearity::kLinear;
  scale.meta = same_meta;
  scale.strategy = [](const OpSchema& s) { return shard_rows(s.input(0).ndim(), 2); };
  scale.kernel = single_output([](const KernelContext& c, absl::Span<const Tensor> l) {
    return naive_scale(l[0], c.scalar(0).to_double());
  });
  ops.scale = &reg.add(std::move(scale));

  OpInfo sum;
  sum.name = "t_sum";
  sum.input_names = {"self"};
  sum.linearity = Linearity::kLinear;
  sum.meta = [](const OpSchema& s) {
    const int64_t dim = normalize_dim(s.arg<int64_t>(0), s.input(0).ndim(), "t_sum");
    Shape shape = s.input(0).shape();
    if (s.arg<bool>(1)) {
      shape[dim] = 1;
    } else {
      shape.erase(shape.begin() + dim);
    }
    return OutputMetas{TensorMeta(shape, s.input(0).dtype())};
  };
  sum.strategy = [](const OpSchema& s) {
    const int64_t ndim = s.input(0).ndim();
    const int64_t dim = normalize_dim(s.arg<int64_t>(0), ndim, "t_sum");
    const bool keepdim = s.arg<bool>(1);
    StrategyRows rows;
    for (int64_t d = 0; d < ndim; ++d) {
      if (d == dim) {
        rows.push_back({Partial(), Shard(d)});
      } else {
        rows.push_back({Shard(keepdim || d < dim ? d : d - 1), Shard(d)});
      }
    }
    return rows;
  };
  sum.kernel = single_output([](const KernelContext& c, absl::Span<const Tensor> l) {
    return naive_sum(l[0], c.arg<int64_t>(0), c.arg<bool>(1));
  });
  ops.sum = &reg.add(std::move(sum));

  OpInfo mm;
  mm.name = "t_mm";
  mm.input_names = {"self", "mat2"};
  mm.linearity = Linearity::kMultilinear;
  mm.meta = [](const OpSchema& s) {
    const Shape& a = s.input(0).shape();
    const Shape& b = s.input(1).shape();
    DT_CHECK(a.size() == 2 && b.size() == 2 && a[1] == b[0],
             "[t_mm] shapes %s and %s cannot be multiplied", shape_str(a), shape_str(b));
    return OutputMetas{TensorMeta({a[0], b[1]}, s.input(0).dtype())};
  };
  mm.strategy = [](const OpSchema&) {
    return StrategyRows{{Shard(0), Shard(0), Replicate()},
                        {Shard(1), Replicate(), Shard(1)},
                        {Partial(), Shard(1), Shard(0)}};
  };
  mm.kernel = single_output(
      [](const KernelContext&, absl::Span<const Tensor> l) { return naive_mm(l[0], l[1]); });
  ops.mm = &reg.add(std::move(mm));

  OpInfo relu;
  relu.name = "t_relu";
  relu.input_names = {"self"};
  relu.meta = same_meta;
  relu.strategy = [](const OpSchema& s) { return shard_rows(s.input(0).ndim(), 2); };
  relu.kernel = single_output(
      [](const KernelContext&, absl::Span<const Tensor> l) { return naive_relu(l[0]); });
  ops.relu = &reg.add(std::move(relu));

  OpInfo fill;
  fill.name = "t_fill_";
  fill.input_names = {"self"};
  fill.inplace = true;
  fill.meta = same_meta;
  fill.strategy = [](const OpSchema&) { return StrategyRows{}; };  // replicate only
  fill.kernel = single_output([](const KernelContext&, absl::Span<const Tensor> l) {
    Tensor self = l[0];
    self.fill_(1.0);
    return self;
  });
  ops.fill_ = &reg.add(std::move(fill));
  return ops;
}

Tensor from_floats(const std::vector<float>& v, IntSpan shape) {
  return from_vector<float>(v, shape);
}

}  // namespace

const TestOps& test_ops() {
  static const TestOps ops = register_test_ops();
  return ops;
}

Tensor make_input(IntSpan shape, int salt) {
  const int64_t n = shape_numel(shape);
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) {
    v[i] = static_cast<float>((i + salt) % 7 - 3) + 0.25f * static_cast<float>((i + salt) % 3);
  }
  return from_floats(v, shape);
}

Tensor naive_add(const Tensor& a, const Tensor& b, double alpha) {
  std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  for (size_t i = 0; i < x.size(); ++i) x[i] += static_cast<float>(alpha) * y[i];
  return from_floats(x, a.sizes());
}

Tensor naive_scale(const Tensor& a, double factor) {
  std::vector<float> x = a.to_vector<float>();
  for (float& v : x) v *= static_cast<float>(factor);
  return from_floats(x, a.sizes());
}

Tensor naive_relu(const Tensor& a) {
  std::vector<float> x = a.to_vector<float>();
  for (float& v : x) v = std::max(v, 0.0f);
  return from_floats(x, a.sizes());
}

Tensor naive_sum(const Tensor& a, int64_t dim, bool keepdim) {
  dim = normalize_dim(dim, a.dim(), "naive_sum");
  const std::vector<float> x = a.to_vector<float>();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= a.size(d);
  for (int64_t d = dim + 1; d < a.dim(); ++d) inner *= a.size(d);
  const int64_t n = a.size(dim);
  std::vector<float> y(outer * inner, 0.0f);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t k = 0; k < n; ++k) {
      for (int64_t i = 0; i < inner; ++i) y[o * inner + i] += x[(o * n + k) * inner + i];
    }
  }
  Shape shape = a.sizes();
  if (keepdim) {
    shape[dim] = 1;
  } else {
    shape.erase(shape.begin() + dim);
  }
  return from_floats(y, shape);
}

Tensor naive_mm(const Tensor& a, const Tensor& b) {
  const int64_t n = a.size(0), k = a.size(1), m = b.size(1);
  const std::vector<float> x = a.to_vector<float>(), y = b.to_vector<float>();
  std::vector<float> z(n * m, 0.0f);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t p = 0; p < k; ++p) {
      for (int64_t j = 0; j < m; ++j) z[i * m + j] += x[i * k + p] * y[p * m + j];
    }
  }
  return from_floats(z, Shape{n, m});
}

namespace {
DTensor run(const OpInfo& op, std::initializer_list<const DTensor*> in,
            std::initializer_list<ArgValue> args = {}) {
  return dispatch_sharded(op, in, args)[0];
}
}  // namespace

DTensor t_add(const DTensor& a, const DTensor& b, double alpha) {
  return run(*test_ops().add, {&a, &b}, {ArgValue(alpha)});
}

DTensor t_scale(const DTensor& a, double factor) {
  return run(*test_ops().scale, {&a}, {ArgValue(factor)});
}

DTensor t_sum(const DTensor& a, int64_t dim, bool keepdim) {
  return run(*test_ops().sum, {&a}, {ArgValue(dim), ArgValue(keepdim)});
}

DTensor t_mm(const DTensor& a, const DTensor& b) {
  return run(*test_ops().mm, {&a, &b});
}

DTensor t_relu(const DTensor& a) {
  return run(*test_ops().relu, {&a});
}

DTensor& t_fill_(DTensor& a) {
  a = run(*test_ops().fill_, {&a});
  return a;
}

}  // namespace dtensor::testing
