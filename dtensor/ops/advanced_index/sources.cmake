# Advanced indexing: index / index_put with a list of index tensors.
list(APPEND DTENSOR_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/advanced_index.cc
  ${CMAKE_CURRENT_LIST_DIR}/advanced_index_cpu.cc
  ${CMAKE_CURRENT_LIST_DIR}/advanced_index_strategy.cc
  ${CMAKE_CURRENT_LIST_DIR}/advanced_index_backward.cc
  ${CMAKE_CURRENT_LIST_DIR}/advanced_index_dtensor.cc)
