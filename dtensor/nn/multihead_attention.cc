#include "dtensor/nn/multihead_attention.h"

#include <cmath>
#include <limits>
#include <string_view>
#include <utility>
#include <vector>

#include "dtensor/nn/functional.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/pool/pool.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/ops/view/view.h"
#include "dtensor/rng/dtensor_random.h"
#include "dtensor/tensor/error.h"

namespace dtensor::nn {

namespace {
constexpr std::string_view kOp = "MultiheadAttention";

// xavier_uniform_'s bound (gain 1) of a [fan_out, fan_in] weight.
double xavier_bound(int64_t fan_out, int64_t fan_in) {
  return std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
}
// xavier_normal_'s standard deviation of a [1, 1, E] bias_k / bias_v: fan_in = fan_out = E.
double bias_kv_std(int64_t e) {
  return std::sqrt(1.0 / static_cast<double>(e));
}

// out_proj: a Linear whose bias PyTorch's _reset_parameters zeroes, here after every reset too.
class OutProj : public Linear {
 public:
  OutProj(int64_t dim, bool bias, const ModuleOptions& opts) : Linear(dim, dim, bias, opts) {
    zero_bias();
  }

 protected:
  void reset_own_parameters(Generator* gen) override {
    Linear::reset_own_parameters(gen);
    zero_bias();
  }

 private:
  void zero_bias() {
    if (has_param("bias")) Tensor(param("bias").to_local()).zero_();
  }
};

// PyTorch's _canonical_mask on the input's mesh: a bool mask becomes 0 / -inf in `dtype` (true:
// -inf); a floating one is taken as it is (cast to `dtype`).
DTensor canonical_mask(const DTensor& mask, const DeviceMesh& mesh, DType dtype,
                       std::string_view name) {
  if (!mask.defined()) return mask;
  const DTensor m = functional::on_mesh(mask, mesh, kOp, name);
  if (m.dtype() == kBool) {
    return masked_fill(cast(m, dtype), m, Scalar(-std::numeric_limits<double>::infinity()));
  }
  DT_CHECK(is_floating(m.dtype()), "[%s] only bool and floating types of %s are supported, got %s",
           kOp, name, dtype_name(m.dtype()));
  return m.dtype() == dtype ? m : cast(m, dtype);
}

// [T, N, E] -> [N, heads, T, head_dim].
DTensor split_heads(const DTensor& x, int64_t heads) {
  const int64_t t = x.size(0), n = x.size(1), e = x.size(2);
  return permute(view(x, {t, n, heads, e / heads}), {1, 2, 0, 3});
}
}  // namespace

MultiheadAttention::MultiheadAttention(int64_t embed_dim, int64_t num_heads, double dropout,
                                       bool bias, bool add_bias_kv, bool add_zero_attn,
                                       std::optional<int64_t> kdim, std::optional<int64_t> vdim,
                                       bool batch_first, ModuleOptions opts)
    : embed_dim_(embed_dim),
      num_heads_(num_heads),
      kdim_(kdim.value_or(embed_dim)),
      vdim_(vdim.value_or(embed_dim)),
      dropout_(dropout),
      add_zero_attn_(add_zero_attn),
      batch_first_(batch_first) {
  DT_CHECK(embed_dim > 0 && num_heads > 0 && embed_dim % num_heads == 0,
           "[%s] embed_dim %d must be divisible by num_heads %d (both > 0)", kOp, embed_dim,
           num_heads);
  DT_CHECK(kdim_ > 0 && vdim_ > 0, "[%s] kdim %d and vdim %d must be > 0", kOp, kdim_, vdim_);
  DT_CHECK(dropout >= 0.0 && dropout <= 1.0,
           "[%s] dropout probability has to be between 0 and 1, but got %g", kOp, dropout);
  const int64_t e = embed_dim;
  if (qkv_same_embed_dim()) {
    register_parameter("in_proj_weight",
                       detail::uniform_parameter({3 * e, e}, xavier_bound(3 * e, e), opts));
  } else {
    register_parameter("q_proj_weight",
                       detail::uniform_parameter({e, e}, xavier_bound(e, e), opts));
    register_parameter("k_proj_weight",
                       detail::uniform_parameter({e, kdim_}, xavier_bound(e, kdim_), opts));
    register_parameter("v_proj_weight",
                       detail::uniform_parameter({e, vdim_}, xavier_bound(e, vdim_), opts));
  }
  if (bias) register_parameter("in_proj_bias", detail::constant_parameter({3 * e}, 0.0, opts));
  out_proj_ = std::make_shared<OutProj>(e, bias, opts);
  if (add_bias_kv) {
    for (const char* name : {"bias_k", "bias_v"}) {
      DTensor p = detail::normal_parameter({1, 1, e}, opts);
      if (!opts.device.is_meta()) mul_(Tensor(p.to_local()), Scalar(bias_kv_std(e)));
      register_parameter(name, p);
    }
  }
  register_module("out_proj", out_proj_);
}

void MultiheadAttention::reset_own_parameters(Generator* gen) {
  const int64_t e = embed_dim_;
  if (qkv_same_embed_dim()) {
    const double b = xavier_bound(3 * e, e);
    uniform_(param("in_proj_weight"), -b, b, gen);
  } else {
    for (auto [name, fan_in] : {std::pair<const char*, int64_t>{"q_proj_weight", e},
                                {"k_proj_weight", kdim_},
                                {"v_proj_weight", vdim_}}) {
      const double b = xavier_bound(e, fan_in);
      uniform_(param(name), -b, b, gen);
    }
  }
  if (has_param("in_proj_bias")) Tensor(param("in_proj_bias").to_local()).zero_();
  for (const char* name : {"bias_k", "bias_v"}) {
    if (has_param(name)) normal_(param(name), 0.0, bias_kv_std(e), gen);
  }
}

std::shared_ptr<const void> MultiheadAttention::set_forward_context(
    std::shared_ptr<const void> context) {
  std::shared_ptr<const void> previous = std::move(call_args_);
  call_args_ = std::static_pointer_cast<const MultiheadAttentionArgs>(std::move(context));
  return previous;
}

DTensor MultiheadAttention::forward(const DTensor& x) {
  MultiheadAttentionArgs args = call_args_ != nullptr ? *call_args_ : MultiheadAttentionArgs{};
  args.need_weights = false;
  return forward(x, x, x, args).attn_output;
}

MultiheadAttentionOutput MultiheadAttention::operator()(const DTensor& query, const DTensor& key,
                                                        const DTensor& value,
                                                        const MultiheadAttentionArgs& args) {
  if (!has_hooks()) return forward(query, key, value, args);
  MultiheadAttentionOutput out;
  const DTensor in[] = {query, key, value};
  DTensor attn_output = call_with_hooks(in, [&](absl::Span<const DTensor> x) {
    out = forward(x[0], x[1], x[2], args);
    return out.attn_output;
  });
  out.attn_output = std::move(attn_output);
  return out;
}

MultiheadAttentionOutput MultiheadAttention::forward(const DTensor& query, const DTensor& key,
                                                     const DTensor& value,
                                                     const MultiheadAttentionArgs& args) {
  DT_CHECK(query.defined() && key.defined() && value.defined(),
           "[%s] query, key and value must be defined DTensors", kOp);
  const bool batched = query.dim() == 3;
  DT_CHECK((query.dim() == 2 || batched) && key.dim() == query.dim() && value.dim() == query.dim(),
           "[%s] query, key and value must all be 3-d (batched) or all 2-d (unbatched), got "
           "query %s, key %s, value %s",
           kOp, shape_str(query.shape()), shape_str(key.shape()), shape_str(value.shape()));
  // [T, N, features] inputs, as F.multi_head_attention_forward sees them.
  auto canonical_input = [&](const DTensor& x) {
    if (!batched) return unsqueeze(x, 1);
    return batch_first_ ? transpose(x, 0, 1) : x;
  };
  const DTensor q_in = canonical_input(query);
  const DTensor k_in = canonical_input(key);
  const DTensor v_in = canonical_input(value);
  const int64_t L = q_in.size(0), N = q_in.size(1), E = embed_dim_, H = num_heads_;
  const int64_t S = k_in.size(0);
  DT_CHECK(q_in.size(2) == E && k_in.size(2) == kdim_ && v_in.size(2) == vdim_ &&
               k_in.size(1) == N && v_in.size(0) == S && v_in.size(1) == N,
           "[%s] expected query [L, N, %d], key [S, N, %d] and value [S, N, %d] (batch_first: "
           "batch dim first; unbatched: no batch dim), got query %s, key %s, value %s",
           kOp, E, kdim_, vdim_, shape_str(query.shape()), shape_str(key.shape()),
           shape_str(value.shape()));
  const DeviceMesh& mesh = q_in.device_mesh();
  const DType dtype = q_in.dtype();

  DTensor kpm = canonical_mask(args.key_padding_mask, mesh, dtype, "key_padding_mask");
  if (kpm.defined()) {
    if (!batched) kpm = unsqueeze(kpm, 0);
    DT_CHECK(kpm.dim() == 2 && kpm.size(0) == N && kpm.size(1) == S,
             "[%s] key_padding_mask of shape %s: expected [N, S] = [%d, %d] ([S] unbatched)", kOp,
             shape_str(args.key_padding_mask.shape()), N, S);
  }
  DT_CHECK(!args.is_causal || args.attn_mask.defined(),
           "[%s] Need attn_mask if specifying the is_causal hint (e.g. the causal mask of "
           "generate_square_subsequent_mask)",
           kOp);
  // The causal hint replaces the mask only where PyTorch's does: no padding mask, no weights.
  bool is_causal = args.is_causal;
  DTensor mask;  // [1, 1, L, S] or [N, H, L, S], floating
  if (!(is_causal && !kpm.defined() && !args.need_weights)) {
    is_causal = false;
    mask = canonical_mask(args.attn_mask, mesh, dtype, "attn_mask");
    if (mask.defined()) {
      const bool is_2d = mask.dim() == 2 && mask.size(0) == L && mask.size(1) == S;
      const bool is_3d =
          mask.dim() == 3 && mask.size(0) == N * H && mask.size(1) == L && mask.size(2) == S;
      DT_CHECK(is_2d || is_3d,
               "[%s] attn_mask of shape %s: expected [L, S] = [%d, %d] or [N * num_heads, L, S] "
               "= [%d, %d, %d] ([num_heads, L, S] unbatched)",
               kOp, shape_str(mask.shape()), L, S, N * H, L, S);
      mask = is_2d ? view(mask, {1, 1, L, S}) : view(mask, {N, H, L, S});
    }
  }

  // In-projections (the packed weight's rows q, k, v; in_proj_bias split alike).
  const DTensor bias = has_param("in_proj_bias")
                           ? functional::on_mesh(param("in_proj_bias"), mesh, kOp, "in_proj_bias")
                           : DTensor();
  auto project = [&](const DTensor& x, int64_t i, const char* separate) {
    const DTensor b = bias.defined() ? narrow(bias, 0, i * E, E) : DTensor();
    const DTensor w =
        qkv_same_embed_dim()
            ? narrow(functional::on_mesh(param("in_proj_weight"), mesh, kOp, "in_proj_weight"), 0,
                     i * E, E)
            : functional::on_mesh(param(separate), mesh, kOp, separate);
    return split_heads(linear(x, w, b), H);  // [N, H, T, head_dim]
  };
  DTensor q = project(q_in, 0, "q_proj_weight");
  DTensor k = project(k_in, 1, "k_proj_weight");
  DTensor v = project(v_in, 2, "v_proj_weight");

  // One more key per extension (bias_k / bias_v, the zero key), its mask column 0.
  const int64_t hd = E / H;
  auto extend_masks = [&] {
    const int64_t pad_last[2] = {0, 1};
    if (mask.defined()) mask = pad(mask, pad_last);
    if (kpm.defined()) kpm = pad(kpm, pad_last);
  };
  if (has_param("bias_k")) {
    auto per_head = [&](const char* name) {
      return expand(view(functional::on_mesh(param(name), mesh, kOp, name), {1, H, 1, hd}),
                    {N, H, 1, hd});
    };
    k = cat({k, per_head("bias_k")}, 2);
    v = cat({v, per_head("bias_v")}, 2);
    extend_masks();
  }
  if (add_zero_attn_) {
    k = cat({k, zeros_like(narrow(k, 2, 0, 1))}, 2);
    v = cat({v, zeros_like(narrow(v, 2, 0, 1))}, 2);
    extend_masks();
  }
  const int64_t S2 = k.size(2);
  if (kpm.defined()) {
    const DTensor kpm4 = view(kpm, {N, 1, 1, S2});
    mask = mask.defined() ? add(mask, kpm4) : kpm4;
  }
  const double dropout_p = is_training() ? dropout_ : 0.0;

  MultiheadAttentionOutput out;
  DTensor o;  // [N, H, L, head_dim]
  if (args.need_weights) {
    // PyTorch's explicit path: softmax(mask + (q / sqrt(head_dim)) k^T), dropout, @ v.
    DTensor scores =
        matmul(mul(q, Scalar(std::sqrt(1.0 / static_cast<double>(hd)))), transpose(k, -2, -1));
    if (mask.defined()) scores = add(mask, scores);
    DTensor weights = softmax(scores, -1);
    if (dropout_p > 0.0) weights = dtensor::dropout(weights, dropout_p, true);
    o = matmul(weights, v);
    if (args.average_attn_weights) weights = mean(weights, {1});
    out.attn_weights = batched ? weights : squeeze(weights, 0);
  } else {
    if (mask.defined() && mask.size(2) != L) {
      mask = expand(mask, {mask.size(0), mask.size(1), L, S2});  // a padding mask's rows
    }
    o = functional::scaled_dot_product_attention(q, k, v, mask, dropout_p, is_causal);
  }
  o = reshape(permute(o, {2, 0, 1, 3}), {L, N, E});
  const DTensor out_bias =
      out_proj_->has_param("bias")
          ? functional::on_mesh(out_proj_->param("bias"), mesh, kOp, "out_proj.bias")
          : DTensor();
  o = linear(o, functional::on_mesh(out_proj_->param("weight"), mesh, kOp, "out_proj.weight"),
             out_bias);
  if (!batched) {
    o = squeeze(o, 1);
  } else if (batch_first_) {
    o = transpose(o, 0, 1);
  }
  out.attn_output = o;
  return out;
}

}  // namespace dtensor::nn
