# models::Llama (issue 43 item 2 and the KV cache) under mpirun at 1, 2 and 4 ranks, against the
# committed transformers reference files of tests/data/tiny_llama.
dtensor_add_mpi_test(test_llama_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_llama_mpi.cc
  DEPS dtensor::models nlohmann_json::nlohmann_json
  RANKS 1 2 4)
target_compile_definitions(test_llama_mpi PRIVATE
  DTENSOR_TINY_LLAMA_DIR="${PROJECT_SOURCE_DIR}/tests/data/tiny_llama")
