// The node that ends every path of the graph at a leaf that requires grad: it runs the leaf's
// gradient hooks, lays the gradient out like the leaf (so a parameter's grad() always has the
// parameter's placements: a Partial gradient is reduced here, one collective per Partial mesh
// dim, unless a hook such as data parallel's reduced it already), adds it into grad() and runs
// the leaf's post accumulate grad hooks.
#pragma once

#include <memory>

#include "dtensor/autograd/node.h"

namespace dtensor::autograd {

// The accumulator of leaf `t` (which requires grad), created on first use and shared by every
// recorded use of the leaf, so that the engine sums its gradients once.
std::shared_ptr<Node> grad_accumulator(const DTensor& t);

// `grad` after the register_hook hooks of the leaf whose accumulator is `node` (autograd::grad
// takes a leaf's gradient there, accumulating nothing); unchanged when `node` is no accumulator.
DTensor run_leaf_hooks(const Node& node, DTensor grad);

}  // namespace dtensor::autograd
