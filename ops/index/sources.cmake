list(APPEND DTENSOR_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/index_cpu.cc
  ${CMAKE_CURRENT_LIST_DIR}/index_ops.cc)
# DTensor side: sharding strategies and DTensor overloads.
list(APPEND DTENSOR_OPS_SOURCES ${CMAKE_CURRENT_LIST_DIR}/index_strategy.cc)
