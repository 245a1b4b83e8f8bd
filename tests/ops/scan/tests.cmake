dtensor_add_test(test_ops_scan SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_scan.cc
                 DEPS dtensor::ops LABELS unit)
# cumsum / cumprod along a sharded dim (the block pipeline, bit-exact), at 1, 2, 4 ranks.
dtensor_add_mpi_test(test_scan_dtensor_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_scan_dtensor_mpi.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
