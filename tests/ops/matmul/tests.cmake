dtensor_add_test(test_ops_matmul SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_matmul.cc
                 DEPS dtensor::ops LABELS unit)
