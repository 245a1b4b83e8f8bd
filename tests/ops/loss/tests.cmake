dtensor_add_test(test_ops_loss SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_loss.cc
                 DEPS dtensor::ops LABELS unit)
if(COMMAND dtensor_add_strat_mpi_test)
  dtensor_add_strat_mpi_test(test_loss_dtensor_mpi ${CMAKE_CURRENT_LIST_DIR}/test_loss_dtensor_mpi.cc)
endif()
