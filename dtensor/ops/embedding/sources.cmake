list(APPEND DTENSOR_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/embedding.cc
  ${CMAKE_CURRENT_LIST_DIR}/embedding_cpu.cc
  ${CMAKE_CURRENT_LIST_DIR}/embedding_strategy.cc
  ${CMAKE_CURRENT_LIST_DIR}/embedding_backward.cc
  ${CMAKE_CURRENT_LIST_DIR}/embedding_dtensor.cc)
