dtensor_add_test(test_ops_softmax SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_softmax.cc
                 DEPS dtensor::ops LABELS unit)
# The vectorised kernels on every compiled SIMD target, and the backward kernels.
dtensor_add_test(test_ops_softmax_kernels SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_softmax_kernels.cc
                 DEPS dtensor::ops LABELS unit)
dtensor_add_mpi_test(test_softmax_dtensor_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_softmax_dtensor_mpi.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
