list(APPEND DTENSOR_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/softmax.cc
  ${CMAKE_CURRENT_LIST_DIR}/softmax_cpu.cc
  ${CMAKE_CURRENT_LIST_DIR}/softmax_strategy.cc
  ${CMAKE_CURRENT_LIST_DIR}/softmax_backward.cc
  ${CMAKE_CURRENT_LIST_DIR}/softmax_dtensor.cc)
