dtensor_add_test(test_ops_norm SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_norm.cc
                 DEPS dtensor::ops LABELS unit)
# The vectorised kernels on every compiled SIMD target, statistics and backward kernels.
dtensor_add_test(test_ops_norm_kernels SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_norm_kernels.cc
                 DEPS dtensor::ops LABELS unit)
# group_norm's fused kernels against the composition in float64 (every SIMD target).
dtensor_add_test(test_ops_group_norm_kernels
                 SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_group_norm_kernels.cc
                 DEPS dtensor::ops LABELS unit)
dtensor_add_mpi_test(test_norm_dtensor_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_norm_dtensor_mpi.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
# batch_norm / group_norm / instance_norm against PyTorch's numbers (norm_layers_references.h).
dtensor_add_test(test_ops_norm_layers SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_norm_layers.cc
                 DEPS dtensor::ops LABELS unit)
dtensor_add_mpi_test(test_norm_layers_dtensor_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_norm_layers_dtensor_mpi.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
