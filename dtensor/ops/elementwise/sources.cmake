list(APPEND DTENSOR_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/elementwise.cc
  ${CMAKE_CURRENT_LIST_DIR}/elementwise_math.cc
  ${CMAKE_CURRENT_LIST_DIR}/elementwise_cpu.cc
  ${CMAKE_CURRENT_LIST_DIR}/elementwise_unary_cpu.cc
  ${CMAKE_CURRENT_LIST_DIR}/elementwise_activation_grad.cc)
# DTensor side: sharding strategies and DTensor overloads.
list(APPEND DTENSOR_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/elementwise_strategy.cc
  ${CMAKE_CURRENT_LIST_DIR}/elementwise_backward.cc
  ${CMAKE_CURRENT_LIST_DIR}/elementwise_dtensor.cc
  ${CMAKE_CURRENT_LIST_DIR}/elementwise_math_dtensor.cc
)
