# models::Llama under context parallelism (issue 45 item 3) at 4 ranks (cp 2 x tp 2, cp 4,
# dp 2 x cp 2), against single device and the committed transformers reference files.
dtensor_add_mpi_test(test_llama_cp_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_llama_cp_mpi.cc
  DEPS dtensor::models nlohmann_json::nlohmann_json
  RANKS 4)
target_compile_definitions(test_llama_cp_mpi PRIVATE
  DTENSOR_TINY_LLAMA_DIR="${PROJECT_SOURCE_DIR}/tests/data/tiny_llama")
