list(APPEND DTENSOR_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/view.cc
  ${CMAKE_CURRENT_LIST_DIR}/copy_ops.cc
  ${CMAKE_CURRENT_LIST_DIR}/copy_ops_strategy.cc
  ${CMAKE_CURRENT_LIST_DIR}/copy_ops_backward.cc
  ${CMAKE_CURRENT_LIST_DIR}/copy_ops_dtensor.cc
  ${CMAKE_CURRENT_LIST_DIR}/view_strategy.cc
  ${CMAKE_CURRENT_LIST_DIR}/view_backward.cc
  ${CMAKE_CURRENT_LIST_DIR}/view_dtensor.cc)
