list(APPEND DTENSOR_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/elementwise.cc
  ${CMAKE_CURRENT_LIST_DIR}/elementwise_cpu.cc
  ${CMAKE_CURRENT_LIST_DIR}/elementwise_unary_cpu.cc
  ${CMAKE_CURRENT_LIST_DIR}/elementwise_backward.cc)
# DTensor side: sharding strategies and DTensor overloads.
list(APPEND DTENSOR_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/elementwise_strategy.cc
  ${CMAKE_CURRENT_LIST_DIR}/elementwise_dtensor.cc
  # The ops-level registration of every family (ops/register_all.cc, ops_registry.cc).
  ${CMAKE_CURRENT_LIST_DIR}/../register_all.cc
  ${CMAKE_CURRENT_LIST_DIR}/../ops_registry.cc
)
