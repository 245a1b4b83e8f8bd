dtensor_add_test(test_ops_reduction
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_reduction.cc
  DEPS dtensor::ops
  LABELS unit)
# The vectorised row and outer reductions on every compiled SIMD target.
dtensor_add_test(test_ops_reduction_kernels
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_reduction_kernels.cc
  DEPS dtensor::ops
  LABELS unit)
# DTensor forms (mpirun at 1, 2, 4 ranks).
dtensor_add_mpi_test(test_reduction_dtensor
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_reduction_dtensor.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
# The composite reductions of reduction_math.cc (std, logsumexp, vector_norm, dist, any, all).
dtensor_add_test(test_ops_reduction_math
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_reduction_math.cc
  DEPS dtensor::ops
  LABELS unit)
