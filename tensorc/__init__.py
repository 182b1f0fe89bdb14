"""tensorc: a tensor-algebra compiler for einsum, tensordot and ``.tc`` programs.

``import tensorc as tc`` gives the public API (see ``README.md``; the layers are in
``docs/architecture.md``):
the array API standard namespace (2024.12) of lazy ``tc.Array``s (``tensorc.lazy``, with the
``tc.linalg`` and ``tc.fft`` extensions),
``tc.einsum``, ``tc.tensordot``, ``tc.plan`` (also on scipy/pydata sparse operands, with
``tc.sparse``: ``random``, ``from_coo``, ``load_tns``), ``tc.last_stats``, ``tc.compile`` (``.tc``
programs), the Ray session (``tc.init``, ``tc.shutdown``), distributed arrays (``tc.Array``,
``tc.random``, ``tc.zeros``, ``tc.ones``, ``tc.asarray``) and the error hierarchy.
Heavy dependencies (Ray, z3) are imported only by the parts that need them.
"""

import sys
from types import SimpleNamespace as _SimpleNamespace

from tensorc import sparse
from tensorc.api import clear_plan_cache, einsum, last_stats, matmul, plan, tensordot
from tensorc.errors import (
    ArgumentError,
    AxisError,
    ExecutionError,
    IRVerificationError,
    LinAlgError,
    MemoryLimitError,
    NodeLostError,
    ParseError,
    PathError,
    PlanError,
    ShapeError,
    StorageError,
    TcError,
    TcParseError,
    TcShapeError,
    TcTypeError,
    TensorcError,
    TypeCheckError,
    UnknownOptionError,
    UnsupportedError,
)
from tensorc.lazy import fft, linalg
from tensorc.lazy import stride_tricks as _stride_tricks
from tensorc.lazy.array_object import Array
from tensorc.lazy.creation import (
    arange,
    asarray,
    empty,
    empty_like,
    eye,
    from_dlpack,
    full,
    full_like,
    linspace,
    meshgrid,
    ones,
    ones_like,
    random,
    zeros,
    zeros_like,
)
from tensorc.lazy.data_types import (
    astype,
    bool,
    can_cast,
    complex64,
    complex128,
    finfo,
    float32,
    float64,
    iinfo,
    int8,
    int16,
    int32,
    int64,
    isdtype,
    result_type,
    uint8,
    uint16,
    uint32,
    uint64,
)
from tensorc.lazy.einops_backend import register as _register_einops
from tensorc.lazy.elementwise import *  # noqa: F403 - the standard's element-wise functions
from tensorc.lazy.elementwise import FUNCTIONS as _ELEMENTWISE
from tensorc.lazy.elementwise import clip, where
from tensorc.lazy.indexing import take, take_along_axis
from tensorc.lazy.info import __array_namespace_info__
from tensorc.lazy.io import from_zarr, load, save, to_zarr
from tensorc.lazy.linear import matrix_transpose, vecdot
from tensorc.lazy.manipulation import (
    broadcast_arrays,
    broadcast_to,
    concat,
    diff,
    expand_dims,
    flip,
    moveaxis,
    permute_dims,
    repeat,
    reshape,
    roll,
    squeeze,
    stack,
    tile,
    transpose,
    tril,
    triu,
    unstack,
)
from tensorc.lazy.namespace import set_namespace as _set_namespace
from tensorc.lazy.numpy_functions import pad
from tensorc.lazy.searching import (
    argmax,
    argmin,
    argsort,
    nonzero,
    searchsorted,
    sort,
    unique_all,
    unique_counts,
    unique_inverse,
    unique_values,
)
from tensorc.lazy.statistical import (
    all,
    any,
    count_nonzero,
    cumulative_prod,
    cumulative_sum,
    max,
    mean,
    min,
    prod,
    std,
    sum,
    var,
)
from tensorc.lazy.utility import compute, wait
from tensorc.planning.plan import Plan
from tensorc.program import Program, compile
from tensorc.session import init, shutdown

__array_api_version__ = "2024.12"
e, inf, nan, pi = 2.718281828459045, float("inf"), float("nan"), 3.141592653589793
newaxis = None

__all__ = [
    *_ELEMENTWISE,
    "Array",
    "LinAlgError",
    "MemoryLimitError",
    "NodeLostError",
    "StorageError",
    "UnsupportedError",
    "__array_api_version__",
    "__array_namespace_info__",
    "all",
    "any",
    "arange",
    "argmax",
    "argmin",
    "argsort",
    "astype",
    "bool",
    "broadcast_arrays",
    "broadcast_to",
    "can_cast",
    "clip",
    "complex128",
    "complex64",
    "compute",
    "concat",
    "count_nonzero",
    "cumulative_prod",
    "cumulative_sum",
    "e",
    "empty",
    "empty_like",
    "expand_dims",
    "eye",
    "fft",
    "finfo",
    "flip",
    "float32",
    "float64",
    "from_dlpack",
    "full",
    "full_like",
    "iinfo",
    "inf",
    "int16",
    "int32",
    "int64",
    "int8",
    "isdtype",
    "linalg",
    "linspace",
    "matmul",
    "matrix_transpose",
    "max",
    "mean",
    "meshgrid",
    "min",
    "moveaxis",
    "nan",
    "newaxis",
    "nonzero",
    "ones_like",
    "permute_dims",
    "pi",
    "prod",
    "repeat",
    "reshape",
    "result_type",
    "roll",
    "searchsorted",
    "sort",
    "sparse",
    "squeeze",
    "stack",
    "std",
    "sum",
    "take",
    "tile",
    "uint16",
    "uint32",
    "uint64",
    "uint8",
    "unique_all",
    "unique_counts",
    "unique_inverse",
    "unique_values",
    "unstack",
    "var",
    "vecdot",
    "where",
    "zeros_like",
    "diff",
    "take_along_axis",
    "tril",
    "triu",
    "pad",
    "transpose",
    "from_zarr",
    "load",
    "save",
    "to_zarr",
    "asarray",
    "init",
    "ones",
    "random",
    "shutdown",
    "wait",
    "zeros",
    "ArgumentError",
    "AxisError",
    "ExecutionError",
    "IRVerificationError",
    "ParseError",
    "PathError",
    "Plan",
    "PlanError",
    "Program",
    "ShapeError",
    "TcError",
    "TcParseError",
    "TcShapeError",
    "TcTypeError",
    "TensorcError",
    "TypeCheckError",
    "UnknownOptionError",
    "clear_plan_cache",
    "compile",
    "einsum",
    "last_stats",
    "plan",
    "tensordot",
]
__version__ = "0.1.0"
lib = _SimpleNamespace(stride_tricks=_stride_tricks)
"""numpy's ``lib.stride_tricks.sliding_window_view`` for clients that look it up here."""
_set_namespace(sys.modules[__name__])
_register_einops()
