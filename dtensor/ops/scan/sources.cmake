list(APPEND DTENSOR_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/scan.cc
  ${CMAKE_CURRENT_LIST_DIR}/scan_cpu.cc
  # Registration (sharding strategies), backward formulas and the DTensor forms.
  ${CMAKE_CURRENT_LIST_DIR}/scan_strategy.cc
  ${CMAKE_CURRENT_LIST_DIR}/scan_backward.cc
  ${CMAKE_CURRENT_LIST_DIR}/scan_dtensor.cc)
# Bit-identical with the CUDA row code (scan_cuda.cu, built with --fmad=false): no fma
# contraction here either, whatever -march a user builds with (scan.cc too, as when it was part
# of scan_cpu.cc).
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/scan_cpu.cc ${CMAKE_CURRENT_LIST_DIR}/scan.cc
                            PROPERTIES COMPILE_OPTIONS "-ffp-contract=off")
