dtensor_add_test(test_ops_elementwise
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_elementwise.cc
  DEPS dtensor::ops
  LABELS unit)
# The vectorised transcendental / activation kernels on every compiled SIMD target, and the
# activation backward kernels.
dtensor_add_test(test_ops_activation_kernels
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_activation_kernels.cc
  DEPS dtensor::ops
  LABELS unit)
# DTensor forms (mpirun at 1, 2, 4 ranks).
dtensor_add_mpi_test(test_elementwise_dtensor
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_elementwise_dtensor.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
# The pointwise math of elementwise_math.cc (integer semantics, clamp, nan_to_num, predicates,
# logical and bitwise ops, lerp, addcmul / addcdiv).
dtensor_add_test(test_ops_elementwise_math
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_elementwise_math.cc
  DEPS dtensor::ops
  LABELS unit)
# The activations and pointwise ops of issue 44 against PyTorch 2.15's values and gradients
# (torch_activation_refs.h, printed by torch_activation_refs.py), mpirun at 1, 2, 4 ranks.
dtensor_add_mpi_test(test_activations_torch_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_activations_torch_mpi.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
