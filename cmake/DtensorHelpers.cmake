# Helpers shared by every folder's CMakeLists.txt.
#
# dtensor_add_library(<layer> SOURCES ... [CUDA_SOURCES ...] [NO_CUDA_SOURCES ...] DEPS ...)
#   One shared library per layer folder, target dtensor_<layer>, alias dtensor::<layer>.
#   Linked with --no-undefined, so a layer that calls into a layer it does not list in DEPS
#   (a layering cycle included) fails to link. CUDA_SOURCES are built when CUDA is on,
#   NO_CUDA_SOURCES (the stubs) when it is off.

include(GNUInstallDirs)  # CMAKE_INSTALL_INCLUDEDIR for the exported include path

function(dtensor_add_library layer)
  cmake_parse_arguments(A "" "" "SOURCES;CUDA_SOURCES;NO_CUDA_SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  set(target dtensor_${layer})
  set(srcs ${A_SOURCES})
  if(DTENSOR_HAVE_CUDA)
    list(APPEND srcs ${A_CUDA_SOURCES})
  else()
    list(APPEND srcs ${A_NO_CUDA_SOURCES})
  endif()
  add_library(${target} SHARED ${srcs})
  add_library(dtensor::${layer} ALIAS ${target})
  set_target_properties(${target} PROPERTIES EXPORT_NAME ${layer} OUTPUT_NAME dtensor_${layer}
                                             CUDA_SEPARABLE_COMPILATION OFF
                                             INSTALL_RPATH "$ORIGIN")  # finds its sibling layers
  target_include_directories(${target} PUBLIC
    $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
    $<BUILD_INTERFACE:${PROJECT_BINARY_DIR}/generated>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
  # The language level travels with the target: a consumer's compiler (C++17 by default for
  # g++ 12) would otherwise reject the headers' defaulted operator==, requires and concepts.
  target_compile_features(${target} PUBLIC cxx_std_20)
  target_link_libraries(${target} PUBLIC ${A_DEPS} PRIVATE ${A_PRIVATE_DEPS})
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wno-unused-parameter>)
  if(NOT DTENSOR_SANITIZE)
    target_link_options(${target} PRIVATE -Wl,--no-undefined)
  endif()
  set_property(GLOBAL APPEND PROPERTY DTENSOR_LAYER_TARGETS ${target})
endfunction()

# dtensor_add_test(<name> SOURCES ... DEPS ... [LABELS unit])
#   A single-process Catch2 test; each TEST_CASE becomes one ctest entry.
function(dtensor_add_test name)
  cmake_parse_arguments(A "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  if(NOT A_LABELS)
    set(A_LABELS unit)
  endif()
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE dtensor_catch_main ${A_DEPS})
  # --warn NoTests: an entry whose filter matches no test case fails instead of passing empty
  # (a ";" in a test name once split entries that then ran nothing).
  catch_discover_tests(${name} TEST_PREFIX "${name}: " EXTRA_ARGS --warn NoTests
                       PROPERTIES LABELS "${A_LABELS}" TIMEOUT 300
                       SKIP_RETURN_CODE 77)
endfunction()

# dtensor_add_mpi_test(<name> SOURCES ... DEPS ... RANKS 1 2 4 8)
#   A Catch2 suite launched by mpirun at each rank count; one ctest entry per count, named
#   <name>.np<N>. The main (tests/mpi_main.cc) merges results: a failure on any rank fails the
#   entry, only rank 0 prints the report.
function(dtensor_add_mpi_test name)
  cmake_parse_arguments(A "" "TIMEOUT" "SOURCES;DEPS;RANKS;ARGS" ${ARGN})
  if(NOT A_RANKS)
    set(A_RANKS 1 2 4 8)
  endif()
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 600)
  endif()
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE dtensor_mpi_main ${A_DEPS})
  foreach(np ${A_RANKS})
    add_test(NAME ${name}.np${np}
             COMMAND ${DTENSOR_MPIEXEC} -np ${np} $<TARGET_FILE:${name}> ${A_ARGS})
    set_tests_properties(${name}.np${np} PROPERTIES LABELS mpi TIMEOUT ${A_TIMEOUT}
                         PROCESSORS 2 SKIP_RETURN_CODE 77
                         ENVIRONMENT "DTENSOR_COLLECTIVE_TIMEOUT=120;OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1")
  endforeach()
endfunction()

