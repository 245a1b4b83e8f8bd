list(APPEND DTENSOR_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/norm.cc
  ${CMAKE_CURRENT_LIST_DIR}/norm_cpu.cc
  ${CMAKE_CURRENT_LIST_DIR}/norm_strategy.cc
  ${CMAKE_CURRENT_LIST_DIR}/norm_backward.cc
  ${CMAKE_CURRENT_LIST_DIR}/norm_dtensor.cc)
