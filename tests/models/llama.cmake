# models::Llama (issue 43 item 2 and the KV cache) under mpirun at 1, 2 and 4 ranks, against the
# committed transformers reference files of tests/data/tiny_llama.
dtensor_add_mpi_test(test_llama_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_llama_mpi.cc
  DEPS dtensor::models nlohmann_json::nlohmann_json
  RANKS 1 2 4)
target_compile_definitions(test_llama_mpi PRIVATE
  DTENSOR_TINY_LLAMA_DIR="${PROJECT_SOURCE_DIR}/tests/data/tiny_llama")

# A tied Llama (tie_word_embeddings) and Hugging Face files (issue 43, R1 D): against
# transformers' tied save and logits in tests/data/tiny_llama_tied.
dtensor_add_mpi_test(test_llama_tied_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_llama_tied_mpi.cc
  DEPS dtensor::models nlohmann_json::nlohmann_json
  RANKS 1 2 4)
target_compile_definitions(test_llama_tied_mpi PRIVATE
  DTENSOR_TINY_LLAMA_DIR="${PROJECT_SOURCE_DIR}/tests/data/tiny_llama"
  DTENSOR_TINY_LLAMA_TIED_DIR="${PROJECT_SOURCE_DIR}/tests/data/tiny_llama_tied")
# transformers itself loads the tied save that test_llama_tied_mpi.np2 leaves (its logits
# against the reference), where a Python with torch and transformers is named at configure
# time: -DDTENSOR_HF_PYTHON=/path/to/venv/bin/python (none by default: not a dependency).
set(DTENSOR_HF_PYTHON "" CACHE FILEPATH
    "A Python with torch and transformers, for the test that loads dtensor's tied Llama save")
if(DTENSOR_HF_PYTHON)
  set_tests_properties(test_llama_tied_mpi.np2 PROPERTIES FIXTURES_SETUP llama_tied_save)
  add_test(NAME hf_tied_save_transformers
           COMMAND ${DTENSOR_HF_PYTHON}
                   ${PROJECT_SOURCE_DIR}/tests/data/tiny_llama_tied/make_reference.py
                   --check llama_tied_save_np2)
  set_tests_properties(hf_tied_save_transformers PROPERTIES LABELS mpi
                       FIXTURES_REQUIRED llama_tied_save ENVIRONMENT "OMP_NUM_THREADS=1")
endif()
