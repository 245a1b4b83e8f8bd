dtensor_add_test(test_ops_norm SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_norm.cc
                 DEPS dtensor::ops LABELS unit)
# The vectorised kernels on every compiled SIMD target, statistics and backward kernels.
dtensor_add_test(test_ops_norm_kernels SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_norm_kernels.cc
                 DEPS dtensor::ops LABELS unit)
if(COMMAND dtensor_add_strat_mpi_test)
  dtensor_add_strat_mpi_test(test_norm_dtensor_mpi ${CMAKE_CURRENT_LIST_DIR}/test_norm_dtensor_mpi.cc)
endif()
