#include "nn/functional.h"

#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include "dtensor/dtensor_spec.h"
#include "nn/module.h"
#include "ops/elementwise/elementwise.h"
#include "ops/embedding/embedding.h"
#include "ops/matmul/matmul.h"
#include "ops/norm/norm.h"
#include "ops/softmax/softmax.h"
#include "tensor/creation.h"
#include "tensor/error.h"

namespace dtensor::nn::functional {
namespace detail {

DTensor wrap(Tensor local, const DeviceMesh& mesh, Placements placements, IntSpan global_shape,
             DType dtype) {
  auto spec = std::make_shared<const DTensorSpec>(
      mesh, std::move(placements),
      TensorMeta(Shape(global_shape.begin(), global_shape.end()), dtype));
  return DTensor(std::move(local), std::move(spec));
}

DTensor on_mesh(const DTensor& p, const DeviceMesh& mesh, std::string_view op,
                std::string_view what) {
  if (p.device_mesh() == mesh) return p;
  if (is_local(p)) {
    return wrap(p.to_local(), mesh, Placements(static_cast<size_t>(mesh.ndim()), Replicate()),
                p.shape(), p.dtype());
  }
  DT_FAIL(
      "[%s] %s is on mesh %s but the input is on mesh %s (expected the same mesh, or a "
      "local parameter)",
      op, what, p.device_mesh().str(), mesh.str());
}

DTensor to_placements(const DTensor& x, const Placements& placements) {
  if (x.placements() == placements) return x;
  // On a mesh dim of size 1 every placement holds the same local data: relabel, no collective.
  const DeviceMesh& mesh = x.device_mesh();
  Placements relabeled = x.placements();
  bool changed = false;
  for (size_t i = 0; i < relabeled.size() && i < placements.size(); ++i) {
    if (!(relabeled[i] == placements[i]) && mesh.size(static_cast<int64_t>(i)) == 1) {
      relabeled[i] = placements[i];
      changed = true;
    }
  }
  const DTensor y = changed ? wrap(x.to_local(), mesh, relabeled, x.shape(), x.dtype()) : x;
  if (y.placements() == placements) return y;
  return y.redistribute(placements);
}

}  // namespace detail

namespace {

using detail::on_mesh;
using detail::to_placements;
using detail::wrap;

void check_defined(const DTensor& x, std::string_view op, std::string_view what) {
  DT_CHECK(x.defined(), "[%s] %s is undefined (expected a DTensor)", op, what);
}

void check_same_mesh(const DTensor& a, const DTensor& b, std::string_view op) {
  DT_CHECK(a.device_mesh() == b.device_mesh(),
           "[%s] operands are on different meshes %s and %s (expected one mesh)", op,
           a.device_mesh().str(), b.device_mesh().str());
}

Placements all_replicate(int64_t n) {
  return Placements(static_cast<size_t>(n), Replicate());
}

// x's placements with every Partial replaced by Replicate (nonlinear ops reduce first).
Placements without_partial(const Placements& p) {
  Placements out = p;
  for (auto& q : out) {
    if (q.is_partial()) q = Replicate();
  }
  return out;
}

// Whether this rank is at coordinate 0 on every mesh dim whose output placement is Partial.
bool first_on_partial_dims(const DeviceMesh& mesh, const Placements& out) {
  const Shape& coord = mesh.get_coordinate();
  if (coord.empty()) return false;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i].is_partial() && coord[i] != 0) return false;
  }
  return true;
}

// Keeps placements of x whose Shard dim satisfies keep(dim); others become Replicate.
template <typename F>
Placements keep_shards(const Placements& p, F keep) {
  Placements out = p;
  for (auto& q : out) {
    if (q.is_partial() || (q.is_shard() && !keep(q.dim()))) q = Replicate();
  }
  return out;
}

}  // namespace

DTensor linear(const DTensor& x, const DTensor& weight_in, const DTensor& bias_in) {
  constexpr std::string_view kOp = "linear";
  check_defined(x, kOp, "input");
  check_defined(weight_in, kOp, "weight");
  const DeviceMesh& mesh = x.device_mesh();
  DTensor weight = on_mesh(weight_in, mesh, kOp, "weight");
  DT_CHECK(weight.dim() == 2, "[linear] weight must be 2-d [out, in], got shape %s",
           shape_str(weight.shape()));
  DT_CHECK(x.dim() >= 1, "[linear] input must have at least 1 dim, got a 0-d tensor");
  const int64_t nd = x.dim();
  const int64_t last = nd - 1;
  DT_CHECK(x.size(-1) == weight.size(1),
           "[linear] input's last dim %d does not match weight's in_features %d (input shape %s, "
           "weight shape %s)",
           x.size(-1), weight.size(1), shape_str(x.shape()), shape_str(weight.shape()));

  const auto n = static_cast<size_t>(mesh.ndim());
  Placements x_req(n), out(n), b_req(n);
  for (size_t i = 0; i < n; ++i) {
    const Placement wp = weight.placements()[i];
    const Placement xp = x.placements()[i];
    if (wp.is_replicate()) {
      x_req[i] = xp.is_shard(last) ? Replicate() : xp;
      out[i] = x_req[i];
      b_req[i] = Replicate();
    } else if (wp.is_shard(0)) {
      x_req[i] = Replicate();
      out[i] = Shard(last);
      b_req[i] = Shard(0);
    } else if (wp.is_shard(1)) {
      x_req[i] = Shard(last);
      out[i] = Partial();
      b_req[i] = Replicate();
    } else {
      DT_FAIL("[linear] unsupported weight placement %s on mesh dim %d (expected R, S(0) or S(1))",
              wp.str(), static_cast<int64_t>(i));
    }
  }
  const DTensor xin = to_placements(x, x_req);
  Tensor b;
  if (bias_in.defined()) {
    DTensor bias = on_mesh(bias_in, mesh, kOp, "bias");
    DT_CHECK(bias.dim() == 1 && bias.size(0) == weight.size(0),
             "[linear] bias must have shape [%d], got %s", weight.size(0), shape_str(bias.shape()));
    bias = to_placements(bias, b_req);
    if (first_on_partial_dims(mesh, out)) b = bias.to_local();
  }
  Tensor y = ::dtensor::linear(xin.to_local(), weight.to_local(), b);
  Shape gshape(x.shape().begin(), x.shape().end());
  gshape.back() = weight.size(0);
  return wrap(std::move(y), mesh, std::move(out), gshape, x.dtype());
}

DTensor embedding(const DTensor& indices, const DTensor& weight_in) {
  constexpr std::string_view kOp = "embedding";
  check_defined(indices, kOp, "indices");
  check_defined(weight_in, kOp, "weight");
  const DeviceMesh& mesh = indices.device_mesh();
  DTensor weight = on_mesh(weight_in, mesh, kOp, "weight");
  DT_CHECK(weight.dim() == 2, "[embedding] weight must be 2-d [num, dim], got shape %s",
           shape_str(weight.shape()));
  const int64_t out_last = indices.dim();
  const auto n = static_cast<size_t>(mesh.ndim());
  Placements idx_req(n), out(n);
  bool masked = false;
  for (size_t i = 0; i < n; ++i) {
    const Placement wp = weight.placements()[i];
    const Placement ip = indices.placements()[i];
    DT_CHECK(!ip.is_partial(), "[embedding] indices cannot be Partial (mesh dim %d)",
             static_cast<int64_t>(i));
    if (wp.is_replicate()) {
      idx_req[i] = ip;
      out[i] = ip;
    } else if (wp.is_shard(0)) {
      idx_req[i] = Replicate();
      out[i] = Partial();
      masked = true;
    } else if (wp.is_shard(1)) {
      idx_req[i] = Replicate();
      out[i] = Shard(out_last);
    } else {
      DT_FAIL(
          "[embedding] unsupported weight placement %s on mesh dim %d (expected R, S(0) or "
          "S(1))",
          wp.str(), static_cast<int64_t>(i));
    }
  }
  const DTensor idx = to_placements(indices, idx_req);
  Tensor y;
  if (masked) {
    const int64_t row_offset = mesh.contains_me() ? weight.spec().local_shard().offset[0] : 0;
    y = embedding_masked(idx.to_local(), weight.to_local(), row_offset);
  } else {
    y = ::dtensor::embedding(idx.to_local(), weight.to_local());
  }
  Shape gshape(indices.shape().begin(), indices.shape().end());
  gshape.push_back(weight.size(1));
  return wrap(std::move(y), mesh, std::move(out), gshape, weight.dtype());
}

namespace {

// Shared by layer_norm and rms_norm: moves x to a placement that keeps the last dim whole and
// the parameters to Replicate, then runs `kernel` on the local pieces.
template <typename K>
DTensor norm_common(std::string_view op, const DTensor& x, const DTensor& weight_in,
                    const DTensor& bias_in, K kernel) {
  check_defined(x, op, "input");
  DT_CHECK(x.dim() >= 1, "[%s] input must have at least 1 dim, got a 0-d tensor", op);
  const DeviceMesh& mesh = x.device_mesh();
  const int64_t last = x.dim() - 1;
  const Placements req = keep_shards(x.placements(), [&](int64_t d) { return d != last; });
  const DTensor xin = to_placements(x, req);
  const Placements rep = all_replicate(mesh.ndim());
  auto param = [&](const DTensor& p, std::string_view what) -> Tensor {
    if (!p.defined()) return Tensor();
    DTensor q = on_mesh(p, mesh, op, what);
    DT_CHECK(q.dim() == 1 && q.size(0) == x.size(-1), "[%s] %s must have shape [%d], got %s", op,
             what, x.size(-1), shape_str(q.shape()));
    return to_placements(q, rep).to_local();
  };
  const Tensor w = param(weight_in, "weight");
  const Tensor b = param(bias_in, "bias");
  Tensor y = kernel(xin.to_local(), w, b);
  return wrap(std::move(y), mesh, req, x.shape(), x.dtype());
}

}  // namespace

DTensor layer_norm(const DTensor& x, const DTensor& weight, const DTensor& bias, double eps) {
  return norm_common("layer_norm", x, weight, bias,
                     [&](const Tensor& xl, const Tensor& w, const Tensor& b) {
                       const int64_t d = xl.size(-1);
                       return ::dtensor::layer_norm(xl, IntSpan(&d, 1), w, b, eps);
                     });
}

DTensor rms_norm(const DTensor& x, const DTensor& weight, std::optional<double> eps) {
  return norm_common("rms_norm", x, weight, DTensor(),
                     [&](const Tensor& xl, const Tensor& w, const Tensor&) {
                       const int64_t d = xl.size(-1);
                       return ::dtensor::rms_norm(xl, IntSpan(&d, 1), w, eps);
                     });
}

namespace {
template <typename F>
DTensor pointwise(std::string_view op, const DTensor& x, F f) {
  check_defined(x, op, "input");
  const DTensor xin = to_placements(x, without_partial(x.placements()));
  return wrap(f(xin.to_local()), x.device_mesh(), xin.placements(), x.shape(), x.dtype());
}
}  // namespace

DTensor gelu(const DTensor& x) {
  return pointwise("gelu", x, [](const Tensor& t) { return ::dtensor::gelu(t); });
}

DTensor silu(const DTensor& x) {
  return pointwise("silu", x, [](const Tensor& t) { return ::dtensor::silu(t); });
}

namespace {
template <typename F>
DTensor binary(std::string_view op, const DTensor& a, const DTensor& b, bool linear_in_partial,
               F f) {
  check_defined(a, op, "self");
  check_defined(b, op, "other");
  check_same_mesh(a, b, op);
  DT_CHECK(a.shape() == b.shape(),
           "[%s] operands have different shapes %s and %s (expected equal shapes)", op,
           shape_str(a.shape()), shape_str(b.shape()));
  Placements pa = linear_in_partial ? a.placements() : without_partial(a.placements());
  const DTensor ain = to_placements(a, pa);
  const DTensor bin = to_placements(b, pa);
  Tensor y = f(ain.to_local(), bin.to_local());
  const DType dt = y.defined() ? y.dtype() : a.dtype();
  return wrap(std::move(y), a.device_mesh(), std::move(pa), a.shape(), dt);
}
}  // namespace

DTensor add(const DTensor& a, const DTensor& b) {
  return binary("add", a, b, true,
                [](const Tensor& x, const Tensor& y) { return ::dtensor::add(x, y); });
}

DTensor mul(const DTensor& a, const DTensor& b) {
  return binary("mul", a, b, false,
                [](const Tensor& x, const Tensor& y) { return ::dtensor::mul(x, y); });
}

DTensor scaled_dot_product_attention(const DTensor& q, const DTensor& k, const DTensor& v,
                                     int64_t head_dim, bool causal) {
  constexpr std::string_view kOp = "scaled_dot_product_attention";
  check_defined(q, kOp, "q");
  check_defined(k, kOp, "k");
  check_defined(v, kOp, "v");
  check_same_mesh(q, k, kOp);
  check_same_mesh(q, v, kOp);
  DT_CHECK(q.dim() == 3, "[%s] q must be 3-d [batch, seq, heads * head_dim], got shape %s", kOp,
           shape_str(q.shape()));
  DT_CHECK(k.shape() == q.shape() && v.shape() == q.shape(),
           "[%s] q, k and v must have one shape, got %s, %s and %s", kOp, shape_str(q.shape()),
           shape_str(k.shape()), shape_str(v.shape()));
  DT_CHECK(head_dim > 0 && q.size(2) % head_dim == 0,
           "[%s] head_dim %d must be positive and divide the width %d", kOp, head_dim, q.size(2));
  const Placements req = keep_shards(q.placements(), [](int64_t d) { return d == 0 || d == 2; });
  const Tensor ql = to_placements(q, req).to_local();
  const Tensor kl = to_placements(k, req).to_local();
  const Tensor vl = to_placements(v, req).to_local();
  const int64_t B = ql.size(0), S = ql.size(1), W = ql.size(2);
  DT_CHECK(W % head_dim == 0,
           "[%s] local width %d is not a multiple of head_dim %d: a shard would split a head "
           "(placements %s; the number of heads must be divisible by the number of shards)",
           kOp, W, head_dim, placements_str(q.placements()));
  const int64_t H = W / head_dim;
  const Shape split{B, S, H, head_dim};
  auto heads = [&](const Tensor& t) { return t.reshape(split).transpose(1, 2); };  // [B,H,S,hd]
  Tensor scores = matmul(heads(ql), heads(kl).transpose(2, 3));                    // [B,H,S,S]
  scores = ::dtensor::mul(scores, Scalar(1.0 / std::sqrt(static_cast<double>(head_dim))));
  if (causal && S > 0) {
    std::vector<float> mask(static_cast<size_t>(S * S), 0.0f);
    for (int64_t i = 0; i < S; ++i) {
      for (int64_t j = i + 1; j < S; ++j) {
        mask[static_cast<size_t>(i * S + j)] = -std::numeric_limits<float>::infinity();
      }
    }
    Tensor m = from_vector(mask, {S, S}).to(ql.device(), scores.dtype());
    scores = ::dtensor::add(scores, m);
  }
  Tensor p = softmax(scores, -1);
  Tensor o = matmul(p, heads(vl));  // [B,H,S,hd]
  o = o.transpose(1, 2).reshape({B, S, W});
  return wrap(std::move(o), q.device_mesh(), req, q.shape(), q.dtype());
}

}  // namespace dtensor::nn::functional
