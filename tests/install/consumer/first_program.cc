// The README's first program, checked: exits 1 unless the gathered tensor equals x.
#include <dtensor/dtensor.h>
namespace dt = dtensor;

int main(int argc, char** argv) {
  dt::Runtime rt(&argc, &argv);                          // MPI init/finalize
  const int64_t dp = dt::world_size() % 2 == 0 ? 2 : 1;  // a 2 x 2 mesh on 4 ranks
  auto mesh = dt::init_device_mesh(dt::kCPU, {dp, dt::world_size() / dp}, {"dp", "tp"});
  dt::manual_seed(1234, mesh);  // same seed everywhere, checked
  dt::Tensor x = dt::randn({8, 16});
  dt::DTensor a = dt::distribute_tensor(x, mesh, {dt::Shard(0), dt::Replicate()});
  dt::DTensor b = a.redistribute(mesh, {dt::Replicate(), dt::Shard(1)});
  dt::Tensor full = b.full_tensor();  // equals x on every rank
  return dt::equal(full, x) ? 0 : 1;
}
