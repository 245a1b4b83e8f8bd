# models::Llama with pipeline parallelism composed with FSDP, tensor and context parallelism
# (issue 45 items 2 and 5): pp 2 x {tp, dp, cp} 2 at 4 ranks, pp 2 x dp 2 x tp 2, pp 2 x dp 2 x
# cp 2 and pp 2 x cp 2 x tp 2 at 8 ranks (oversubscribed), each trained 3 steps against single
# device.
dtensor_add_mpi_test(test_llama_3d_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_llama_3d_mpi.cc
  DEPS dtensor::models nlohmann_json::nlohmann_json
  RANKS 4 8)
target_compile_definitions(test_llama_3d_mpi PRIVATE
  DTENSOR_TINY_LLAMA_DIR="${PROJECT_SOURCE_DIR}/tests/data/tiny_llama")
