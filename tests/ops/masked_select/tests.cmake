# masked_select / nonzero (data-dependent output shapes): local, and DTensor at 1, 2, 4 ranks.
dtensor_add_test(test_ops_masked_select SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_masked_select.cc
                 DEPS dtensor::ops LABELS unit)
dtensor_add_mpi_test(test_masked_select_dtensor_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_masked_select_dtensor_mpi.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
