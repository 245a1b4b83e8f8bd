// Ring attention vs gathering k/v (issue 45 item 4): attention over a sequence sharded on a cp
// mesh dim of all the ranks,
//
//   mpirun -np N bench_ring_attention [--batch 1] [--heads 4] [--seq 2048] [--head-dim 64]
//                                     [--iters 5] [--warmup 1] [--json FILE]
//
// for causal (ring: head-tail layout) and full attention, forward and forward + backward:
//   ring    dt::ring_attention (k/v blocks passed round the ring, overlapped with the blocks'
//           compute);
//   gather  k and v all-gathered (redistribute to Replicate), then scaled_dot_product_attention
//           on the query shard (natural order: the op's query-sharded row; under causality the
//           last rank does the most work, which is what load balancing removes);
// and, to measure the overlap, the ring's messages alone (comm: the same pattern and sizes with
// no compute) and the time the ring waits for its messages after computing each block (wait:
// detail::ring_wait_seconds). A rank's wait also holds its predecessor's lateness (a peer that
// finished its block later sends later), so the waits are given as min and max over ranks: the
// min is the rank least held up by its peers, the nearest to the exposed communication alone.
// hidden = 1 - min wait / comm: the share of the ring's communication that ran behind its
// computation (1: all of it; the backward's last dk/dv hop, with no compute left to hide it, is
// in neither). Times are medians over interleaved runs, max over ranks. The run fails unless
// ring and gather give the same output (float32, 1e-4).
#include <mpi.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "benchmarks/common/bench_common.h"
#include "benchmarks/common/bench_util.h"
#include "dtensor/dtensor.h"
#include "dtensor/parallel/context/detail/ring_exchange.h"

namespace dt = dtensor;
namespace bench = dtensor::bench;

namespace {

constexpr int kTag = 4600;

struct Case {
  bool causal;
  const char* name;
};

int run(int argc, char** argv) {
  bench::Flags flags(argc, argv);
  const int64_t B = flags.i64("batch", 1), H = flags.i64("heads", 4), S = flags.i64("seq", 2048),
                D = flags.i64("head-dim", 64);
  const int64_t iters = flags.i64("iters", 5), warmup = flags.i64("warmup", 1);
  const int world = dt::world_size();
  const dt::DeviceMesh mesh = dt::init_device_mesh(dt::kCPU, {world}, {"cp"});
  const dt::CommunicatorPtr& comm = mesh.communicator(0);
  const int64_t cp = world, rank = mesh.get_local_rank(0);
  bench::JsonLines json("bench_ring_attention", flags.str("json", ""));
  bench::print0(
      "# bench_ring_attention: q/k/v [%lld, %lld, %lld, %lld] float32 sequence-sharded over cp = "
      "%d; median of %lld runs (max over ranks), ms\n",
      (long long)B, (long long)H, (long long)S, (long long)D, world, (long long)iters);
  bench::print0("%-7s %9s %9s %9s %9s %9s %9s %8s %9s %9s %8s\n", "case", "ring_f", "gather_f",
                "ring_fb", "gather_fb", "comm_f", "wait_f", "hidden_f", "comm_b", "wait_b",
                "hidden_b");

  dt::Generator gen(11);
  const dt::Tensor qw = dt::randn({B, H, S, D}, {}, &gen), kw = dt::randn({B, H, S, D}, {}, &gen),
                   vw = dt::randn({B, H, S, D}, {}, &gen), gw = dt::randn({B, H, S, D}, {}, &gen);
  const auto replicated = [&](const dt::Tensor& t) {
    return dt::DTensor::from_local(t, mesh, {dt::Replicate()});
  };
  int bad = 0;
  for (const Case c : {Case{true, "causal"}, Case{false, "full"}}) {
    // Ring inputs in the head-tail layout; gather inputs in the natural order.
    const auto ring_in = [&](const dt::Tensor& t) {
      return dt::context_parallel_shard(replicated(t), 0, 2).detach();
    };
    const auto nat_in = [&](const dt::Tensor& t) {
      return replicated(t).redistribute({dt::Shard(2)}).detach();
    };
    const dt::DTensor rq = ring_in(qw), rk = ring_in(kw), rv = ring_in(vw), rg = ring_in(gw);
    const dt::DTensor nq = nat_in(qw), nk = nat_in(kw), nv = nat_in(vw), ng = nat_in(gw);
    dt::DTensor rqg = rq.detach().requires_grad_(), rkg = rk.detach().requires_grad_(),
                rvg = rv.detach().requires_grad_();
    dt::DTensor nqg = nq.detach().requires_grad_(), nkg = nk.detach().requires_grad_(),
                nvg = nv.detach().requires_grad_();
    const dt::RingAttentionOptions opts{.is_causal = c.causal};
    const auto ring_f = [&] { return dt::ring_attention(rq, rk, rv, 0, opts); };
    const auto gather_f = [&](const dt::DTensor& q, const dt::DTensor& k, const dt::DTensor& v) {
      return dt::scaled_dot_product_attention(q, k.redistribute({dt::Replicate()}),
                                              v.redistribute({dt::Replicate()}), dt::DTensor(), 0.0,
                                              c.causal);
    };
    // Same output (both back in the natural order).
    const dt::Tensor a = dt::context_parallel_unshard(ring_f(), 0, 2).full_tensor();
    const dt::Tensor b = gather_f(nq, nk, nv).full_tensor();
    const double diff = dt::max(dt::abs(dt::sub(a, b))).to(dt::kFloat64).item<double>();
    if (!(diff <= 1e-4)) bad = 1;

    // The ring's messages alone (the same pattern and sizes, no compute), and the time the ring
    // itself waits for them after computing each block (what compute did not hide).
    const dt::Tensor kl = rk.to_local(), vl = rv.to_local();
    std::vector<double> wait_f, wait_b;
    const auto waited = [](const std::function<void()>& fn) {
      const double w0 = dt::detail::ring_wait_seconds();
      fn();
      return dt::detail::ring_wait_seconds() - w0;
    };
    const auto messages = [&](int64_t hops) {
      for (int64_t t = 0; t < hops; ++t) {
        dt::detail::ring_shift(comm, {kl, vl}, {dt::empty_like(kl), dt::empty_like(vl)}, kTag)
            ->wait();
      }
    };
    const std::vector<std::function<void()>> fns = {
        [&] { wait_f.push_back(waited([&] { ring_f(); })); },
        [&] { gather_f(nq, nk, nv); },
        [&] {
          dt::DTensor out;
          waited([&] { out = dt::ring_attention(rqg, rkg, rvg, 0, opts); });
          wait_b.push_back(waited([&] { out.backward(rg); }));
        },
        [&] { gather_f(nqg, nkg, nvg).backward(ng); },
        [&] { messages(cp - 1); },
        // Backward: k/v again (cp - 1 hops) and dk/dv (cp hops, the last of which has no compute
        // to hide behind and is not in the ring's wait: cp - 1 here).
        [&] { messages(2 * (cp - 1)); },
    };
    const std::vector<bench::Stats> st =
        bench::time_interleaved(fns, warmup, iters, /*comm_world=*/true, /*shuffled=*/true);
    const auto ms = [&](size_t i) { return st[i].median * 1e3; };
    // The waits' min over ranks (exposed communication) and max (with the peers' lateness).
    const double waits[2] = {bench::stats_of(wait_f).median * 1e3,
                             bench::stats_of(wait_b).median * 1e3};
    double exposed[2], late[2];
    MPI_Allreduce(waits, exposed, 2, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(waits, late, 2, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    const auto hidden = [](double wait, double comm_t) {
      return comm_t > 0 ? std::clamp(1.0 - wait / comm_t, 0.0, 1.0) : 1.0;
    };
    const double hidden_f = hidden(exposed[0], ms(4)), hidden_b = hidden(exposed[1], ms(5));
    bench::print0("%-7s %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %8.2f %9.2f %9.2f %8.2f\n", c.name,
                  ms(0), ms(1), ms(2), ms(3), ms(4), exposed[0], hidden_f, ms(5), exposed[1],
                  hidden_b);
    json.write(json.record(c.name)
                   .add("ranks", world)
                   .add("seq", S)
                   .add("heads", H)
                   .add("head_dim", D)
                   .add_stats("ring_fwd", st[0])
                   .add_stats("gather_fwd", st[1])
                   .add_stats("ring_fwd_bwd", st[2])
                   .add_stats("gather_fwd_bwd", st[3])
                   .add_stats("ring_comm_fwd", st[4])
                   .add_stats("ring_comm_bwd", st[5])
                   .add("ring_wait_fwd_ms", exposed[0])
                   .add("ring_wait_bwd_ms", exposed[1])
                   .add("ring_wait_fwd_max_ms", late[0])
                   .add("ring_wait_bwd_max_ms", late[1])
                   .add("hidden_fwd", hidden_f)
                   .add("hidden_bwd", hidden_b)
                   .add("max_diff", diff));
  }
  MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (bad != 0) bench::print0("ring and gather outputs DIFFER\n");
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  return bench::run_main(argc, argv, run);
}
