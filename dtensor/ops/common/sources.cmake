list(APPEND DTENSOR_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/type_promotion.cc
  ${CMAKE_CURRENT_LIST_DIR}/op_checks.cc
  ${CMAKE_CURRENT_LIST_DIR}/strategy_util.cc
  ${CMAKE_CURRENT_LIST_DIR}/grad_util.cc
  ${CMAKE_CURRENT_LIST_DIR}/elementwise_iter.cc
  ${CMAKE_CURRENT_LIST_DIR}/reduce_iter.cc
  ${CMAKE_CURRENT_LIST_DIR}/simd_dispatch.cc)
