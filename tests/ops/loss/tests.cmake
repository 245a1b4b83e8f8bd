dtensor_add_test(test_ops_loss SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_loss.cc
                 DEPS dtensor::ops LABELS unit)
