# CUDA side of the advanced_index family: kernels when CUDA is on, a throwing stub when off.
list(APPEND DTENSOR_OPS_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/advanced_index_cuda.cu)
list(APPEND DTENSOR_OPS_NO_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/advanced_index_no_cuda.cc)
