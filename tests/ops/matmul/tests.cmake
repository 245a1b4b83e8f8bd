dtensor_add_test(test_ops_matmul SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_matmul.cc
                 DEPS dtensor::ops LABELS unit)
# DTensor forms (mpirun at 1, 2, 4 ranks).
dtensor_add_mpi_test(test_matmul_dtensor
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_matmul_dtensor.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
target_include_directories(test_matmul_dtensor
  PRIVATE ${PROJECT_SOURCE_DIR}/tests/core/propagation)
# einsum: the local form, errors and generated rows (unit); DTensor forms and gradients
# (mpirun at 1, 2, 4 ranks).
dtensor_add_test(test_einsum SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_einsum.cc
                 DEPS dtensor::ops LABELS unit)
dtensor_add_mpi_test(test_einsum_dtensor
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_einsum_dtensor.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
target_include_directories(test_einsum_dtensor
  PRIVATE ${PROJECT_SOURCE_DIR}/tests/core/propagation)
# The CPU GEMM library's kernel choice (unit), and a generic kernel forced by the user reported.
dtensor_add_test(test_blas_info SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_blas_info.cc
                 DEPS dtensor::ops LABELS unit)
# dtensor's own choice even where the environment exports OPENBLAS_CORETYPE (some do).
add_test(NAME blas_info_unset
         COMMAND $<TARGET_FILE:test_blas_info> "the GEMM kernel in use is not a generic fallback*")
set_tests_properties(blas_info_unset PROPERTIES LABELS unit TIMEOUT 60
  ENVIRONMENT_MODIFICATION "OPENBLAS_CORETYPE=unset:")
add_test(NAME blas_info_forced_generic COMMAND $<TARGET_FILE:test_blas_info> "[forced]")
set_tests_properties(blas_info_forced_generic PROPERTIES LABELS unit TIMEOUT 60
  SKIP_RETURN_CODE 77 ENVIRONMENT "OPENBLAS_CORETYPE=Prescott;OPENBLAS_NUM_THREADS=1")
# The CPU bf16 GEMM backends (oneDNN, widen + sgemm) against float64 and each other (unit).
dtensor_add_test(test_bf16_gemm SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_bf16_gemm.cc
                 DEPS dtensor::ops LABELS unit)
