// Data movement on CUDA (tensor layer: copy_cuda behind copy_, contiguous, to(dtype), cat, pad):
// results must equal the CPU results bit for bit.
#include "dtensor/tensor/detail/copy_cuda.h"
#include "dtensor/tensor/shape_ops.h"
#include "tests/gpu/gpu_test_util.h"

using namespace dtensor;
using namespace dtensor::gpu_test;

TEST_CASE("cuda copy: strided views and conversions match the CPU exactly", "[gpu][copy]") {
  CHECK(detail::copy_cuda_compiled());
  for (DType src : all_dtypes()) {
    const Tensor c = make_input({5, 7, 3}, src, 1);
    const Tensor g = c.to(kGpu);
    check_exact(g, c);
    // Non-contiguous reads: transposes, steps, a narrowed middle dim.
    check_exact(g.transpose(0, 2).contiguous(), c.transpose(0, 2).contiguous());
    check_exact(g.permute({1, 2, 0}).contiguous(), c.permute({1, 2, 0}).contiguous());
    check_exact(g.slice(1, 1, 7, 3).contiguous(), c.slice(1, 1, 7, 3).contiguous());
    check_exact(g.narrow(0, 1, 3).clone(), c.narrow(0, 1, 3).clone());
    // Broadcast reads (stride 0).
    check_exact(g.narrow(1, 0, 1).expand({5, 4, 3}).contiguous(),
                c.narrow(1, 0, 1).expand({5, 4, 3}).contiguous());
    for (DType dst : all_dtypes()) {
      INFO("src " << dtype_name(src) << " dst " << dtype_name(dst));
      check_exact(g.to(dst), c.to(dst));
      check_exact(g.transpose(0, 1).to(dst), c.transpose(0, 1).to(dst));
    }
  }
}

TEST_CASE("cuda copy: strided destinations, host<->device, fill_, zero-size", "[gpu][copy]") {
  const Tensor c = make_input({6, 9}, kFloat32, 2);
  // Device -> strided device destination, with conversion.
  Tensor gd = zeros({9, 6}, TensorOptions(kBFloat16, kGpu));
  Tensor cd = zeros({9, 6}, TensorOptions(kBFloat16));
  gd.transpose(0, 1).copy_(c.to(kGpu));
  cd.transpose(0, 1).copy_(c);
  check_exact(gd, cd);
  // Host (strided) -> device (strided) and device (strided) -> host (strided).
  Tensor g2 = zeros({6, 18}, TensorOptions(kFloat64, kGpu));
  Tensor c2 = zeros({6, 18}, TensorOptions(kFloat64));
  g2.slice(1, 0, 18, 2).copy_(c.transpose(0, 1).transpose(0, 1));
  c2.slice(1, 0, 18, 2).copy_(c);
  check_exact(g2, c2);
  Tensor h = zeros({9, 6}, TensorOptions(kInt64));
  Tensor hc = zeros({9, 6}, TensorOptions(kInt64));
  h.transpose(0, 1).copy_(c.to(kGpu).slice(1, 0, 9, 1));
  hc.transpose(0, 1).copy_(c);
  CHECK(h.to_vector<int64_t>() == hc.to_vector<int64_t>());
  // fill_ and zero_ on strided device views.
  Tensor f = zeros({4, 5}, TensorOptions(kFloat16, kGpu));
  Tensor fc = zeros({4, 5}, TensorOptions(kFloat16));
  f.slice(1, 1, 5, 2).fill_(Scalar(2.5));
  fc.slice(1, 1, 5, 2).fill_(Scalar(2.5));
  check_exact(f, fc);
  // Zero-size tensors.
  const Tensor e = make_input({0, 4}, kFloat32, 3);
  check_exact(e.to(kGpu).transpose(0, 1).contiguous(), e.transpose(0, 1).contiguous());
  check_exact(e.to(kGpu).to(kInt32), e.to(kInt32));
}

TEST_CASE("cuda copy: cat and pad on the device match the CPU", "[gpu][copy]") {
  for (DType d : all_dtypes()) {
    const Tensor a = make_input({3, 5}, d, 4), b = make_input({3, 2}, d, 5);
    const Tensor z = make_input({3, 0}, d, 6);
    check_exact(cat({a.to(kGpu), b.to(kGpu), z.to(kGpu)}, 1), cat({a, b, z}, 1));
    check_exact(cat({a.to(kGpu).transpose(0, 1), b.to(kGpu).transpose(0, 1)}, 0),
                cat({a.transpose(0, 1), b.transpose(0, 1)}, 0));
    check_exact(pad(a.to(kGpu), {2, 1}, Scalar(1)), pad(a, {2, 1}, Scalar(1)));
    check_exact(pad(a.to(kGpu), {-1, 3}), pad(a, {-1, 3}));
  }
}

TEST_CASE("cuda copy: 0-d tensors and views with more than 65535 rows", "[gpu][copy]") {
  const Tensor s = make_input({}, kFloat32, 7);
  check_exact(s.to(kGpu), s);
  check_exact(s.to(kGpu).to(kBFloat16), s.to(kBFloat16));
  check_exact(s.to(kGpu).expand({3, 2}).contiguous(), s.expand({3, 2}).contiguous());
  for (DType d : {kFloat16, kInt64, kBool}) {
    const Tensor c = make_input({70000, 3}, d, 8);
    const Tensor g = c.to(kGpu);
    check_exact(g.transpose(0, 1).contiguous(), c.transpose(0, 1).contiguous());
    check_exact(g.slice(0, 1, 70000, 7).to(kFloat32), c.slice(0, 1, 70000, 7).to(kFloat32));
    check_exact(cat({g, g.narrow(0, 0, 5)}, 0), cat({c, c.narrow(0, 0, 5)}, 0));
  }
}
