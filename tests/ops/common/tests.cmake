dtensor_add_test(test_ops_common
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_common.cc
  DEPS dtensor::ops
  LABELS unit)

dtensor_add_test(test_threads
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_threads.cc
  DEPS dtensor::ops
  LABELS unit)
