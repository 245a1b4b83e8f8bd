# Dry runs (issue 46): the fake backend's report of a Llama training step agrees with the real
# 4-rank run (dp 2 x tp 2, sequence parallel), rank by rank.
add_executable(test_dry_run_agreement ${CMAKE_CURRENT_LIST_DIR}/test_dry_run_agreement.cc)
target_link_libraries(test_dry_run_agreement PRIVATE dtensor::models)
add_test(NAME test_dry_run_agreement.np4
         COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_dry_run_agreement.sh
                 $<TARGET_FILE:test_dry_run_agreement>
                 ${CMAKE_CURRENT_BINARY_DIR}/dry_run_agreement 4 ${DTENSOR_MPIEXEC})
set_tests_properties(test_dry_run_agreement.np4 PROPERTIES LABELS mpi TIMEOUT 300 PROCESSORS 2
  ENVIRONMENT "DTENSOR_COLLECTIVE_TIMEOUT=120;OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1")
