# A dry run on meta tensors (issue 46 item 2): a Llama-70B-shaped training step at 1,024 ranks
# in one process (fake backend), in seconds and without its memory.
add_executable(test_dry_run_meta ${CMAKE_CURRENT_LIST_DIR}/test_dry_run_meta.cc)
target_link_libraries(test_dry_run_meta PRIVATE dtensor_catch_main dtensor::models)
add_test(NAME test_dry_run_meta.world1024 COMMAND test_dry_run_meta)
set_tests_properties(test_dry_run_meta.world1024 PROPERTIES LABELS unit TIMEOUT 60 ENVIRONMENT
  "DTENSOR_BACKEND=fake;DTENSOR_FAKE_WORLD_SIZE=1024;DTENSOR_FAKE_RANK=37")
