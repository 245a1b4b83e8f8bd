# The Llama's rotary tables against transformers' LlamaRotaryEmbedding (float32, default and
# llama3 scaling) at positions up to 4095 (tests/data/rotary, make_reference.py).
dtensor_add_test(test_llama_rotary SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_llama_rotary.cc
                 DEPS dtensor::models nlohmann_json::nlohmann_json LABELS unit)
target_compile_definitions(test_llama_rotary PRIVATE
  DTENSOR_TINY_LLAMA_DIR="${PROJECT_SOURCE_DIR}/tests/data/tiny_llama"
  DTENSOR_ROTARY_REFERENCE="${PROJECT_SOURCE_DIR}/tests/data/rotary/llama_rope_reference.safetensors")
