// Sharding strategy of embedding. Inputs are ordered (weight, indices) so that Linearity
// kLinearInFirst expresses "linear in the table". Rows for one mesh dim:
//   [P(sum) | S(0), R]      vocab-parallel: each rank looks up its row block, masking other
//                           rows to zero (embedding_masked); the sum over ranks is the lookup
//   [S(-1) | S(1), R]       column-sharded table: the output's embedding dim is sharded
//   [S(d)  | R, S(d)]       sharded indices with a replicated table: output sharded alike
#include "dtensor/propagation/registry.h"
#include "tensor/error.h"

namespace dtensor {

void register_embedding_ops(Registry& registry) {
  OpInfo op;
  op.name = "embedding";
  op.input_names = {"weight", "indices"};
  op.linearity = Linearity::kLinearInFirst;
  op.meta = [](const OpSchema& s) {
    const DTensorSpec& w = s.input(0);
    const DTensorSpec& idx = s.input(1);
    DT_CHECK(w.ndim() == 2, "[embedding] argument weight has shape %s, expected a 2-d table",
             shape_str(w.shape()));
    DT_CHECK(idx.dtype() == kInt32 || idx.dtype() == kInt64,
             "[embedding] argument indices has dtype %s, expected int32 or int64",
             dtype_name(idx.dtype()));
    Shape shape = idx.shape();
    shape.push_back(w.shape()[1]);
    return OutputMetas{TensorMeta(shape, w.dtype())};
  };
  op.strategy = [](const OpSchema& s) {
    const int64_t idx_ndim = s.input(1).ndim();
    StrategyRows rows = {{Partial(), Shard(0), Replicate()},
                         {Shard(idx_ndim), Shard(1), Replicate()}};
    for (int64_t d = 0; d < idx_ndim; ++d) rows.push_back({Shard(d), Replicate(), Shard(d)});
    return rows;
  };
  registry.add(std::move(op));
}

}  // namespace dtensor
