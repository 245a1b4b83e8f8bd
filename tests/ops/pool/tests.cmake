dtensor_add_test(test_ops_pool SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_pool.cc
                 DEPS dtensor::ops LABELS unit)
