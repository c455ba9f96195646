"""The op families: one module per family, one class per ONNX op (registered by registry.register),
with the native plans and helpers only they use. Imported when one of their ops is looked up."""
