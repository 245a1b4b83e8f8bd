dtensor_add_test(test_ops_embedding SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_embedding.cc
                 DEPS dtensor::ops LABELS unit)
dtensor_add_mpi_test(test_embedding_dtensor_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_embedding_dtensor_mpi.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
