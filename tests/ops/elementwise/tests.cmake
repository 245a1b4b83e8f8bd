dtensor_add_test(test_ops_elementwise
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_elementwise.cc
  DEPS dtensor::ops
  LABELS unit)
