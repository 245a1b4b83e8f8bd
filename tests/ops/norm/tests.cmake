dtensor_add_test(test_ops_norm SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_norm.cc
                 DEPS dtensor::ops LABELS unit)
