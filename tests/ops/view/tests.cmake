dtensor_add_test(test_ops_view SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_view.cc
                 DEPS dtensor::ops LABELS unit)
dtensor_add_mpi_test(test_view_dtensor_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_view_dtensor_mpi.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
dtensor_add_test(test_ops_copy SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_copy_ops.cc
                 DEPS dtensor::ops LABELS unit)
