list(APPEND DTENSOR_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/reduction.cc
  ${CMAKE_CURRENT_LIST_DIR}/reduction_cpu.cc
  ${CMAKE_CURRENT_LIST_DIR}/reduction_math.cc)
# DTensor side: sharding strategies and DTensor overloads.
list(APPEND DTENSOR_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/reduction_strategy.cc
  ${CMAKE_CURRENT_LIST_DIR}/reduction_backward.cc
  ${CMAKE_CURRENT_LIST_DIR}/reduction_dtensor.cc
)
