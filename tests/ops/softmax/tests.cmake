dtensor_add_test(test_ops_softmax SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_softmax.cc
                 DEPS dtensor::ops LABELS unit)
