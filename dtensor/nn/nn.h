// The nn layer in one include: Module, Sequential, the DTensor functional ops, layers,
// activation, dropout and padding modules, losses and transformer.
#pragma once

#include "dtensor/nn/activation.h"
#include "dtensor/nn/activation_checkpoint.h"
#include "dtensor/nn/basic_layers.h"
#include "dtensor/nn/container.h"
#include "dtensor/nn/conv.h"
#include "dtensor/nn/distance.h"
#include "dtensor/nn/functional.h"
#include "dtensor/nn/layers.h"
#include "dtensor/nn/loss.h"
#include "dtensor/nn/module.h"
#include "dtensor/nn/multihead_attention.h"
#include "dtensor/nn/norm_layers.h"
#include "dtensor/nn/pooling.h"
#include "dtensor/nn/recurrent.h"
#include "dtensor/nn/transformer.h"
#include "dtensor/nn/transformer_encoder.h"
#include "dtensor/nn/two_input_module.h"
