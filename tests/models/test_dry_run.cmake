# Dry runs (issue 46): the fake backend's report of a Llama training step agrees with the real
# run, rank by rank: dp 2 x tp 2 at 4 ranks, and the 3-D layouts pp 2 x dp 2 x tp 2 (pipeline
# transfers on pp), dp 2 x cp 2 x tp 2 (ring attention on cp) and pp 2 x cp 2 x tp 2 (both) at 8
# ranks; all sequence parallel (test_dry_run_agreement.cc). Every entry runs its communication
# inline (DTENSOR_ASYNC=0). The cp and pp entries: on the communication thread, the moment a
# finished transfer's buffers are freed varies from run to run, and with it the step's allocator
# peak by a few blocks (pp 2 x dp 2 x tp 2 with asynchronous sends: 405,376 or 426,112 B from run
# to run, since FSDP syncs once per step). dp 2 x tp 2: since a TP collective no longer drains
# FSDP's tasks on other communicators (0e7a158), the real asynchronous step peaks at the inline
# figure (540,736 B) while the fake backend's asynchronous dry run still peaks at 577,856 B: the
# dry run does not model that overlap yet (open, issue 46's dry runs).
add_executable(test_dry_run_agreement ${CMAKE_CURRENT_LIST_DIR}/test_dry_run_agreement.cc)
target_link_libraries(test_dry_run_agreement PRIVATE dtensor::models)
foreach(entry "np4;4;dp2_tp2;0" "pp2_dp2_tp2.np8;8;pp2_dp2_tp2;0" "dp2_cp2_tp2.np8;8;dp2_cp2_tp2;0"
      "pp2_cp2_tp2.np8;8;pp2_cp2_tp2;0")
  list(GET entry 0 name)
  list(GET entry 1 np)
  list(GET entry 2 layout)
  list(GET entry 3 async)
  add_test(NAME test_dry_run_agreement.${name}
           COMMAND sh ${CMAKE_CURRENT_LIST_DIR}/test_dry_run_agreement.sh
                   $<TARGET_FILE:test_dry_run_agreement>
                   ${CMAKE_CURRENT_BINARY_DIR}/dry_run_agreement_${layout} ${np} ${layout}
                   ${DTENSOR_MPIEXEC})
  set_tests_properties(test_dry_run_agreement.${name} PROPERTIES LABELS mpi TIMEOUT 300
    PROCESSORS 2
    ENVIRONMENT
    "DTENSOR_COLLECTIVE_TIMEOUT=120;OPENBLAS_NUM_THREADS=1;OMP_NUM_THREADS=1;DTENSOR_ASYNC=${async}")
endforeach()
