dtensor_add_test(test_ops_view SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_view.cc
                 DEPS dtensor::ops LABELS unit)

# DTensor suites of the view, softmax, norm, embedding and loss families (mpirun at 1, 2, 4).
# While the ops library does not build ops/ops_registry.cc yet, a test-only registry
# (registry_shim.cc, registering just those families) is compiled into each suite.
if(NOT DEFINED DTENSOR_STRAT_REGISTRY_SHIM)
  get_target_property(_dt_ops_srcs dtensor_ops SOURCES)
  if(_dt_ops_srcs MATCHES "ops_registry\\.cc")
    set(DTENSOR_STRAT_REGISTRY_SHIM "")
  else()
    set(DTENSOR_STRAT_REGISTRY_SHIM ${CMAKE_CURRENT_LIST_DIR}/registry_shim.cc)
  endif()
endif()
function(dtensor_add_strat_mpi_test name)
  if(NOT TARGET dtensor_mpi_main)
    return()
  endif()
  dtensor_add_mpi_test(${name} SOURCES ${ARGN} ${DTENSOR_STRAT_REGISTRY_SHIM} DEPS dtensor::ops
                       RANKS 1 2 4)
  if(DTENSOR_STRAT_REGISTRY_SHIM)
    set_target_properties(${name} PROPERTIES ENABLE_EXPORTS ON)
  endif()
endfunction()

dtensor_add_strat_mpi_test(test_view_dtensor_mpi ${CMAKE_CURRENT_LIST_DIR}/test_view_dtensor_mpi.cc)
