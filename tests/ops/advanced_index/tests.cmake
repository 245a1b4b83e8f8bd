# Advanced indexing: index / index_put on local tensors, and on DTensors (mpirun at 1, 2, 4 ranks).
dtensor_add_test(test_ops_advanced_index
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_advanced_index.cc
  DEPS dtensor::ops LABELS unit)
dtensor_add_mpi_test(test_advanced_index_dtensor_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_advanced_index_dtensor_mpi.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
