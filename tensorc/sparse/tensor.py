"""``tc.asarray`` of a sparse array: a :class:`SparseTensor`, which tensorc holds and later
calls reuse.

Contract:

- ``SparseTensor(value, dtype=None, copy=None)`` takes a scipy or pydata sparse array (or
  another ``SparseTensor``). It copies it, as ``tc.asarray`` copies an ndarray: later
  writes to the caller's array are not seen. ``copy=False`` keeps the caller's array
  (the caller promises not to change it) and refuses a ``dtype`` that needs a conversion
  (``ValueError``, as numpy's). ``dtype`` converts the values.
- It is a sparse operand wherever one is taken (``tc.einsum``, ``tc.tensordot``,
  ``tc.matmul``): the form a call is planned from (CSR for a 2-d scipy array, canonical
  coordinates otherwise) is made once, here, not per call. A call's result has the type
  the wrapped array would give (scipy in, scipy out).
- On Ray, each node's piece of it (the blocks a call's plan gives that node, in compact
  form) is stored in the object store by the first call that needs it and read from there
  by every later call with the same cut: it travels once per session, as Dask's
  ``persist`` keeps chunks on the workers. :meth:`SparseTensor.kept_piece` is that cache:
  at most :data:`PIECES_KEPT` cuts, least recently used dropped first; they die with the
  tensor.
- The blocks a call's plan cuts it into are kept for later calls with the same cut
  (:meth:`SparseTensor.cached_cut`, :meth:`SparseTensor.keep_cut`, at most
  :data:`CUTS_KEPT`): a chain ``R ← R · A`` cuts ``A`` once, not once per product. A cut
  holds the tensor's entries once more (a CSR matrix cut by columns as CSR block columns,
  other cuts as coordinates sorted by block).
- A call whose only sparse operand is a ``SparseTensor`` plans once per shape of call
  (:meth:`SparseTensor.cached_plan`, at most :data:`PLANS_KEPT`): an iterative solver's
  steps reuse the first step's plan and cut (``plan_cached`` in ``tc.last_stats()``).
- Element-wise arithmetic (``x * 2``, ``x * y``, ``-x``, ``x > 0``, ``x + 1``...) and numpy's
  ufuncs (``np.sin(x)``) follow :mod:`tensorc.sparse.elementwise`: a ``SparseTensor`` while
  the function keeps zeros, a dense ``tc.Array`` where it does not, refused over the memory
  budget. ``x @ y`` is not an operator of it (``tc.matmul`` is). ``x == y`` is element-wise,
  as numpy's is (so ``x in [y]`` compares arrays; a tensor still hashes by identity). A
  scipy array on the left of an operator (``csr * x``) converts ``x`` with numpy, which is
  refused: write ``x * csr`` or ``tc.multiply(csr, x)``.
- ``shape``, ``dtype``, ``ndim``, ``nnz``; :meth:`to_sparse` (a copy of the wrapped array),
  :meth:`todense` (an ndarray). ``numpy.asarray`` of it is refused
  (:class:`~tensorc.errors.TypeCheckError`): densifying is asked for by name.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from tensorc.errors import TypeCheckError
from tensorc.runtime.kept import Kept
from tensorc.sparse.blocks import CutOperand
from tensorc.sparse.compact import piece
from tensorc.sparse.elementwise import apply, name_of_ufunc
from tensorc.sparse.formats import is_sparse, source, todense

PIECES_KEPT = 32
"""Cut pieces a tensor keeps for later calls (a 4-node call makes up to 4)."""

PLANS_KEPT = 8
"""Plans a tensor keeps for later calls of the same shape (:meth:`SparseTensor.keep_plan`)."""

CUTS_KEPT = 2
"""Block cuts kept per tensor (:meth:`SparseTensor.keep_cut`): each holds its entries once
more."""


class SparseTensor:
    """A sparse array tensorc holds (module docstring)."""

    is_tensorc_sparse = True  # what tensorc.sparse.formats.is_sparse looks for

    def __init__(self, value, *, dtype=None, copy: bool | None = None) -> None:
        if isinstance(value, SparseTensor):
            value = value.wrapped
        if not is_sparse(value):
            raise TypeCheckError(f"SparseTensor takes a scipy or pydata sparse array, not "
                                 f"{type(value).__name__}")
        converts = dtype is not None and np.dtype(dtype) != value.dtype
        if converts and copy is False:
            raise ValueError(f"copy=False but converting {value.dtype} to {np.dtype(dtype)} "
                             "needs a copy")
        if converts:
            value = value.astype(dtype)
        elif copy is not False:
            value = value.copy()
        self.wrapped = value
        """The sparse array held (tensorc's own copy unless ``copy=False``)."""
        self.source = source(value)
        """What calls plan and cut it from, made once."""
        # calls on several threads may share one tensor: each cache has its lock
        self._pieces = _Recent(PIECES_KEPT)
        self._plans = _Recent(PLANS_KEPT)
        self._cuts = _Recent(CUTS_KEPT)

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(int(d) for d in self.wrapped.shape)

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.wrapped.dtype)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def nnz(self) -> int:
        return int(self.wrapped.nnz)

    def to_sparse(self):
        """A copy of the sparse array held (scipy or pydata, as it came in)."""
        return self.wrapped.copy()

    def todense(self) -> np.ndarray:
        """The array as a dense ndarray."""
        return todense(self.wrapped)

    def __array__(self, dtype=None, copy=None):
        raise TypeCheckError(f"numpy.asarray of a sparse {self.shape} tensor would densify "
                             f"its {self.nnz} non-zeros; call .todense() to do that")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        name = name_of_ufunc(ufunc)
        if method != "__call__" or kwargs or name is None:
            return NotImplemented
        return apply(name, *inputs)

    def __neg__(self):
        return apply("negative", self)

    def __pos__(self):
        return apply("positive", self)

    def __abs__(self):
        return apply("abs", self)

    def __invert__(self):
        return apply("bitwise_invert", self)

    def __repr__(self) -> str:
        return (f"SparseTensor(shape={self.shape}, dtype={self.dtype}, nnz={self.nnz}, "
                f"{type(self.wrapped).__name__})")

    def cached_plan(self, key: tuple) -> tuple | None:
        """``(plan, cut)`` kept by :meth:`keep_plan` for a call of this shape (``key``: the
        call's subscripts, the dense operands' shapes and dtypes, its options), or ``None``.
        Its non-zeros never change, so neither does the plan of a call whose only sparse
        operand is this tensor."""
        return self._plans.get(key)

    def keep_plan(self, key: tuple, plan, cut) -> None:
        """Keep ``plan`` and this tensor's ``cut`` for later calls of shape ``key`` (at
        most :data:`PLANS_KEPT`, least recently used dropped first)."""
        self._plans.put(key, (plan, cut))

    def cached_cut(self, steps: tuple[int, ...]) -> CutOperand | None:
        """The cut of this tensor into blocks of ``steps`` that a call kept
        (:meth:`keep_cut`), or ``None``."""
        return self._cuts.get(tuple(int(step) for step in steps))

    def keep_cut(self, steps: tuple[int, ...], blocks: CutOperand) -> None:
        """Keep ``blocks``, this tensor cut into blocks of ``steps`` by the plan a call ran
        (at most :data:`CUTS_KEPT`, least recently used dropped first; cuts the planner
        tried and dropped are never kept)."""
        self._cuts.put(tuple(int(step) for step in steps), blocks)

    def kept_piece(self, blocks: CutOperand, keys: list[tuple]) -> Kept:
        """The compact piece of the blocks ``keys`` of ``blocks`` (this tensor's source cut
        as a call's plan cuts it), made once per cut and kept (module docstring)."""
        wanted = tuple(sorted(set(keys)))

        def make() -> Kept:
            value = piece(blocks, list(wanted))
            return Kept(value, int(getattr(value, "nbytes", 0) or 0))

        return self._pieces.get_or_make((type(blocks).__name__, tuple(blocks.steps), wanted),
                                        make)


class _Recent:
    """At most ``limit`` values by key, the least recently used dropped first; safe to use
    from several threads."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._values: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key):
        with self._lock:
            found = self._values.get(key)
            if found is not None:
                self._values.move_to_end(key)
            return found

    def put(self, key, value) -> None:
        with self._lock:
            self._put(key, value)

    def get_or_make(self, key, make):
        """The value of ``key``, made by ``make()`` (under the lock, so once) if absent."""
        with self._lock:
            found = self._values.get(key)
            if found is None:
                found = make()
                self._put(key, found)
            else:
                self._values.move_to_end(key)
            return found

    def _put(self, key, value) -> None:
        self._values[key] = value
        self._values.move_to_end(key)
        while len(self._values) > self.limit:
            self._values.popitem(last=False)


def _operator(name: str, reflected: bool = False):
    def method(self, other):
        return apply(name, other, self) if reflected else apply(name, self, other)

    method.__name__ = name
    method.__doc__ = f"Element-wise ``{name}`` (sparse while it keeps zeros)."
    return method


for _dunder, _name in {"add": "add", "sub": "subtract", "mul": "multiply",
                       "truediv": "divide", "floordiv": "floor_divide", "mod": "remainder",
                       "pow": "pow", "and": "bitwise_and", "or": "bitwise_or",
                       "xor": "bitwise_xor"}.items():
    setattr(SparseTensor, f"__{_dunder}__", _operator(_name))
    setattr(SparseTensor, f"__r{_dunder}__", _operator(_name, reflected=True))
for _dunder, _name in {"lt": "less", "le": "less_equal", "gt": "greater",
                       "ge": "greater_equal", "eq": "equal", "ne": "not_equal"}.items():
    setattr(SparseTensor, f"__{_dunder}__", _operator(_name))
SparseTensor.__hash__ = object.__hash__  # == is element-wise; a tensor is still a dict key
