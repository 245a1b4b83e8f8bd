dtensor_add_test(test_ops_view SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_view.cc
                 DEPS dtensor::ops LABELS unit)
