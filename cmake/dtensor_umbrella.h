// Installed as <prefix>/include/dtensor/dtensor.h: the umbrella a consumer includes,
//   #include <dtensor/dtensor.h>
// It forwards to the dtensor layer's umbrella (installed as dtensor/dtensor/dtensor.h), so the
// same line works against the installed package and inside the source tree.
#pragma once

#include "dtensor/dtensor/dtensor.h"
