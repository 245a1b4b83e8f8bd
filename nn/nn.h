// The nn layer in one include: Module, the DTensor functional ops, layers, activation
// modules, losses and transformer.
#pragma once

#include "nn/activation.h"
#include "nn/functional.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/module.h"
#include "nn/transformer.h"
