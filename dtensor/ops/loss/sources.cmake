list(APPEND DTENSOR_OPS_SOURCES
  ${CMAKE_CURRENT_LIST_DIR}/loss.cc
  ${CMAKE_CURRENT_LIST_DIR}/loss_cpu.cc
  ${CMAKE_CURRENT_LIST_DIR}/loss_strategy.cc
  ${CMAKE_CURRENT_LIST_DIR}/loss_backward.cc
  ${CMAKE_CURRENT_LIST_DIR}/loss_dtensor.cc
  ${CMAKE_CURRENT_LIST_DIR}/pointwise_loss.cc
  ${CMAKE_CURRENT_LIST_DIR}/pointwise_loss_cpu.cc
  ${CMAKE_CURRENT_LIST_DIR}/pointwise_loss_strategy.cc
  ${CMAKE_CURRENT_LIST_DIR}/pointwise_loss_backward.cc
  ${CMAKE_CURRENT_LIST_DIR}/pointwise_loss_dtensor.cc)
