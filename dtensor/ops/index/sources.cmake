# gather / scatter / index_select family: public Tensor functions, kernels, registration.
list(APPEND DTENSOR_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/index.cc
  ${CMAKE_CURRENT_LIST_DIR}/index_cpu.cc
  ${CMAKE_CURRENT_LIST_DIR}/index_ops.cc)
# Registration (sharding strategies), backward formulas and the DTensor forms.
list(APPEND DTENSOR_OPS_SOURCES ${CMAKE_CURRENT_LIST_DIR}/index_strategy.cc
  ${CMAKE_CURRENT_LIST_DIR}/index_backward.cc
  ${CMAKE_CURRENT_LIST_DIR}/index_dtensor.cc)
