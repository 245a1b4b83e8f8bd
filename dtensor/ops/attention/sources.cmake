list(APPEND DTENSOR_OPS_SOURCES
  # Local forward / backward passes, written with the library's tensor ops (CPU and CUDA).
  ${CMAKE_CURRENT_LIST_DIR}/attention_kernels.cc
  # DTensor side: registered ops, sharding rows, backward and samples.
  ${CMAKE_CURRENT_LIST_DIR}/attention_strategy.cc)
