// The umbrella header: everything a dtensor user needs.
//   #include <dtensor/dtensor.h>
// It sits outside the layering (it includes every layer) and only includes.
#pragma once

#include "dtensor/config.h"

// Local tensors.
#include "tensor/compare.h"
#include "tensor/creation.h"
#include "tensor/shape_ops.h"
#include "tensor/tensor.h"

// Processes, communication and meshes.
#include "collectives/comm_debug.h"
#include "collectives/communicator.h"
#include "collectives/debug_log.h"
#include "collectives/deadline.h"
#include "collectives/runtime.h"
#include "device_mesh/device_mesh.h"

// Distributed tensors.
#include "dtensor/distributed_tensor.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/factories.h"
#include "dtensor/placement.h"
#include "dtensor/redistribute.h"

// Autograd (backward, grad mode, custom functions).
#include "autograd/dispatch.h"
#include "autograd/engine.h"
#include "autograd/function.h"
#include "autograd/grad_mode.h"

// Ops (local Tensor and DTensor forms).
#include "ops/config_str.h"
#include "ops/elementwise/elementwise.h"
#include "ops/embedding/embedding.h"
#include "ops/index/advanced_index.h"
#include "ops/index/index.h"
#include "ops/index/masked_select.h"
#include "ops/loss/loss.h"
#include "ops/matmul/blas_info.h"
#include "ops/matmul/einsum.h"
#include "ops/matmul/matmul.h"
#include "ops/norm/norm.h"
#include "ops/ops_registry.h"
#include "ops/reduction/reduction.h"
#include "ops/scan/scan.h"
#include "ops/softmax/softmax.h"
#include "ops/view/copy_ops.h"
#include "ops/view/view.h"

// Random numbers.
#include "rng/dtensor_random.h"
#include "rng/generator.h"
#include "rng/random.h"

// Modules and tensor parallelism.
#include "nn/nn.h"
#include "parallel/parallelize.h"
#include "parallel/style.h"
#include "parallel/transformer_plan.h"

// Optimizers.
#include "optim/optimizer.h"

// Distributed checkpoint.
#include "checkpoint/checkpoint.h"
#include "checkpoint/train_state.h"
