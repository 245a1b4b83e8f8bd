dtensor_add_test(test_ops_attention SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_attention.cc
                 DEPS dtensor::ops LABELS unit)
# DTensor forms (mpirun at 1, 2, 4 ranks).
dtensor_add_mpi_test(test_attention_dtensor_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_attention_dtensor_mpi.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
# The causal alignment (CausalAlign::kLowerRight) against the math path, also through nn.
dtensor_add_test(test_attention_causal_align
                 SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_attention_causal_align.cc
                 DEPS dtensor::nn LABELS unit)
# Grouped-query attention with head-sharded q and k/v: no collective (issue 43 item 3).
dtensor_add_mpi_test(test_attention_gqa_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_attention_gqa_mpi.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
# A mask broadcast over the heads ([B, 1, L, S]): bit-equal to the expanded one, not
# materialised per head, no collective with the heads sharded (issue 43 R1 E).
dtensor_add_mpi_test(test_attention_head_mask_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_attention_head_mask_mpi.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
# Double backward (create_graph): a gradient penalty on sharded q, k, v against single device
# and PyTorch 2.15 (torch_attention_double_backward_references.py); a floating mask's own
# gradient, first and second order (torch_attention_mask_grad_references.py).
dtensor_add_mpi_test(test_attention_double_backward_mpi
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_attention_double_backward_mpi.cc
  DEPS dtensor::ops
  RANKS 1 2 4)
