// einsum on local tensors: every equation form (explicit, implicit, repeated letters, ellipsis,
// size-1 broadcasting, one/two/three operands, zero sizes) against a reference that loops over
// every assignment of the letters, over float32/float64/bfloat16/float16, int64 and int32 (the
// result keeps the operand dtype, int32 wrapping); a fresh result (never the input's storage);
// the mm / bmm fast path on strided operands; the plan cache; the argument errors; and the
// strategy rows the generator gives (mm's and bmm's included).
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "dtensor/ops/matmul/detail/einsum.h"
#include "dtensor/ops/matmul/einsum.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/tensor/compare.h"
#include "tests/common/local_op_test_util.h"

namespace dt = dtensor;
namespace tt = dtensor::test;
using dt::Shape;
using dt::Tensor;

namespace {

// The reference: `eq` is explicit and letters only ("ij,jk->ik"); letters shared by operands
// may have size 1 in some of them (broadcast). Sums the product of the operands over every
// assignment of the letters, in double.
std::vector<double> reference(const std::string& eq, const std::vector<Tensor>& ops,
                              Shape* out_shape) {
  const size_t arrow = eq.find("->");
  std::vector<std::string> terms;
  std::string cur;
  for (char c : eq.substr(0, arrow)) {
    if (c == ',') {
      terms.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  terms.push_back(cur);
  const std::string out = eq.substr(arrow + 2);
  std::map<char, int64_t> size;
  std::string letters;
  for (size_t i = 0; i < terms.size(); ++i) {
    for (size_t d = 0; d < terms[i].size(); ++d) {
      const char c = terms[i][d];
      const int64_t s = ops[i].size(static_cast<int64_t>(d));
      if (!size.count(c)) {
        letters += c;
        size[c] = s;
      } else if (size[c] == 1) {
        size[c] = s;
      }
    }
  }
  std::vector<std::vector<double>> vals;
  for (const Tensor& t : ops) vals.push_back(t.to_vector<double>());
  out_shape->clear();
  int64_t out_numel = 1;
  for (char c : out) {
    out_shape->push_back(size[c]);
    out_numel *= size[c];
  }
  std::vector<double> result(static_cast<size_t>(out_numel), 0.0);
  int64_t total = 1;
  for (char c : letters) total *= size[c];
  std::map<char, int64_t> at;
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t rest = flat;
    for (size_t l = letters.size(); l-- > 0;) {
      at[letters[l]] = rest % size[letters[l]];
      rest /= size[letters[l]];
    }
    double prod = 1;
    for (size_t i = 0; i < terms.size(); ++i) {
      int64_t idx = 0;
      for (size_t d = 0; d < terms[i].size(); ++d) {
        const int64_t s = ops[i].size(static_cast<int64_t>(d));
        idx = idx * s + (s == 1 ? 0 : at[terms[i][d]]);
      }
      prod *= vals[i][static_cast<size_t>(idx)];
    }
    int64_t o = 0;
    for (char c : out) o = o * size[c] + at[c];
    result[static_cast<size_t>(o)] += prod;
  }
  return result;
}

struct Case {
  std::string eq;   // as passed to einsum
  std::string ref;  // explicit letters-only form for the reference
  std::vector<Shape> shapes;
};

std::vector<Case> cases() {
  return {
      {"ij,jk->ik", "ij,jk->ik", {{3, 4}, {4, 5}}},
      {"ij,jk->ik", "ij,jk->ik", {{3, 1}, {4, 5}}},
      {"ij,jk", "ij,jk->ik", {{3, 4}, {4, 5}}},
      {" i j , j k -> k i ", "ij,jk->ki", {{3, 4}, {4, 5}}},
      {"bij,bjk->bik", "bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}},
      {"i,j->ij", "i,j->ij", {{3}, {4}}},
      {"i,i->", "i,i->", {{5}, {5}}},
      {"ikl,lkj->ji", "ikl,lkj->ji", {{3, 2, 4}, {4, 2, 5}}},
      {"ij,ij->ij", "ij,ij->ij", {{3, 4}, {3, 4}}},
      {"ij,jk->k", "ij,jk->k", {{3, 4}, {4, 2}}},
      {"ij,k->k", "ij,k->k", {{2, 3}, {5}}},
      {"ij->ji", "ij->ji", {{3, 4}}},
      {"ij->", "ij->", {{3, 4}}},
      {"ij", "ij->ij", {{3, 4}}},
      {"ba", "ba->ab", {{3, 4}}},
      {"ii->i", "ii->i", {{4, 4}}},
      {"ii", "ii->", {{4, 4}}},
      {"iji->j", "iji->j", {{3, 2, 3}}},
      {"ii,ij->j", "ii,ij->j", {{3, 3}, {3, 4}}},
      {"bij,bjk->bik", "bij,bjk->bik", {{1, 3, 4}, {2, 4, 5}}},
      {"ik,jk", "ik,jk->ij", {{2, 1}, {3, 2}}},
      {"...ij,...jk->...ik", "abij,bjk->abik", {{2, 1, 3, 4}, {5, 4, 2}}},
      {"...ij,...jk", "abij,bjk->abik", {{2, 1, 3, 4}, {5, 4, 2}}},
      {"...ij->ji", "aij->ji", {{2, 3, 4}}},
      {"i...->...", "iab->ab", {{2, 3, 4}}},
      {"ij,jk,kl->il", "ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 5}}},
      {"ij,jk,kl", "ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 5}}},
      {"a,b,c->abc", "a,b,c->abc", {{2}, {3}, {2}}},
      {"ij,jk->ik", "ij,jk->ik", {{0, 3}, {3, 2}}},
      {"ij,jk->ik", "ij,jk->ik", {{2, 0}, {0, 3}}},
      {"bij,bjk->bik", "bij,bjk->bik", {{0, 2, 3}, {0, 3, 2}}},
      {"ij->", "ij->", {{0, 3}}},
  };
}

}  // namespace

TEST_CASE("einsum equals the reference over equations and dtypes") {
  const dt::DType dtype =
      GENERATE(dt::kFloat32, dt::kFloat64, dt::kBFloat16, dt::kFloat16, dt::kInt64, dt::kInt32);
  int seed = 1;
  for (const Case& c : cases()) {
    INFO(c.eq << " " << dt::dtype_name(dtype));
    std::vector<Tensor> ops;
    for (const Shape& s : c.shapes) ops.push_back(tt::rand_tensor(s, dtype, ++seed, -2, 2));
    Shape shape;
    const std::vector<double> want = reference(c.ref, ops, &shape);
    const Tensor got = dt::einsum(c.eq, ops);
    CHECK(got.dtype() == dtype);
    CHECK(got.is_contiguous());
    // Rounding is bounded relative to the sum of |products| (the reference on |operands|):
    // 16-bit results are rounded once per step and per sum.
    std::vector<Tensor> abs_ops;
    for (const Tensor& t : ops) {
      std::vector<double> v = t.to_vector<double>();
      for (double& x : v) x = std::fabs(x);
      abs_ops.push_back(dt::from_vector<double>(v, t.sizes()));
    }
    Shape unused;
    const std::vector<double> scales = reference(c.ref, abs_ops, &unused);
    const double rtol = dtype == dt::kFloat32    ? 1e-5
                        : dtype == dt::kFloat64  ? 1e-12
                        : dtype == dt::kBFloat16 ? 2e-2
                        : dtype == dt::kFloat16  ? 4e-3
                                                 : 0;
    tt::check_close(got, shape, want, rtol, 0, scales);
  }
}

TEST_CASE("einsum agrees with mm, bmm and matmul bit for bit on the matmul equations") {
  const Tensor a = tt::rand_tensor(Shape{5, 7}, dt::kFloat32, 1);
  const Tensor b = tt::rand_tensor(Shape{7, 3}, dt::kFloat32, 2);
  const Tensor a3 = tt::rand_tensor(Shape{4, 5, 7}, dt::kFloat32, 3);
  const Tensor b3 = tt::rand_tensor(Shape{4, 7, 3}, dt::kFloat32, 4);
  CHECK(dt::equal(dt::einsum("mk,kn->mn", {a, b}), dt::mm(a, b)));
  CHECK(dt::equal(dt::einsum("bmk,bkn->bmn", {a3, b3}), dt::bmm(a3, b3)));
  CHECK(dt::equal(dt::einsum("...mk,kn->...mn", {a3, b}), dt::bmm(a3, b.expand({4, 7, 3}))));
}

TEST_CASE("int32 einsum keeps int32 and wraps like int32 arithmetic") {
  const int32_t big = std::numeric_limits<int32_t>::max();
  const Tensor v = dt::from_vector<int32_t>({big, 1}, Shape{2});
  // A sum inside one operand (int64 in sum) cast back: INT32_MAX + 1 wraps to INT32_MIN.
  const Tensor s = dt::einsum("i->", {v});
  CHECK(s.dtype() == dt::kInt32);
  CHECK(s.to_vector<int64_t>() == std::vector<int64_t>{std::numeric_limits<int32_t>::min()});
  // A summed letter next to a contraction (the sum's int64 meets the int32 bmm).
  const Tensor a = dt::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, Shape{2, 3});
  const Tensor b = dt::from_vector<int32_t>({1, -1, 2, 0, 3, 1}, Shape{3, 2});
  const Tensor k = dt::from_vector<int32_t>({1, 2, 3, 4, 5}, Shape{5});
  const Tensor r1 = dt::einsum("ij,k->k", {a, k});
  CHECK(r1.dtype() == dt::kInt32);
  CHECK(r1.to_vector<int64_t>() == std::vector<int64_t>{21, 42, 63, 84, 105});
  const Tensor r2 = dt::einsum("ij,jk->k", {a, b});
  CHECK(r2.dtype() == dt::kInt32);
  CHECK(r2.to_vector<int64_t>() ==
        std::vector<int64_t>{5 * 1 + 7 * 2 + 9 * 3, 5 * -1 + 7 * 0 + 9 * 1});
  const Tensor r3 = dt::einsum("ij->j", {a});
  CHECK(r3.dtype() == dt::kInt32);
  CHECK(r3.to_vector<int64_t>() == std::vector<int64_t>{5, 7, 9});
}

TEST_CASE("einsum returns a fresh tensor, never its input's storage") {
  struct Alias {
    const char* eq;
    Shape shape;
  };
  // Nothing summed, and the permuted (diagonal) view already contiguous.
  const std::vector<Alias> cases = {
      {"ij->ij", {3, 4}},      {"ij", {3, 4}},    {"...", {3, 4}},        {"ij->ji", {1, 4}},
      {"bhd->hbd", {1, 3, 2}}, {"ii->i", {1, 1}}, {"i...->...i", {1, 3}}, {"ij->ji", {3, 4}}};
  for (const Alias& c : cases) {
    INFO(c.eq << " " << dt::shape_str(c.shape));
    const Tensor x = tt::rand_tensor(c.shape, dt::kFloat32, 7);
    const Tensor before = x.clone();
    Tensor y = dt::einsum(c.eq, {x});
    CHECK_FALSE(y.storage().is_same(x.storage()));
    CHECK(y.is_contiguous());
    y.fill_(dt::Scalar(42.0));  // in place on the result: the input is untouched
    CHECK(dt::equal(x, before));
  }
}

TEST_CASE("einsum's mm / bmm fast path takes strided operands and equals the general path") {
  // Transposed views: mm's and bmm's layout by letters, not by memory.
  const Tensor at = tt::rand_tensor(Shape{7, 5}, dt::kFloat64, 1).transpose(0, 1);
  const Tensor b = tt::rand_tensor(Shape{7, 3}, dt::kFloat64, 2);
  CHECK(dt::equal(dt::einsum("mk,kn->mn", {at, b}), dt::mm(at, b)));
  CHECK(dt::equal(dt::einsum("xy,yz->xz", {at, b}),
                  dt::einsum("yx,yz->xz", {at.transpose(0, 1), b})));
  const Tensor a3 = tt::rand_tensor(Shape{4, 7, 5}, dt::kFloat64, 3).transpose(1, 2);
  const Tensor b3 = tt::rand_tensor(Shape{4, 7, 3}, dt::kFloat64, 4);
  CHECK(dt::equal(dt::einsum("bmk,bkn->bmn", {a3, b3}), dt::bmm(a3, b3)));
  // A broadcast batch letter is not bmm's layout: the general path.
  const Tensor a1 = tt::rand_tensor(Shape{1, 5, 7}, dt::kFloat64, 5);
  const Tensor r = dt::einsum("bmk,bkn->bmn", {a1, b3});
  CHECK(dt::equal(r, dt::bmm(a1.expand({4, 5, 7}), b3)));
}

TEST_CASE("einsum plans are cached by equation text and ranks, errors are not") {
  namespace d = dt::detail;
  const int64_t r22[] = {2, 2}, r32[] = {3, 2};
  const d::EinsumPlan& p1 = d::resolve_einsum("einsum", "...ij,jk", r22);
  const d::EinsumPlan& p2 = d::resolve_einsum("einsum", "...ij,jk", r22);
  const d::EinsumPlan& p3 = d::resolve_einsum("einsum", "...ij,jk", r32);
  CHECK(&p1 == &p2);
  CHECK(&p1 != &p3);
  CHECK(p1.text == "ij,jk->ik");
  CHECK(p3.text == "aij,jk->aik");
  // Another thread sees the same process-wide plan.
  const d::EinsumPlan* other = nullptr;
  std::thread([&] { other = &d::resolve_einsum("einsum", "...ij,jk", r22); }).join();
  CHECK(other == &p1);
  const int64_t r1[] = {1};
  for (int i = 0; i < 2; ++i) {
    CHECK_THROWS_WITH(d::resolve_einsum("einsum", "ij", r1),
                      Catch::Contains("[einsum] operand 0 has 1 dims but the equation gives it 2"));
  }
  // More than two operands: the steps and their texts, computed once.
  const int64_t r222[] = {2, 2, 2};
  const d::EinsumPlan& chain = d::resolve_einsum("einsum", "ij,jk,kl", r222);
  CHECK(chain.text == "ij,jk,kl->il");
  CHECK(chain.step_texts == std::vector<std::string>{"ij,jk->ik", "ik,kl->il"});
}

TEST_CASE("einsum argument errors name the op, the argument and what was expected") {
  const Tensor a = tt::rand_tensor(Shape{2, 3}, dt::kFloat32, 1);
  const Tensor b = tt::rand_tensor(Shape{4, 5, 6}, dt::kFloat32, 2);
  const Tensor d = tt::rand_tensor(Shape{3, 4}, dt::kFloat64, 3);
  using Catch::Contains;
  CHECK_THROWS_WITH(dt::einsum("ij,jk->ik", {a, b}),
                    Contains("[einsum] operand 1 has 3 dims but the equation gives it 2 letters"));
  CHECK_THROWS_WITH(dt::einsum("ij,jk->ik", {a}),
                    Contains("[einsum] the equation 'ij,jk->ik' has 2 operand terms but 1 "
                             "operands were given"));
  CHECK_THROWS_WITH(dt::einsum("ij", absl::Span<const Tensor>()),
                    Contains("[einsum] expected at least one operand"));
  CHECK_THROWS_WITH(dt::einsum("ij,jk->ik", {a, a}),
                    Contains("[einsum] letter 'j' has size 3 in operand 0 and 2 in operand 1 "
                             "(sizes must be equal or 1)"));
  CHECK_THROWS_WITH(dt::einsum("ij,jk->ik", {a, d}),
                    Contains("[einsum] operand 1 has dtype float64, expected float32"));
  CHECK_THROWS_WITH(dt::einsum("ii->i", {a}),
                    Contains("[einsum] letter 'i' is repeated in operand 0 with sizes 2 and 3"));
  CHECK_THROWS_WITH(dt::einsum("ij->ik", {a}),
                    Contains("[einsum] output letter 'k' does not appear in any operand"));
  CHECK_THROWS_WITH(dt::einsum("ij->ii", {a}),
                    Contains("[einsum] output letter 'i' appears more than once"));
  CHECK_THROWS_WITH(dt::einsum("i1->i", {a}), Contains("[einsum] invalid character '1'"));
  // Spaces only are ignored, as torch: a tab or a newline is refused.
  CHECK(dt::equal(dt::einsum(" i j -> j i ", {a}), dt::einsum("ij->ji", {a})));
  CHECK_THROWS_WITH(dt::einsum("i\tj->ji", {a}), Contains("[einsum] invalid character '\\t'"));
  CHECK_THROWS_WITH(dt::einsum("ij->ji\n", {a}), Contains("[einsum] invalid character '\\n'"));
  CHECK_THROWS_WITH(dt::einsum("i..j->i", {a}), Contains("that is not part of one '...'"));
  CHECK_THROWS_WITH(dt::einsum("...i...->i", {a}), Contains("that is not part of one '...'"));
  CHECK_THROWS_WITH(dt::einsum("ij->i->j", {a}), Contains("may hold one '->' only"));
  CHECK_THROWS_WITH(dt::einsum("ijk...->i", {a}),
                    Contains("[einsum] operand 0 has 2 dims but the equation gives it 3 letters "
                             "and '...'"));
  CHECK_THROWS_WITH(dt::einsum("...ij,...jk", {tt::rand_tensor(Shape{2, 2, 3}, dt::kFloat32, 4),
                                               tt::rand_tensor(Shape{3, 3, 4}, dt::kFloat32, 5)}),
                    Contains("[einsum] ellipsis dim 'a' has size 2 in operand 0 and 3 in "
                             "operand 1"));
  CHECK_THROWS_WITH(dt::einsum("ij->ij", {dt::ones({2}, dt::kBool).expand({2, 2})}),
                    Contains("[einsum] operand 0 has dtype bool, expected a numeric dtype"));
  CHECK_THROWS_WITH(dt::einsum("ij,jk->ik", {a, Tensor()}),
                    Contains("[einsum] operand 1 is an undefined tensor"));
}

TEST_CASE("einsum strategy rows are generated from the equation") {
  using dt::Partial;
  using dt::Placements;
  using dt::Replicate;
  using dt::Shard;
  using dt::StrategyRows;
  auto rows = [](const char* eq, std::vector<Shape> shapes) {
    return dt::detail::einsum_strategy_rows(eq, shapes);
  };
  // mm: the Megatron rows, in matmul_rows' order.
  CHECK(rows("mk,kn->mn", {{4, 3}, {3, 5}}) == StrategyRows{{Shard(0), Shard(0), Replicate()},
                                                            {Shard(1), Replicate(), Shard(1)},
                                                            {Partial(), Shard(1), Shard(0)}});
  CHECK(rows("bmk,bkn->bmn", {{2, 4, 3}, {2, 3, 5}}) ==
        StrategyRows{{Shard(0), Shard(0), Shard(0)},
                     {Shard(1), Shard(1), Replicate()},
                     {Shard(2), Replicate(), Shard(2)},
                     {Partial(), Shard(2), Shard(1)}});
  // Two contracted letters, a transposed output.
  CHECK(rows("ikl,lkj->ji", {{3, 2, 4}, {4, 2, 5}}) ==
        StrategyRows{{Shard(0), Replicate(), Shard(2)},
                     {Shard(1), Shard(0), Replicate()},
                     {Partial(), Shard(1), Shard(1)},
                     {Partial(), Shard(2), Shard(0)}});
  // One operand: a kept letter shards, a summed one gives Partial.
  CHECK(rows("ij->j", {{3, 4}}) == StrategyRows{{Shard(0), Shard(1)}, {Partial(), Shard(0)}});
  // A diagonal letter gets no row; a broadcast (size-1) operand stays Replicate.
  CHECK(rows("ii->i", {{3, 3}}).empty());
  CHECK(rows("iji->j", {{3, 2, 3}}) == StrategyRows{{Shard(0), Shard(1)}});
  CHECK(rows("bij,bjk->bik", {{1, 3, 4}, {2, 4, 5}}) ==
        StrategyRows{{Shard(0), Replicate(), Shard(0)},
                     {Shard(1), Shard(1), Replicate()},
                     {Shard(2), Replicate(), Shard(2)},
                     {Partial(), Shard(2), Shard(1)}});
  CHECK(rows("ik,jk", {{2, 1}, {3, 2}}) == StrategyRows{{Shard(0), Shard(0), Replicate()},
                                                        {Shard(1), Replicate(), Shard(0)},
                                                        {Partial(), Replicate(), Shard(1)}});
  // The canonical form of an implicit equation with an ellipsis.
  const std::vector<Shape> shapes = {{2, 1, 3, 4}, {5, 4, 2}};
  CHECK(dt::detail::parse_einsum("einsum", "...ij,...jk", shapes).str() == "abij,bjk->abik");
  CHECK(dt::detail::parse_einsum("einsum", "ij,jk,kl", {{2, 3}, {3, 4}, {4, 5}}).str() ==
        "ij,jk,kl->il");
  const auto steps = dt::detail::einsum_steps(
      dt::detail::parse_einsum("einsum", "ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 5}}));
  REQUIRE(steps.size() == 2);
  CHECK(steps[0].str() == "ij,jk->ik");
  CHECK(steps[1].str() == "ik,kl->il");
}
