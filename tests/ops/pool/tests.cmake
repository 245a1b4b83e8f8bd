dtensor_add_test(test_ops_pool SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_pool.cc
                 DEPS dtensor::ops LABELS unit)
# Placements, no communication for batch / channel shards, gradients, at 1, 2, 4 ranks.
dtensor_add_mpi_test(test_pool_dtensor_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_pool_dtensor_mpi.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
# Height-sharded max / avg pools exchange halos instead of gathering, at 1, 2, 4 ranks.
dtensor_add_mpi_test(test_pool_halo_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_pool_halo_mpi.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
# The direct max pool / linear interpolate kernels against the tap kernels, bit for bit.
dtensor_add_test(test_ops_pool_direct SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_pool_direct.cc
                 DEPS dtensor::ops LABELS unit)
