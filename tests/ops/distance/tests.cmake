dtensor_add_test(test_ops_distance SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_distance.cc
                 DEPS dtensor::ops LABELS unit)
# cdist, cosine_similarity and pairwise_distance on sharded inputs (1, 2, 4 ranks).
dtensor_add_mpi_test(test_distance_dtensor_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_distance_dtensor_mpi.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
