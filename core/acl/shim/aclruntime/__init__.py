"""aclruntime on ge (ge.core.acl.aclruntime)."""
from ge.core.acl.aclruntime import (AclRuntimeError, BaseTensor, InferenceSession, MemorySummary, Tensor,  # noqa: F401
                                    dtype, model, session_options, sumary, tensor_desc, type)
