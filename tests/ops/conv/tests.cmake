dtensor_add_test(test_ops_conv SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_conv.cc
                 DEPS dtensor::ops LABELS unit)
dtensor_add_mpi_test(test_conv_dtensor_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_conv_dtensor_mpi.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
# The float32 backends (oneDNN, im2col) against float64, and DTENSOR_CONV's selection; the
# oneDNN cases print "[skipped]" (reported as skipped) where libdnnl does not load.
dtensor_add_test(test_ops_conv_onednn SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_conv_onednn.cc
                 DEPS dtensor::ops LABELS unit SKIP_MARKER)
# create_graph through convolutions, pools, upsampling and pad on sharded inputs (batch, channels,
# height halos), and a gradient penalty against PyTorch 2.15's values.
dtensor_add_mpi_test(test_conv_double_backward_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_conv_double_backward_mpi.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
