list(APPEND DTENSOR_OPS_SOURCES
  # Local forward / backward passes, written with the library's tensor ops (CPU and CUDA).
  ${CMAKE_CURRENT_LIST_DIR}/attention_kernels.cc
  # Registration (sharding rows, samples), backward formulas and the DTensor form.
  ${CMAKE_CURRENT_LIST_DIR}/attention_strategy.cc
  ${CMAKE_CURRENT_LIST_DIR}/attention_backward.cc
  ${CMAKE_CURRENT_LIST_DIR}/attention_dtensor.cc)
