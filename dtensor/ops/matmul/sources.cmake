list(APPEND DTENSOR_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/matmul.cc
  ${CMAKE_CURRENT_LIST_DIR}/matmul_cpu.cc
  ${CMAKE_CURRENT_LIST_DIR}/openblas.cc
  ${CMAKE_CURRENT_LIST_DIR}/onednn.cc
  ${CMAKE_CURRENT_LIST_DIR}/einsum.cc
)
# Registration (sharding strategies) and the DTensor forms.
list(APPEND DTENSOR_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/matmul_strategy.cc
  ${CMAKE_CURRENT_LIST_DIR}/matmul_backward.cc
  ${CMAKE_CURRENT_LIST_DIR}/matmul_dtensor.cc
  ${CMAKE_CURRENT_LIST_DIR}/einsum_strategy.cc
  ${CMAKE_CURRENT_LIST_DIR}/einsum_backward.cc
  ${CMAKE_CURRENT_LIST_DIR}/einsum_dtensor.cc
)
