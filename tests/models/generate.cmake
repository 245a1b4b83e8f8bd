# models::generate (issue 43 item 4): the loop over a step function (one process).
dtensor_add_test(test_generate SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_generate.cc
                 DEPS dtensor::models LABELS unit)
# generate on the committed tiny Llama against transformers' greedy tokens, tensor parallel at
# 1, 2 and 4 ranks.
dtensor_add_mpi_test(test_generate_llama_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_generate_llama_mpi.cc
  DEPS dtensor::models nlohmann_json::nlohmann_json
  RANKS 1 2 4)
target_compile_definitions(test_generate_llama_mpi PRIVATE
  DTENSOR_TINY_LLAMA_DIR="${PROJECT_SOURCE_DIR}/tests/data/tiny_llama")
