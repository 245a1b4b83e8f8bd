// Autograd's per-thread state (the grad mode, the backward running on this thread and its
// queued callbacks): two threads that record and run backward on graphs of their own at once
// get the single-threaded gradients, and neither sees the other's grad mode or pass. Run under
// ThreadSanitizer by scripts/tsan.sh, which also checks that the engine shares nothing
// unguarded between them.
#include <catch2/catch.hpp>
#include <thread>
#include <vector>

#include "dtensor/autograd/engine.h"
#include "dtensor/autograd/grad_mode.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/tensor/creation.h"

namespace dt = dtensor;
using dt::DTensor;

namespace {

// f = sum((a @ b) * a) for a [2, 2] leaf a and a constant b: df/da = (a @ b^T) + (a @ b).
// Returns a's gradient after `rounds` backward passes; `ok` false when this thread saw the
// other's grad mode (a no_grad scope on one thread must not stop the other's recording) or a
// pass still running after its backward returned.
std::vector<double> train(double scale, int rounds, bool no_grad_between, bool* ok) {
  *ok = true;
  const DTensor b = dt::local_dtensor(dt::from_vector<double>({1, 2, 3, 4}, {2, 2}));
  DTensor a = dt::local_dtensor(dt::from_vector<double>({scale, 2 * scale, 3 * scale, 0}, {2, 2}));
  a.requires_grad_();
  for (int r = 0; r < rounds; ++r) {
    a.set_grad(DTensor());
    if (no_grad_between) {
      const dt::autograd::NoGradGuard off;
      if (dt::sum(dt::matmul(a, b)).requires_grad()) *ok = false;
    }
    const DTensor f = dt::sum(dt::mul(dt::matmul(a, b), a));
    if (!f.requires_grad()) *ok = false;
    f.backward();
    if (dt::autograd::in_backward()) *ok = false;
  }
  return a.grad().to_local().to_vector<double>();
}

}  // namespace

TEST_CASE("autograd: two threads run backward on their own graphs at once", "[autograd][threads]") {
  bool ok_alone = false;
  const std::vector<double> alone_1 = train(1.0, 1, false, &ok_alone);
  const std::vector<double> alone_2 = train(2.0, 1, true, &ok_alone);
  REQUIRE(ok_alone);
  // a = [[1, 2], [3, 0]], b = [[1, 2], [3, 4]]: a @ b^T + a @ b = [[5, 11], [3, 9]] +
  // [[7, 10], [3, 6]].
  CHECK(alone_1 == std::vector<double>{12, 21, 6, 15});
  std::vector<double> got_1, got_2;
  bool ok_1 = false, ok_2 = false;
  std::thread other([&] { got_2 = train(2.0, 40, true, &ok_2); });
  got_1 = train(1.0, 40, false, &ok_1);
  other.join();
  CHECK(ok_1);
  CHECK(ok_2);
  CHECK(got_1 == alone_1);
  CHECK(got_2 == alone_2);
}
