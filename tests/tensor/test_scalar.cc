#include <catch2/catch.hpp>

#include "dtensor/tensor/half.h"
#include "dtensor/tensor/scalar.h"

using namespace dtensor;

TEST_CASE("scalar: kinds and conversions", "[scalar]") {
  Scalar d(2.75);
  CHECK(d.kind() == Scalar::Kind::kDouble);
  CHECK(d.is_floating());
  CHECK(d.to_double() == 2.75);
  CHECK(d.to_int() == 2);
  CHECK(d.to_bool());
  CHECK(d.to<int32_t>() == 2);
  CHECK(d.to<float>() == 2.75f);
  CHECK(d.to<Half>().bits == 0x4180);
  CHECK(d.to<BFloat16>().bits == 0x4030);

  Scalar i(int64_t{-7});
  CHECK(i.kind() == Scalar::Kind::kInt);
  CHECK_FALSE(i.is_floating());
  CHECK(i.to_double() == -7.0);
  CHECK(i.to<int64_t>() == -7);
  CHECK(i.to<bool>());

  Scalar b(false);
  CHECK(b.kind() == Scalar::Kind::kBool);
  CHECK(b.to<float>() == 0.0f);
  CHECK(Scalar(true).to<int32_t>() == 1);
  CHECK(Scalar().to_int() == 0);
  CHECK(Scalar(0.0f).to<bool>() == false);
  CHECK(Scalar(3u).kind() == Scalar::Kind::kInt);
}

TEST_CASE("scalar: printing", "[scalar]") {
  CHECK(Scalar(3).str() == "3");
  CHECK(Scalar(-1.5).str() == "-1.5");
  CHECK(Scalar(true).str() == "true");
  CHECK(Scalar(false).str() == "false");
}
