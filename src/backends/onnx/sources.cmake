# The ONNX executor's sources (everything but the backend adapter), for the
# library in src/CMakeLists.txt and the fuzz target in fuzz/CMakeLists.txt.
set(INFERD_ONNX_EXEC_SOURCES)
foreach(f plan.cc model_loader.cc tensor_proto.cc fusion.cc ops/registry.cc ops/elementwise.cc ops/shape_ops.cc
    ops/nn.cc ops/reduce.cc ops/sequence.cc ops/control.cc ops/gradient.cc ops/loss.cc ops/resize.cc ops/rnn.cc
    ops/mkldnn.cc ops/dnnl_gemm.cc ops/dnnl_conv.cc ops/int8_ops.cc
    ops/quantized_ops.cc)
  list(APPEND INFERD_ONNX_EXEC_SOURCES ${CMAKE_CURRENT_LIST_DIR}/${f})
endforeach()
