list(APPEND DTENSOR_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/index_cpu.cc
  ${CMAKE_CURRENT_LIST_DIR}/index_ops.cc)
# DTensor side: sharding strategies and DTensor overloads.
list(APPEND DTENSOR_OPS_SOURCES ${CMAKE_CURRENT_LIST_DIR}/index_strategy.cc)
# Advanced indexing: index / index_put with a list of index tensors.
list(APPEND DTENSOR_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/advanced_index_cpu.cc
  ${CMAKE_CURRENT_LIST_DIR}/advanced_index_strategy.cc)
# masked_select / nonzero: data-dependent output shapes (OpInfo::data_dependent_shape).
list(APPEND DTENSOR_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/masked_select_cpu.cc
  ${CMAKE_CURRENT_LIST_DIR}/masked_select_strategy.cc)
