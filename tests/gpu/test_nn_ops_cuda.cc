// softmax, log_softmax, layer_norm, rms_norm, embedding, the losses (pointwise ones, weighted
// nll_loss) and attention on CUDA against the CPU.
// Float tolerances as in gpu_test_util.h; embedding (data movement) must be exact.
#include <limits>
#include <utility>

#include "dtensor/ops/attention/attention.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/embedding/embedding.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/softmax/softmax.h"
#include "tests/gpu/gpu_test_util.h"

using namespace dtensor;
using namespace dtensor::gpu_test;

TEST_CASE("cuda softmax and log_softmax", "[gpu][softmax]") {
  for (DType d : floating_dtypes()) {
    for (const Tensor& x : {make_input({7, 300}, d, 121), make_input({4, 5, 6}, d, 122),
                            make_input({6, 4}, d, 123).transpose(0, 1), make_input({0, 3}, d, 124),
                            make_input({}, d, 125)}) {
      for (int64_t dim = -1; dim < std::max<int64_t>(1, x.dim()); ++dim) {
        INFO(dtype_name(d) << " " << shape_str(x.sizes()) << " dim " << dim);
        check_matches(softmax(x.to(kGpu), dim), softmax(x, dim), 4);
        check_matches(log_softmax(x.to(kGpu), dim), log_softmax(x, dim), 4);
      }
    }
  }
  // -inf and NaN entries.
  Tensor x = make_input({3, 5}, kFloat32, 126);
  x.narrow(0, 0, 1).narrow(1, 1, 1).fill_(Scalar(-std::numeric_limits<double>::infinity()));
  x.narrow(0, 2, 1).narrow(1, 4, 1).fill_(Scalar(std::numeric_limits<double>::quiet_NaN()));
  check_matches(softmax(x.to(kGpu), 1), softmax(x, 1));
  check_matches(log_softmax(x.to(kGpu), 1), log_softmax(x, 1));
}

// The row kernels' two paths: rows read 16 bytes at a time (aligned base, length a multiple of
// the group) and one element at a time (a base one element past alignment, or a length that is
// not a multiple), at each block size (32, 128 and 256 threads: one warp, several, the most),
// forward and backward, with a NaN in the last warp's part of a row.
TEST_CASE("cuda row kernels: 16-byte and element paths at every block size",
          "[gpu][softmax][norm]") {
  for (DType d : floating_dtypes()) {
    for (int64_t n : {int64_t{24}, int64_t{96}, int64_t{120}, int64_t{1000}, int64_t{4096}}) {
      for (bool misaligned : {false, true}) {
        INFO(dtype_name(d) << " n " << n << (misaligned ? " misaligned" : " aligned"));
        const int64_t rows = 5;
        // A contiguous [rows, n] view whose base is one element into its storage (on the GPU
        // too: the view is taken after the copy).
        const int64_t start = misaligned ? 1 : 0;
        const auto rows_of = [&](const Tensor& flat) {
          return flat.narrow(0, start, rows * n).view({rows, n});
        };
        const Tensor xf = make_input({rows * n + 1}, d, 141),
                     gf = make_input({rows * n + 1}, d, 142);
        const Tensor x = rows_of(xf), g = rows_of(gf);
        const Tensor xg = rows_of(xf.to(kGpu)), gg = rows_of(gf.to(kGpu));
        const Tensor w = make_input({n}, d, 143, 0.5, 2), b = make_input({n}, d, 144);
        const int64_t shape[] = {n};
        check_matches(softmax(xg, -1), softmax(x, -1), 4);
        check_matches(log_softmax(xg, -1), log_softmax(x, -1), 4);
        const Tensor y = softmax(x, -1), ly = log_softmax(x, -1);
        // y on the GPU shares gg's alignment (a view of a copy of a one-longer buffer).
        const auto gpu_like_g = [&](const Tensor& t) {
          Tensor flat = empty({rows * n + 1}, TensorOptions(d, kGpu));
          Tensor v = rows_of(flat);
          v.copy_(t);
          return v;
        };
        check_matches(softmax_backward(gg, gpu_like_g(y), -1), softmax_backward(g, y, -1), 4);
        check_matches(log_softmax_backward(gg, gpu_like_g(ly), -1), log_softmax_backward(g, ly, -1),
                      4);
        const auto cpu = native_layer_norm(x, shape, w, b);
        const auto gpu = native_layer_norm(xg, shape, w.to(kGpu), b.to(kGpu));
        check_matches(gpu.output, cpu.output, 4);
        check_matches(gpu.rstd, cpu.rstd, 4);
        check_matches(layer_norm_backward(gg, xg, shape, gpu.mean, gpu.rstd, w.to(kGpu)).grad_x,
                      layer_norm_backward(g, x, shape, cpu.mean, cpu.rstd, w).grad_x, 4);
        check_matches(rms_norm(xg, shape), rms_norm(x, shape), 4);
        // NaN near the end of row 3 wins over every warp's max.
        Tensor xn = x.clone();
        xn.narrow(0, 3, 1)
            .narrow(1, n - 2, 1)
            .fill_(Scalar(std::numeric_limits<double>::quiet_NaN()));
        check_matches(softmax(gpu_like_g(xn), -1), softmax(xn, -1), 4);
      }
    }
  }
}

TEST_CASE("cuda layer_norm and rms_norm", "[gpu][norm]") {
  for (DType d : floating_dtypes()) {
    INFO(dtype_name(d));
    const Tensor x = make_input({6, 5, 70}, d, 131);
    const Tensor w = make_input({70}, d, 132), b = make_input({70}, d, 133);
    const Tensor w2 = make_input({5, 70}, d, 134);
    const int64_t n1[] = {70};
    const int64_t n2[] = {5, 70};
    const Tensor g = x.to(kGpu);
    check_matches(layer_norm(g, n1, w.to(kGpu), b.to(kGpu)), layer_norm(x, n1, w, b), 4);
    check_matches(layer_norm(g, n2, w2.to(kGpu)), layer_norm(x, n2, w2), 4);
    check_matches(layer_norm(g, n1, Tensor(), Tensor(), 1e-3),
                  layer_norm(x, n1, Tensor(), Tensor(), 1e-3), 4);
    check_matches(rms_norm(g, n1, w.to(kGpu)), rms_norm(x, n1, w), 4);
    check_matches(rms_norm(g, n2, Tensor(), 1e-6), rms_norm(x, n2, Tensor(), 1e-6), 4);
    // Non-contiguous input and an empty batch.
    const Tensor xt = make_input({70, 4}, d, 135).transpose(0, 1);
    check_matches(rms_norm(xt.to(kGpu), n1, w.to(kGpu)), rms_norm(xt, n1, w), 4);
    const Tensor e = make_input({0, 70}, d, 136);
    check_matches(layer_norm(e.to(kGpu), n1), layer_norm(e, n1));
  }
  const Tensor x = make_input({2, 4}, kFloat32, 137);
  const int64_t n[] = {4};
  REQUIRE_THROWS_WITH(layer_norm(x.to(kGpu), n, make_input({4}, kFloat32, 138)),
                      Catch::Contains("[layer_norm]"));
}

TEST_CASE("cuda embedding and embedding_masked", "[gpu][embedding]") {
  for (DType d : all_dtypes()) {
    const Tensor w = make_input({10, 6}, d, 141);
    const Tensor idx = from_vector<int64_t>({3, 0, 9, 3, 7, 1}, {2, 3});
    check_exact(embedding(idx.to(kGpu), w.to(kGpu)), embedding(idx, w));
    check_exact(embedding(idx.to(kInt32).to(kGpu), w.to(kGpu)), embedding(idx.to(kInt32), w));
    check_exact(embedding_masked(idx.to(kGpu), w.narrow(0, 0, 5).to(kGpu), 2),
                embedding_masked(idx, w.narrow(0, 0, 5), 2));
    check_exact(embedding(idx.transpose(0, 1).to(kGpu), w.to(kGpu).transpose(0, 1).transpose(0, 1)),
                embedding(idx.transpose(0, 1), w));
  }
  const Tensor w = make_input({10, 6}, kFloat32, 142);
  const Tensor none = from_vector<int64_t>({}, {0});
  check_exact(embedding(none.to(kGpu), w.to(kGpu)), embedding(none, w));
  const Tensor bad = from_vector<int64_t>({2, 10}, {2});
  REQUIRE_THROWS_WITH(embedding(bad.to(kGpu), w.to(kGpu)),
                      Catch::Contains("[embedding] index 10 out of range for a table of 10 rows"));
  REQUIRE_THROWS_WITH(embedding(bad.to(kGpu), make_input({10, 0}, kFloat32, 143).to(kGpu)),
                      Catch::Contains("[embedding] index 10 out of range"));
}

TEST_CASE("cuda cross_entropy, nll_loss and the loss-parallel blocks", "[gpu][loss]") {
  for (DType d : floating_dtypes()) {
    INFO(dtype_name(d));
    const Tensor logits = make_input({8, 11}, d, 151);
    const Tensor target = from_vector<int64_t>({0, 10, 3, -100, 5, 5, 1, 9}, {8});
    const Tensor gl = logits.to(kGpu), gt = target.to(kGpu);
    for (Reduction r : {Reduction::kNone, Reduction::kSum, Reduction::kMean}) {
      check_matches(cross_entropy(gl, gt, r), cross_entropy(logits, target, r));
      check_matches(cross_entropy(gl, gt, r, -100, 0.1),
                    cross_entropy(logits, target, r, -100, 0.1));
      const Tensor lp = log_softmax(logits, 1);
      check_matches(nll_loss(lp.to(kGpu), gt, r), nll_loss(lp, target, r));
      check_matches(reduce_loss(lp.narrow(1, 0, 1).squeeze(1).to(kGpu), gt, r),
                    reduce_loss(lp.narrow(1, 0, 1).squeeze(1), target, r));
    }
    // [N, C, d] layout, int32 targets, all targets ignored (mean is NaN).
    const Tensor x3 = make_input({2, 4, 3}, d, 152);
    const Tensor t3 = from_vector<int32_t>({0, 3, 2, 1, 1, 0}, {2, 3});
    check_matches(cross_entropy(x3.to(kGpu), t3.to(kGpu)), cross_entropy(x3, t3));
    const Tensor ign = from_vector<int64_t>({-100, -100}, {2});
    check_matches(cross_entropy(logits.narrow(0, 0, 2).to(kGpu), ign.to(kGpu)),
                  cross_entropy(logits.narrow(0, 0, 2), ign));
    // Class shard [4, 8) of the log-probabilities.
    const Tensor lp = log_softmax(logits, 1);
    check_exact(gather_target_log_probs(lp.narrow(1, 4, 4).to(kGpu), gt, 4),
                gather_target_log_probs(lp.narrow(1, 4, 4), target, 4));
  }
  const Tensor logits = make_input({2, 3}, kFloat32, 153);
  const Tensor bad = from_vector<int64_t>({1, 3}, {2});
  REQUIRE_THROWS_WITH(cross_entropy(logits.to(kGpu), bad.to(kGpu)),
                      Catch::Contains("[nll_loss] target 3 out of range for 3 classes"));
  REQUIRE_THROWS_WITH(cross_entropy(logits.to(kGpu), bad), Catch::Contains("[cross_entropy]"));
}

TEST_CASE("cuda pointwise losses and the weighted nll_loss", "[gpu][loss]") {
  for (DType d : floating_dtypes()) {
    INFO(dtype_name(d));
    const Tensor x = make_input({6, 5}, d, 161), y = make_input({6, 5}, d, 162);
    const Tensor p = sigmoid(x), t = sigmoid(y), lp = log_softmax(x, 1);
    const Tensor w = sigmoid(make_input({5}, d, 163)), pw = exp(make_input({5}, d, 164));
    const Tensor gx = x.to(kGpu), gy = y.to(kGpu), gp = p.to(kGpu), gt = t.to(kGpu);
    const Tensor gw = w.to(kGpu), gpw = pw.to(kGpu), glp = lp.to(kGpu);
    const Tensor target = from_vector<int64_t>({0, 4, -100, 2, 2, 1}, {6});
    for (Reduction r : {Reduction::kNone, Reduction::kSum, Reduction::kMean}) {
      INFO(reduction_name(r));
      check_matches(mse_loss(gx, gy, r), mse_loss(x, y, r), 4);
      check_matches(l1_loss(gx, gy, r), l1_loss(x, y, r), 4);
      check_matches(smooth_l1_loss(gx, gy, r, 0.5), smooth_l1_loss(x, y, r, 0.5), 4);
      check_matches(huber_loss(gx, gy, r, 1.5), huber_loss(x, y, r, 1.5), 4);
      check_matches(binary_cross_entropy(gp, gt, r, gw), binary_cross_entropy(p, t, r, w), 4);
      check_matches(binary_cross_entropy_with_logits(gx, gt, r, gw, gpw),
                    binary_cross_entropy_with_logits(x, t, r, w, pw), 4);
      check_matches(kl_div(glp, gt, r), kl_div(lp, t, r), 4);
      check_matches(kl_div(glp, gy, r, true), kl_div(lp, y, r, true), 4);
      check_matches(nll_loss(glp, target.to(kGpu), r, -100, gw), nll_loss(lp, target, r, -100, w),
                    4);
    }
    check_matches(kl_div(glp, gt, Reduction::kBatchMean), kl_div(lp, t, Reduction::kBatchMean), 4);
    // The gradient kernels, through the DTensor forms on each device's self mesh.
    const auto grads = [](const Tensor& a, const Tensor& b, const Tensor& wt, const Tensor& pwt) {
      DTensor da = local_dtensor(a.clone()), db = local_dtensor(b.clone());
      da.requires_grad_();
      db.requires_grad_();
      binary_cross_entropy_with_logits(da, db, Reduction::kMean, local_dtensor(wt),
                                       local_dtensor(pwt))
          .backward();
      return std::pair<Tensor, Tensor>(da.grad().to_local(), db.grad().to_local());
    };
    const auto [cpu_x, cpu_t] = grads(x, t, w, pw);
    const auto [gpu_x, gpu_t] = grads(gx, gt, gw, gpw);
    check_matches(gpu_x, cpu_x, 4);
    check_matches(gpu_t, cpu_t, 4);
  }
  REQUIRE_THROWS_WITH(
      binary_cross_entropy(full({2}, 1.5).to(kGpu), zeros({2}).to(kGpu)),
      Catch::Contains("[binary_cross_entropy] all elements of input should be between 0 and 1"));
}

TEST_CASE("cuda row kernels with more rows than one grid (> 65535)", "[gpu][softmax][norm]") {
  for (DType d : {kFloat32, kBFloat16}) {
    INFO(dtype_name(d));
    const Tensor x = make_input({70000, 5}, d, 161);
    const Tensor g = x.to(kGpu);
    check_matches(softmax(g, 1), softmax(x, 1), 4);
    check_matches(log_softmax(g, -1), log_softmax(x, -1), 4);
    // dim 0 of [5, 70000]: 70000 strided slices of 5 elements.
    check_matches(softmax(g.transpose(0, 1).contiguous(), 0),
                  softmax(x.transpose(0, 1).contiguous(), 0), 4);
    const int64_t n[] = {5};
    const Tensor w = make_input({5}, d, 162), b = make_input({5}, d, 163);
    check_matches(layer_norm(g, n, w.to(kGpu), b.to(kGpu)), layer_norm(x, n, w, b), 4);
    check_matches(rms_norm(g, n), rms_norm(x, n), 4);
    // Cross entropy over 70000 targets, every 7th one ignored.
    std::vector<int64_t> t(70000);
    for (size_t i = 0; i < t.size(); ++i) t[i] = i % 7 == 0 ? -100 : static_cast<int64_t>(i % 5);
    const Tensor target = from_vector<int64_t>(t, {70000});
    for (Reduction r : {Reduction::kNone, Reduction::kMean}) {
      check_matches(cross_entropy(g, target.to(kGpu), r), cross_entropy(x, target, r), 4);
    }
  }
  // 70000 lookups: data movement, exact.
  const Tensor w = make_input({11, 3}, kFloat16, 164);
  std::vector<int64_t> idx(70000);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>((i * 7) % 11);
  const Tensor ix = from_vector<int64_t>(idx, {70000});
  check_exact(embedding(ix.to(kGpu), w.to(kGpu)), embedding(ix, w));
  check_exact(embedding_masked(ix.to(kGpu), w.narrow(0, 3, 4).to(kGpu), 3),
              embedding_masked(ix, w.narrow(0, 3, 4), 3));
}

TEST_CASE("cuda scaled_dot_product_attention, forward and backward", "[gpu][attention]") {
  for (DType d : floating_dtypes()) {
    for (bool causal : {false, true}) {
      INFO(dtype_name(d) << " causal " << causal);
      // Several 128-row blocks of queries and keys, a bool mask keeping each row's first key.
      const Tensor q = make_input({2, 3, 150, 8}, d, 141), k = make_input({2, 3, 150, 8}, d, 142);
      const Tensor v = make_input({2, 3, 150, 5}, d, 143), up = make_input({2, 3, 150, 5}, d, 144);
      Tensor mask = gt(make_input({150, 150}, kFloat32, 145), Scalar(-1.0));
      mask.narrow(1, 0, 1).fill_(true);
      const AttentionParams p{0.35, causal, 0};
      const AttentionResult cpu = attention_forward(q, k, v, mask, p);
      const AttentionResult gpu =
          attention_forward(q.to(kGpu), k.to(kGpu), v.to(kGpu), mask.to(kGpu), p);
      check_matches(gpu.out, cpu.out, 8);
      check_matches(gpu.lse, cpu.lse, 8);
      const Tensor glse = zeros({2, 3, 150}, TensorOptions(cpu.lse.dtype()));
      const AttentionGrads gc = attention_backward(up, glse, q, k, v, mask, cpu.out, cpu.lse, p);
      const AttentionGrads gg =
          attention_backward(up.to(kGpu), glse.to(kGpu), q.to(kGpu), k.to(kGpu), v.to(kGpu),
                             mask.to(kGpu), gpu.out, gpu.lse, p);
      check_matches(gg.q, gc.q, 8);
      check_matches(gg.k, gc.k, 8);
      check_matches(gg.v, gc.v, 8);
    }
  }
}

TEST_CASE("cuda attention without a mask: causal at query offsets, more queries than keys",
          "[gpu][attention]") {
  // The mask-less causal path (the causal bias computed from q_offset, no mask tensor) with the
  // diagonal inside, before and past the key range, and a nonzero lse gradient.
  for (DType d : floating_dtypes()) {
    for (int64_t q_offset : {-40, -5, 0, 7}) {
      INFO(dtype_name(d) << " q_offset " << q_offset);
      const Tensor q = make_input({1, 2, 130, 8}, d, 151), k = make_input({1, 2, 100, 8}, d, 152);
      const Tensor v = make_input({1, 2, 100, 6}, d, 153), up = make_input({1, 2, 130, 6}, d, 154);
      const AttentionParams p{0.4, true, q_offset};
      const AttentionResult cpu = attention_forward(q, k, v, Tensor(), p);
      const AttentionResult gpu =
          attention_forward(q.to(kGpu), k.to(kGpu), v.to(kGpu), Tensor(), p);
      check_matches(gpu.out, cpu.out, 8);
      check_matches(gpu.lse, cpu.lse, 8);
      // At q_offset -40 the first 40 rows see no key: both devices must agree on them too.
      const Tensor glse = make_input({1, 2, 130}, cpu.lse.dtype(), 155);
      const AttentionGrads gc =
          attention_backward(up, glse, q, k, v, Tensor(), cpu.out, cpu.lse, p);
      const AttentionGrads gg =
          attention_backward(up.to(kGpu), glse.to(kGpu), q.to(kGpu), k.to(kGpu), v.to(kGpu),
                             Tensor(), gpu.out, gpu.lse, p);
      check_matches(gg.q, gc.q, 8);
      check_matches(gg.k, gc.k, 8);
      check_matches(gg.v, gc.v, 8);
    }
  }
}
