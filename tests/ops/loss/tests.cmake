dtensor_add_test(test_ops_loss SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_loss.cc
                 DEPS dtensor::ops LABELS unit)
# The fused gradient rows of the pointwise losses against the two-pass path (every SIMD target).
dtensor_add_test(test_ops_loss_fused_grad SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_loss_fused_grad.cc
                 DEPS dtensor::ops LABELS unit)
dtensor_add_mpi_test(test_loss_dtensor_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_loss_dtensor_mpi.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
# Double backward (create_graph) of the losses against PyTorch 2.15, one process.
dtensor_add_test(test_loss_double_backward
                 SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_loss_double_backward.cc
                 DEPS dtensor::ops LABELS unit)
# Double backward (create_graph) on sharded inputs: loss parallel, the pointwise losses and the
# linear gradient ops of indexing, against one device.
dtensor_add_mpi_test(test_loss_double_backward_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_loss_double_backward_mpi.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
