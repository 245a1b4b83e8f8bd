// The umbrella header: everything a dtensor user needs.
//   #include <dtensor/dtensor.h>
// It sits outside the layering (it includes every layer) and only includes. Programs, the
// examples (examples/*.cc) included, need no other dtensor header: tensors, meshes, DTensors,
// autograd, every op family, user ops (register_op, OpInfo, KernelContext), threads and TF32,
// random numbers, modules, tensor and data parallelism, optimizers, losses and checkpoints.
// Internal headers live in detail/ folders, which are not installed and never included here.
#pragma once

#include "dtensor/config.h"

// Local tensors.
#include "dtensor/tensor/compare.h"
#include "dtensor/tensor/creation.h"
#include "dtensor/tensor/device.h"
#include "dtensor/tensor/dtype.h"
#include "dtensor/tensor/error.h"
#include "dtensor/tensor/memory_stats.h"
#include "dtensor/tensor/scalar.h"
#include "dtensor/tensor/shape.h"
#include "dtensor/tensor/shape_ops.h"
#include "dtensor/tensor/storage.h"
#include "dtensor/tensor/tensor.h"

// Processes, communication and meshes.
#include "dtensor/collectives/comm_debug.h"
#include "dtensor/collectives/communicator.h"
#include "dtensor/collectives/deadline.h"
#include "dtensor/collectives/debug_log.h"
#include "dtensor/collectives/fake_communicator.h"
#include "dtensor/collectives/runtime.h"
#include "dtensor/device_mesh/device_mesh.h"

// Distributed tensors.
#include "dtensor/core/distributed_tensor.h"
#include "dtensor/core/dtensor_spec.h"
#include "dtensor/core/factories.h"
#include "dtensor/core/placement.h"
#include "dtensor/core/redistribute.h"
// User ops: OpSchema, KernelContext, single_output (dtensor/core/propagation/).
#include "dtensor/core/propagation/dispatch.h"
#include "dtensor/core/propagation/op_schema.h"

// Autograd (backward, grad mode, custom functions, torch.autograd.functional).
#include "dtensor/autograd/dispatch.h"
#include "dtensor/autograd/engine.h"
#include "dtensor/autograd/function.h"
#include "dtensor/autograd/functional.h"
#include "dtensor/autograd/grad_mode.h"

// Ops (local Tensor and DTensor forms), the op registry (register_op), intra-op threads.
#include "dtensor/ops/advanced_index/advanced_index.h"
#include "dtensor/ops/attention/attention.h"
#include "dtensor/ops/config_str.h"
#include "dtensor/ops/conv/conv.h"
#include "dtensor/ops/distance/distance.h"
#include "dtensor/ops/elementwise/elementwise.h"
#include "dtensor/ops/embedding/embedding.h"
#include "dtensor/ops/index/index.h"
#include "dtensor/ops/loss/loss.h"
#include "dtensor/ops/masked_select/masked_select.h"
#include "dtensor/ops/matmul/blas_info.h"
#include "dtensor/ops/matmul/einsum.h"
#include "dtensor/ops/matmul/matmul.h"
#include "dtensor/ops/norm/norm.h"
#include "dtensor/ops/ops_registry.h"
#include "dtensor/ops/pool/pool.h"
#include "dtensor/ops/reduction/reduction.h"
#include "dtensor/ops/scan/scan.h"
#include "dtensor/ops/softmax/softmax.h"
#include "dtensor/ops/threads.h"
#include "dtensor/ops/view/copy_ops.h"
#include "dtensor/ops/view/view.h"

// Random numbers.
#include "dtensor/rng/dtensor_random.h"
#include "dtensor/rng/generator.h"
#include "dtensor/rng/random.h"

// Modules, tensor and data parallelism.
#include "dtensor/nn/nn.h"
#include "dtensor/parallel/context/context_parallel.h"
#include "dtensor/parallel/data_parallel/data_parallel.h"
#include "dtensor/parallel/distribute_module.h"
#include "dtensor/parallel/local_map.h"
#include "dtensor/parallel/parallelize.h"
#include "dtensor/parallel/pipeline/clip_grad.h"
#include "dtensor/parallel/pipeline/pipeline_schedule.h"
#include "dtensor/parallel/pipeline/schedule.h"
#include "dtensor/parallel/pipeline/split.h"
#include "dtensor/parallel/pipeline/stage.h"
#include "dtensor/parallel/pipeline/state_dict.h"
#include "dtensor/parallel/style.h"
#include "dtensor/parallel/transformer_plan.h"

// Optimizers, gradient clipping.
#include "dtensor/optim/lr_scheduler.h"
#include "dtensor/optim/optimizer.h"

// Distributed checkpoint.
#include "dtensor/checkpoint/checkpoint.h"
#include "dtensor/checkpoint/hf.h"
#include "dtensor/checkpoint/plan.h"
#include "dtensor/checkpoint/train_state.h"

// Compiling a training step: capture, passes, replay.
#include "dtensor/compile/compile.h"

// Ready models (Hugging Face architectures), their parallelization, KV cache and generation.
#include "dtensor/models/dry_run.h"
#include "dtensor/models/generate.h"
#include "dtensor/models/kv_cache.h"
#include "dtensor/models/llama.h"
#include "dtensor/models/llama_config.h"
#include "dtensor/models/llama_pipeline.h"
#include "dtensor/models/llama_plan.h"

namespace dtensor::detail {
// DTensor's recorded members (redistribute, backward, ...) and view members (x.view(...), ...)
// live in the core and reach the autograd and ops libraries through hooks those libraries
// install when they are loaded (dtensor/core/detail/autograd_hooks.h, view_hooks.h). A linker
// with --as-needed (Debian's and Ubuntu's gcc default) drops a library the program references
// nothing of, so a program calling only such members would run without them: this reference,
// made once per program that includes the umbrella, keeps the ops library (and with it
// autograd) loaded. Defined in dtensor/ops/register_all.cc.
bool anchor_ops_and_autograd();
[[maybe_unused]] inline const bool kOpsAndAutogradAnchored = anchor_ops_and_autograd();
}  // namespace dtensor::detail
