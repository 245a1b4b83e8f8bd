dtensor_add_test(test_ops_loss SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_loss.cc
                 DEPS dtensor::ops LABELS unit)
# The fused gradient rows of the pointwise losses against the two-pass path (every SIMD target).
dtensor_add_test(test_ops_loss_fused_grad SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_loss_fused_grad.cc
                 DEPS dtensor::ops LABELS unit)
dtensor_add_mpi_test(test_loss_dtensor_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_loss_dtensor_mpi.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
