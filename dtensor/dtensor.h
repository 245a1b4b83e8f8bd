// The umbrella header: everything a dtensor user needs.
//   #include <dtensor/dtensor.h>
// It sits outside the layering (it includes every layer) and only includes.
#pragma once

#include "dtensor/config.h"
#include "dtensor/distributed_tensor.h"
#include "dtensor/dtensor_spec.h"
#include "dtensor/placement.h"
#include "dtensor/redistribute.h"
#include "tensor/compare.h"
#include "tensor/creation.h"
#include "tensor/shape_ops.h"
#include "tensor/tensor.h"
