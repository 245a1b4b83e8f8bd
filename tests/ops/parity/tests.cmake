# The PyTorch parity sweep (described in torch_parity.py's docstring): parity_dump runs every
# registered op's samples through dtensor and prints them as JSON lines for torch_parity.py.
add_executable(parity_dump ${CMAKE_CURRENT_LIST_DIR}/parity_dump.cc)
target_link_libraries(parity_dump PRIVATE dtensor::ops nlohmann_json::nlohmann_json)
set_target_properties(parity_dump PROPERTIES RUNTIME_OUTPUT_DIRECTORY
                                             ${CMAKE_CURRENT_BINARY_DIR}/parity)

# The committed references (torch_parity.py --write-references) checked against dtensor.
dtensor_add_test(test_torch_parity
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_torch_parity.cc
  DEPS dtensor::ops nlohmann_json::nlohmann_json
  LABELS unit)
target_compile_definitions(test_torch_parity PRIVATE
  DTENSOR_PARITY_REFERENCES="${CMAKE_CURRENT_LIST_DIR}/parity_references.json")
