# masked_select / nonzero: data-dependent output shapes (OpInfo::data_dependent_shape).
list(APPEND DTENSOR_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/masked_select.cc
  ${CMAKE_CURRENT_LIST_DIR}/masked_select_cpu.cc
  ${CMAKE_CURRENT_LIST_DIR}/masked_select_strategy.cc
  ${CMAKE_CURRENT_LIST_DIR}/masked_select_backward.cc
  ${CMAKE_CURRENT_LIST_DIR}/masked_select_dtensor.cc)
