# Sharding propagation engine and op dispatch (part of dtensor::core).
list(APPEND DTENSOR_CORE_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/op_schema.cc
  ${CMAKE_CURRENT_LIST_DIR}/registry.cc
  ${CMAKE_CURRENT_LIST_DIR}/sharding_propagation.cc
  ${CMAKE_CURRENT_LIST_DIR}/dispatch.cc
)
