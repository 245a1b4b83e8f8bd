dtensor_add_test(test_ops_scan SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_scan.cc
                 DEPS dtensor::ops LABELS unit)
