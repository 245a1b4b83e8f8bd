# models::generate (issue 43 item 4): the loop over a step function (one process).
dtensor_add_test(test_generate SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_generate.cc
                 DEPS dtensor::models LABELS unit)
