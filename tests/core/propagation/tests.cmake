# Sharding-propagation engine tests (test-only ops with naive kernels, no ops library needed).
set(_prop_dir ${CMAKE_CURRENT_LIST_DIR})
add_library(dtensor_propagation_test_ops STATIC ${_prop_dir}/test_ops.cc)
target_link_libraries(dtensor_propagation_test_ops PUBLIC dtensor::core)
target_include_directories(dtensor_propagation_test_ops PUBLIC ${_prop_dir})

dtensor_add_test(test_sharding_propagation
  SOURCES ${_prop_dir}/test_sharding_propagation.cc
  DEPS dtensor_propagation_test_ops
  LABELS unit)

dtensor_add_mpi_test(test_dispatch_mpi
  SOURCES ${_prop_dir}/test_dispatch_mpi.cc
  DEPS dtensor_propagation_test_ops
  RANKS 1 2 4)
