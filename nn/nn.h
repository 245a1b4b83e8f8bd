// The nn layer in one include: Module, the DTensor functional ops, layers, losses and
// transformer.
#pragma once

#include "nn/functional.h"
#include "nn/layers.h"
#include "nn/loss.h"
#include "nn/module.h"
#include "nn/transformer.h"
