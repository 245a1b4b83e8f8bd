list(APPEND DTENSOR_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/scan_cpu.cc
  # DTensor side: sharding strategies, DTensor overloads and backward formulas.
  ${CMAKE_CURRENT_LIST_DIR}/scan_strategy.cc)
# Bit-identical with the CUDA row code (scan_cuda.cu, built with --fmad=false): no fma
# contraction here either, whatever -march a user builds with.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/scan_cpu.cc PROPERTIES
                            COMPILE_OPTIONS "-ffp-contract=off")
