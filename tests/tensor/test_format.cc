// Printing matches PyTorch's repr (expected strings are what torch 2.x prints, with dtype
// names without the "torch." prefix).
#include <catch2/catch.hpp>
#include <sstream>

#include "dtensor/tensor/creation.h"
#include "test_util.h"

using namespace dtensor;
using namespace dtensor::test;

TEST_CASE("format: small tensors", "[format]") {
  CHECK(iota({2, 2}).str() == "tensor([[0., 1.],\n        [2., 3.]])");
  CHECK(from_vector<float>({0.1f, 2.5f}, {2}).str() == "tensor([0.1000, 2.5000])");
  CHECK(arange(3).str() == "tensor([0, 1, 2])");
  CHECK(arange(3, kInt32).str() == "tensor([0, 1, 2], dtype=int32)");
  CHECK(from_vector<bool>({true, false}, {2}).str() == "tensor([ True, False])");
  CHECK(full({}, 3.0).str() == "tensor(3.)");
  CHECK(full({}, 2.5, kFloat16).str() == "tensor(2.5000, dtype=float16)");
  CHECK(full({}, 7, kInt64).str() == "tensor(7)");
  CHECK(from_vector<float>({1e-5f, 1.0f}, {2}).str() == "tensor([1.0000e-05, 1.0000e+00])");
  CHECK(from_vector<float>({1.5f, NAN, INFINITY}, {3}).str() == "tensor([1.5000,    nan,    inf])");
  CHECK(from_vector<float>({-1, 10}, {2}).str() == "tensor([-1., 10.])");
  CHECK(iota({2, 2}, kBFloat16).str() == "tensor([[0., 1.],\n        [2., 3.]], dtype=bfloat16)");
  CHECK(iota({2, 1, 2}).str() == "tensor([[[0., 1.]],\n\n        [[2., 3.]]])");
  CHECK(iota({2, 2}).transpose(0, 1).str() == "tensor([[0., 2.],\n        [1., 3.]])");
  std::ostringstream os;
  os << arange(2);
  CHECK(os.str() == "tensor([0, 1])");
  CHECK(Tensor().str() == "tensor(undefined)");
}

TEST_CASE("format: empty tensors", "[format]") {
  CHECK(zeros({0}).str() == "tensor([])");
  CHECK(zeros({0, 3}).str() == "tensor([], size=(0, 3))");
  CHECK(zeros({0}, kInt32).str() == "tensor([], dtype=int32)");
  CHECK(zeros({2, 0}, kFloat64).str() == "tensor([], size=(2, 0), dtype=float64)");
}

TEST_CASE("format: long rows wrap at 80 columns", "[format]") {
  CHECK(iota({30}).str() ==
        "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
        "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
        "        28., 29.])");
}

TEST_CASE("format: big tensors are summarised", "[format]") {
  CHECK(arange(2000).str() == "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  CHECK(iota({100, 100}, kInt64).str() ==
        "tensor([[   0,    1,    2,  ...,   97,   98,   99],\n"
        "        [ 100,  101,  102,  ...,  197,  198,  199],\n"
        "        [ 200,  201,  202,  ...,  297,  298,  299],\n"
        "        ...,\n"
        "        [9700, 9701, 9702,  ..., 9797, 9798, 9799],\n"
        "        [9800, 9801, 9802,  ..., 9897, 9898, 9899],\n"
        "        [9900, 9901, 9902,  ..., 9997, 9998, 9999]])");
}
