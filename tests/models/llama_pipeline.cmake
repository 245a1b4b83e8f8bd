# A checkpoint of pipeline_llama's stages, whose other modules are released on each rank (issue
# 45): saved at pp 2 with every global FQN once, loaded on one device with the same loss.
dtensor_add_mpi_test(test_llama_pipeline_checkpoint_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_llama_pipeline_checkpoint_mpi.cc
  DEPS dtensor::models dtensor::checkpoint
  RANKS 2)
target_compile_definitions(test_llama_pipeline_checkpoint_mpi PRIVATE
  DTENSOR_TINY_LLAMA_DIR="${PROJECT_SOURCE_DIR}/tests/data/tiny_llama")
