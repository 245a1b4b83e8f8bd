dtensor_add_test(test_ops_embedding SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_embedding.cc
                 DEPS dtensor::ops LABELS unit)
