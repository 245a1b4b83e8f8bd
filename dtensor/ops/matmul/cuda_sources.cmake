# CUDA side of the matmul family: the cuBLAS driver (host code, compiled by the C++ compiler)
# when CUDA is on, a stub when off; the library is linked by ops/CMakeLists.txt.
list(APPEND DTENSOR_OPS_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/matmul_cuda.cc)
list(APPEND DTENSOR_OPS_NO_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/matmul_no_cuda.cc)
list(APPEND DTENSOR_OPS_CUDA_LIBS CUDA::cublas)
