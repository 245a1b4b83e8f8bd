# CUDA side of the norm family: kernels when CUDA is on, a throwing stub when off.
list(APPEND DTENSOR_OPS_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/norm_cuda.cu)
list(APPEND DTENSOR_OPS_NO_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/norm_no_cuda.cc)
