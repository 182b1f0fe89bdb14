"""einops on tc arrays: a backend einops finds by itself, defined when einops is installed.

Contract: einops picks a backend for a tensor among the subclasses of its ``AbstractBackend``
whose ``framework_name`` is an imported module. :func:`register` (called once by
``tensorc/__init__.py``) defines such a subclass for ``tensorc`` when einops can be imported,
so plain ``einops.rearrange``, ``reduce``, ``repeat`` and ``einsum`` take and return lazy
``tc.Array``s (every step is a namespace operation: nothing is evaluated). Without einops
installed it does nothing. einops' own ``einops.array_api`` functions work on tc arrays as
well (they use ``x.__array_namespace__()``).
"""

from __future__ import annotations

import numpy as np

from tensorc.lazy.array_object import Array
from tensorc.lazy.namespace import get_namespace

FLOAT_KINDS = "fc"


def register() -> bool:
    """Define the tensorc backend for einops; ``False`` when einops is not installed."""
    try:
        from einops._backends import AbstractBackend
    except ImportError:
        return False

    class TensorcBackend(AbstractBackend):
        framework_name = "tensorc"

        def is_appropriate_type(self, tensor) -> bool:
            return isinstance(tensor, Array)

        def from_numpy(self, x):
            return get_namespace().asarray(x)

        def to_numpy(self, x):
            return np.asarray(x)

        def arange(self, start, stop):
            return get_namespace().arange(start, stop)

        def shape(self, x):
            return x.shape

        def reshape(self, x, shape):
            return get_namespace().reshape(x, tuple(shape))

        def transpose(self, x, axes):
            return get_namespace().permute_dims(x, tuple(axes))

        def reduce(self, x, operation, axes):
            return getattr(get_namespace(), operation)(x, axis=tuple(axes))

        def stack_on_zeroth_dimension(self, tensors: list):
            return get_namespace().stack(tensors)

        def add_axis(self, x, new_position):
            return get_namespace().expand_dims(x, axis=new_position)

        def tile(self, x, repeats):
            return get_namespace().tile(x, tuple(repeats))

        def concat(self, tensors, axis: int):
            return get_namespace().concat(tensors, axis=axis)

        def is_float_type(self, x) -> bool:
            return np.dtype(x.dtype).kind in FLOAT_KINDS

        def einsum(self, pattern, *x):
            return get_namespace().einsum(pattern, *x)

    register.backend = TensorcBackend
    return True
