# CUDA side of the scan family: kernels when CUDA is on, a throwing stub when off.
list(APPEND DTENSOR_OPS_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/scan_cuda.cu)
list(APPEND DTENSOR_OPS_NO_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/scan_no_cuda.cc)
# The CUDA row code is the CPU's (scan_kernels.h) and must give the same bits: nvcc would contract
# cumprod_backward's acc * next + g into one fma (rounded once) where the CPU rounds twice.
set_source_files_properties(${CMAKE_CURRENT_LIST_DIR}/scan_cuda.cu PROPERTIES
                            COMPILE_OPTIONS "--fmad=false")
