dtensor_add_test(test_ops_softmax SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_softmax.cc
                 DEPS dtensor::ops LABELS unit)
# The vectorised kernels on every compiled SIMD target, and the backward kernels.
dtensor_add_test(test_ops_softmax_kernels SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_softmax_kernels.cc
                 DEPS dtensor::ops LABELS unit)
if(COMMAND dtensor_add_strat_mpi_test)
  dtensor_add_strat_mpi_test(test_softmax_dtensor_mpi
                             ${CMAKE_CURRENT_LIST_DIR}/test_softmax_dtensor_mpi.cc)
endif()
