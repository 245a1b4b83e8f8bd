dtensor_add_test(test_ops_reduction
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_reduction.cc
  DEPS dtensor::ops
  LABELS unit)
