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
  # The hot paths cross many small functions (docs/PERFORMANCE.md, dispatch): calls within a
  # layer go straight to the function (no interposition of our own symbols, which nothing does),
  # so that the compiler may inline them, and calls to other libraries through the GOT, not a
  # PLT stub.
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-fno-semantic-interposition -fno-plt>)
  if(NOT DTENSOR_SANITIZE)
    target_link_options(${target} PRIVATE -Wl,--no-undefined)
  endif()
  set_property(GLOBAL APPEND PROPERTY DTENSOR_LAYER_TARGETS ${target})
endfunction()

# dtensor_add_test(<name> SOURCES ... DEPS ... [LABELS unit] [SKIP_MARKER])
#   A single-process Catch2 test; each TEST_CASE becomes one ctest entry.
#   SKIP_MARKER: an entry whose output holds "[skipped]" is reported as skipped, not passed (a
#   case that checks nothing where what it needs, e.g. a run-time loaded library, is missing).
function(dtensor_add_test name)
  cmake_parse_arguments(A "SKIP_MARKER" "" "SOURCES;DEPS;LABELS" ${ARGN})
  if(NOT A_LABELS)
    set(A_LABELS unit)
  endif()
  set(skip)
  if(A_SKIP_MARKER)
    set(skip SKIP_REGULAR_EXPRESSION "\\[skipped\\]")
  endif()
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE dtensor_catch_main ${A_DEPS})
  # --warn NoTests: an entry whose filter matches no test case fails instead of passing empty
  # (a ";" in a test name once split entries that then ran nothing).
  catch_discover_tests(${name} TEST_PREFIX "${name}: " EXTRA_ARGS --warn NoTests
                       PROPERTIES LABELS "${A_LABELS}" TIMEOUT 300
                       SKIP_RETURN_CODE 77 ${skip})
endfunction()

# dtensor_add_mpi_test(<name> SOURCES ... DEPS ... [RANKS 1 2 4 8] [ARGS ...] [TIMEOUT s]
#                      [COLLECTIVE_TIMEOUT s] [SKIP_MARKER] [PROGRESS_ENTRY])
#   A Catch2 suite launched by mpirun at each rank count; one ctest entry per count, named
#   <name>.np<N>. The main (tests/mpi_main.cc) merges results: a failure on any rank fails the
#   entry, only rank 0 prints the report.
#   COLLECTIVE_TIMEOUT (default 120): DTENSOR_COLLECTIVE_TIMEOUT, the deadline after which a
#   collective or transfer left waiting ends the job (a hang fails well before TIMEOUT).
#   SKIP_MARKER: an entry whose output holds "[skipped]" is reported as skipped, not passed: the
#   line rank 0 prints (tests/common/async_test_util.h) where the communication thread, which
#   the cases need, cannot run.
#   PROGRESS_ENTRY: the cases tagged [progress] (they need the progress thread) run in entries of
#   their own, <name>.progress.np<N>, with SKIP_MARKER; <name>.np<N> runs the others.
function(dtensor_add_mpi_test name)
  cmake_parse_arguments(A "SKIP_MARKER;PROGRESS_ENTRY" "TIMEOUT;COLLECTIVE_TIMEOUT"
                        "SOURCES;DEPS;RANKS;ARGS" ${ARGN})
  if(NOT A_RANKS)
    set(A_RANKS 1 2 4 8)
  endif()
  if(NOT A_TIMEOUT)
    set(A_TIMEOUT 600)
  endif()
  if(NOT A_COLLECTIVE_TIMEOUT)
    set(A_COLLECTIVE_TIMEOUT 120)
  endif()
  if(A_PROGRESS_ENTRY AND A_ARGS)
    message(FATAL_ERROR "dtensor_add_mpi_test(${name}): PROGRESS_ENTRY chooses the cases; no ARGS")
  endif()
  set(env "DTENSOR_COLLECTIVE_TIMEOUT=${A_COLLECTIVE_TIMEOUT};OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1")
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE dtensor_mpi_main ${A_DEPS})
  foreach(np ${A_RANKS})
    if(A_PROGRESS_ENTRY)
      _dtensor_add_mpi_entry(${name}.np${np} ${name} ${np} ${A_TIMEOUT} "${env}" "${A_SKIP_MARKER}"
                             "~[progress]")
      _dtensor_add_mpi_entry(${name}.progress.np${np} ${name} ${np} ${A_TIMEOUT} "${env}" TRUE
                             "[progress]")
    else()
      _dtensor_add_mpi_entry(${name}.np${np} ${name} ${np} ${A_TIMEOUT} "${env}" "${A_SKIP_MARKER}"
                             ${A_ARGS})
    endif()
  endforeach()
endfunction()

# One mpirun entry of dtensor_add_mpi_test: `target` at `np` ranks with the arguments after the
# named ones.
function(_dtensor_add_mpi_entry entry target np timeout env skip_marker)
  add_test(NAME ${entry} COMMAND ${DTENSOR_MPIEXEC} -np ${np} $<TARGET_FILE:${target}> ${ARGN})
  set_tests_properties(${entry} PROPERTIES LABELS mpi TIMEOUT ${timeout} PROCESSORS 2
                       SKIP_RETURN_CODE 77 ENVIRONMENT "${env}")
  if(skip_marker)
    set_tests_properties(${entry} PROPERTIES SKIP_REGULAR_EXPRESSION "\\[skipped\\]")
  endif()
endfunction()
