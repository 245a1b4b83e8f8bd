# CUDA side of the index family: kernels when CUDA is on, a throwing stub when off.
list(APPEND DTENSOR_OPS_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/index_cuda.cu)
list(APPEND DTENSOR_OPS_NO_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/index_no_cuda.cc)
