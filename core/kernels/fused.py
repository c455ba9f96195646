"""The domain of ge's fused ops: kernels that compiler passes put in place of a pattern of ONNX ops.

They are not ONNX ops (like onnxruntime's com.microsoft ones), so a model cannot use them by
accident and `ge inspect` shows what was fused. The domain follows the default domain's opset
(passes set graph.opset[GE_DOMAIN] to it), so epilogues of fused nodes resolve their default-domain
kernels at the model's opset; every fused kernel is registered since version 1.
"""
GE_DOMAIN = "ge"
