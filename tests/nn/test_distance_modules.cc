// The distance modules (dtensor/nn/distance.h): PyTorch's defaults (CosineSimilarity dim 1,
// eps 1e-8; PairwiseDistance p 2, eps 1e-6, keepdim false), forward equal to the functions,
// no parameters, and the single-input forward refused.
#include <catch2/catch.hpp>

#include "dtensor/dtensor.h"

namespace dt = dtensor;
using dt::DTensor;
using dt::Tensor;

namespace {

DTensor input(dt::Shape shape, double phase) {
  std::vector<double> v(dt::shape_numel(shape));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::sin(0.7 * i + phase) * 2;
  return dt::local_dtensor(dt::from_vector<double>(v, shape));
}

}  // namespace

TEST_CASE("CosineSimilarity and PairwiseDistance: PyTorch's defaults and forward") {
  const DTensor a = input({3, 4, 2}, 0.1), b = input({3, 4, 2}, 0.9);
  dt::nn::CosineSimilarity cos;
  CHECK(cos.dim() == 1);
  CHECK(cos.eps() == 1e-8);
  CHECK(cos.type_name() == "CosineSimilarity");
  CHECK(cos.parameters().empty());
  CHECK(dt::equal(cos(a, b).to_local(), dt::cosine_similarity(a, b, 1, 1e-8).to_local()));
  dt::nn::CosineSimilarity cos_last(-1, 1e-3);
  CHECK(cos_last(a, b).shape() == dt::Shape{3, 4});
  CHECK(dt::equal(cos_last(a, b).to_local(), dt::cosine_similarity(a, b, -1, 1e-3).to_local()));

  dt::nn::PairwiseDistance pd;
  CHECK(pd.norm() == 2.0);
  CHECK(pd.eps() == 1e-6);
  CHECK(!pd.keepdim());
  CHECK(pd.parameters().empty());
  CHECK(pd(a, b).shape() == dt::Shape{3, 4});
  CHECK(dt::equal(pd(a, b).to_local(), dt::pairwise_distance(a, b, 2.0, 1e-6, false).to_local()));
  dt::nn::PairwiseDistance pd1(1.0, 0.0, true);
  CHECK(pd1(a, b).shape() == dt::Shape{3, 4, 1});
  CHECK(dt::equal(pd1(a, b).to_local(), dt::pairwise_distance(a, b, 1.0, 0.0, true).to_local()));
  CHECK_THROWS_WITH(pd(a), Catch::Contains("single-input forward"));
}
