# CUDA side of the loss family: kernels when CUDA is on, throwing stubs when off.
list(APPEND DTENSOR_OPS_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/loss_cuda.cu
                                     ${CMAKE_CURRENT_LIST_DIR}/pointwise_loss_cuda.cu)
list(APPEND DTENSOR_OPS_NO_CUDA_SOURCES ${CMAKE_CURRENT_LIST_DIR}/loss_no_cuda.cc)
