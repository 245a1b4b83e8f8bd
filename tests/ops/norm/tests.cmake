dtensor_add_test(test_ops_norm SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_norm.cc
                 DEPS dtensor::ops LABELS unit)
# The vectorised kernels on every compiled SIMD target, statistics and backward kernels.
dtensor_add_test(test_ops_norm_kernels SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_norm_kernels.cc
                 DEPS dtensor::ops LABELS unit)
dtensor_add_mpi_test(test_norm_dtensor_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_norm_dtensor_mpi.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
