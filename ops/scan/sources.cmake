list(APPEND DTENSOR_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/scan_cpu.cc
  # DTensor side: sharding strategies, DTensor overloads and backward formulas.
  ${CMAKE_CURRENT_LIST_DIR}/scan_strategy.cc)
