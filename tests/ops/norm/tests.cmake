dtensor_add_test(test_ops_norm SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_norm.cc
                 DEPS dtensor::ops LABELS unit)
if(COMMAND dtensor_add_strat_mpi_test)
  dtensor_add_strat_mpi_test(test_norm_dtensor_mpi ${CMAKE_CURRENT_LIST_DIR}/test_norm_dtensor_mpi.cc)
endif()
