"""One exception family. Every message names what it is about (file, node, op, input)."""


class GeError(Exception):
    """Base of every error ge reports to a user."""


class GraphError(GeError):
    """The model graph is malformed or uses something ge does not support."""


class UnsupportedOpError(GraphError):
    """An op type (or attribute value) has no kernel."""


class ValueDependentError(GraphError):
    """An output's shape depends on a computed input's values: static compilation cannot plan the
    node, the dynamic (hybrid) path runs it. Any other refusal of a kernel means it cannot run."""


class ShapeError(GeError):
    """A shape or dtype does not match what the model expects."""


class FormatError(GeError):
    """A file (ONNX, OM, weight file, meta.json, input array) is broken or untrusted."""


class DeviceError(GeError):
    """A device operation failed: bad address, out of memory, timeout."""
