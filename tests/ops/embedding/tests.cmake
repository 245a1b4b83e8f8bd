dtensor_add_test(test_ops_embedding SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_embedding.cc
                 DEPS dtensor::ops LABELS unit)
if(COMMAND dtensor_add_strat_mpi_test)
  dtensor_add_strat_mpi_test(test_embedding_dtensor_mpi
                             ${CMAKE_CURRENT_LIST_DIR}/test_embedding_dtensor_mpi.cc)
endif()
