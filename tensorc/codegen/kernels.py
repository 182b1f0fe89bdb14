"""Block kernels: the callables task graph tasks run on numpy blocks.

Every kernel is ``kernel(*blocks, out=None) -> ndarray``; when ``out`` is given the result is
written into it (the executor passes the output array's slice for final blocks, so results
land in place). Kernels are built from the IR, never from user text:

- :class:`LoadBlock` — slice one block out of an operand (a zero-copy view), take its
  diagonal when the scan repeats an index, cast to the compute dtype when needed;
- :class:`EinsumBlock` — a product join with an optional sum: an opt_einsum contraction
  expression (BLAS where it applies) cached per block-shape tuple, following a path chosen
  once by the cost model; with ``optimize=False`` numpy's own single einsum loop;
- :class:`ElementwiseBlock` — any other map expression, vectorised with numpy broadcasting
  (one compiled loop once it is hot: :mod:`tensorc.codegen.fused_loops`), then folded with
  the monoid's ufunc;
- :class:`ReduceBlocks` — fold partial blocks with a monoid.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import opt_einsum as oe

from tensorc.codegen import fused_loops
from tensorc.ir.contraction import path_operands, path_steps, uses_blas
from tensorc.ir.nodes import Expr
from tensorc.ir.semantics import MONOID_UFUNCS, align


def _letters(keys: Sequence[Sequence[str]]) -> dict[str, str]:
    alphabet: dict[str, str] = {}
    for key in keys:
        for name in key:
            if name not in alphabet:
                alphabet[name] = oe.get_symbol(len(alphabet))
    return alphabet


def equation(inputs: Sequence[Sequence[str]], output: Sequence[str]) -> str:
    """An einsum equation over single characters for index-name keys."""
    alphabet = _letters([*inputs, output])
    lhs = ",".join("".join(alphabet[n] for n in key) for key in inputs)
    return lhs + "->" + "".join(alphabet[n] for n in output)


def _finish(result: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    if out is None:
        return result
    if result is not out:
        np.copyto(out, result, casting="unsafe")
    return out


class LoadBlock:
    """Read block ``slices`` of an operand; diagonal and cast as the scan requires.

    A block is a zero-copy view unless a cast is needed, or ``compact`` is set (the block is
    read by several tasks) and the view is strided: then it is copied to C order once, here,
    instead of once per consuming BLAS call.
    """

    __slots__ = ("diagonal", "dtype", "compact")

    def __init__(self, diagonal: str | None, dtype: np.dtype, compact: bool = False) -> None:
        self.diagonal = diagonal
        self.dtype = dtype
        self.compact = compact

    def _view(self, operand: np.ndarray, slices: tuple[slice, ...]) -> np.ndarray:
        block = operand[slices]
        return block if self.diagonal is None else np.einsum(self.diagonal, block)

    def _must_copy(self, view: np.ndarray) -> bool:
        return view.dtype != self.dtype or (self.compact and not view.flags.c_contiguous)

    def identity(self, dtype) -> bool:
        """Whether a whole stored block of ``dtype`` is this load's block unchanged (no
        diagonal, no cast): a distributed executor then passes the stored block itself."""
        return self.diagonal is None and np.dtype(dtype) == self.dtype

    def copies(self, operand: np.ndarray, slices: tuple[slice, ...]) -> bool:
        """Whether this block is a copy (cast or compacted) rather than a view: the executor
        then offers a recycled buffer as ``out``."""
        return self._must_copy(self._view(operand, slices))

    def __call__(self, operand: np.ndarray, slices: tuple[slice, ...], out=None) -> np.ndarray:
        view = self._view(operand, slices)
        if out is not None:
            return _finish(view, out)
        if self._must_copy(view):
            return np.array(view, dtype=self.dtype, order="C")
        return view


def _matrix_orientation(key, contracted, free, contracted_first):
    """How a block keyed ``key`` views as a matrix, or ``None`` when it needs a transpose."""
    if key == (*contracted, *free):
        return "rows" if contracted_first else "transposed"
    if key == (*free, *contracted):
        return "transposed" if contracted_first else "rows"
    return None


class _Step:
    """One step of a contraction path: operand positions, equation, and how it runs.

    ``is_product``: the step sums nothing, so it is a broadcast multiply. ``gemm``: a pair
    whose blocks are (stacks of) matrices already (batch axes, those in both blocks and the
    output, leading everywhere in one order; then contracted axes leading or trailing in one
    order; output = batch, free axes of the first, free axes of the second), so one
    ``matmul`` on reshaped views does it without opt_einsum's transposes; other steps run as
    opt_einsum expressions.
    """

    __slots__ = ("taken", "text", "keys", "output", "is_product", "gemm")

    def __init__(self, taken: list[int], keys: list[tuple[str, ...]], output: tuple[str, ...]):
        self.taken = taken
        self.keys = keys
        self.output = output
        self.text = equation(keys, output)
        union = {n for k in keys for n in k}
        self.is_product = len(keys) > 1 and union == set(output)
        self.gemm = None
        if len(keys) == 2 and not self.is_product:
            a, b = keys
            batch = tuple(n for n in output if n in a and n in b)
            nb = len(batch)
            leading = a[:nb] == batch and b[:nb] == batch and output[:nb] == batch
            if leading and (nb or uses_blas(keys, output)):
                a, b = a[nb:], b[nb:]
                contracted = tuple(n for n in a if n in b)
                a_free = tuple(n for n in a if n not in contracted)
                b_free = tuple(n for n in b if n not in contracted)
                a_orientation = _matrix_orientation(a, contracted, a_free, contracted_first=False)
                b_orientation = _matrix_orientation(b, contracted, b_free, contracted_first=True)
                if (contracted and a_orientation and b_orientation
                        and output[nb:] == (*a_free, *b_free)):
                    self.gemm = (a_orientation, b_orientation, len(a_free), len(b_free), nb)

    def matmul(self, a: np.ndarray, b: np.ndarray, out: np.ndarray | None) -> np.ndarray:
        """``a @ b`` on matrix views of the blocks. Strided blocks go to BLAS as they are
        (a leading-dimension stride or a transpose is BLAS's own business); a block is
        copied, once, only when it has no matrix view BLAS takes."""
        a_orientation, b_orientation, a_free, b_free, nb = self.gemm
        batch_shape = a.shape[:nb]
        stack = (math.prod(batch_shape),) if nb else ()
        a_dims, b_dims = a.shape[nb:], b.shape[nb:]
        a_split = a_free if a_orientation == "rows" else len(a_dims) - a_free
        b_split = len(b_dims) - b_free if b_orientation == "rows" else b_free
        a_free_shape = a_dims[:a_split] if a_orientation == "rows" else a_dims[a_split:]
        inner_shape = a_dims[a_split:] if a_orientation == "rows" else a_dims[:a_split]
        b_free_shape = b_dims[b_split:] if b_orientation == "rows" else b_dims[:b_split]
        rows, inner, cols = math.prod(a_free_shape), math.prod(inner_shape), math.prod(b_free_shape)
        left = _blas_matrix(a, (*stack, rows, inner) if a_orientation == "rows"
                            else (*stack, inner, rows))
        right = _blas_matrix(b, (*stack, inner, cols) if b_orientation == "rows"
                             else (*stack, cols, inner))
        if a_orientation != "rows":
            left = left.swapaxes(-1, -2)
        if b_orientation != "rows":
            right = right.swapaxes(-1, -2)
        if out is not None and out.dtype == left.dtype:
            target = _matrix_view(out, (*stack, rows, cols))
            if target is not None:
                np.matmul(left, right, out=target)
                return out
        result = np.matmul(left, right)
        return result.reshape((*batch_shape, *a_free_shape, *b_free_shape))


def _einsum_product(views: list[np.ndarray], shape: tuple[int, ...]) -> bool:
    """Whether a product of ``views`` (aligned to ``shape``) runs faster as numpy's einsum
    loop than as ``np.multiply``: when some operand broadcasts. numpy's multiply then steps
    through short rows with its buffered iterator, copying each into a buffer (a Khatri-Rao
    block ``jf,kf->jkf`` of 64s: 240 us against einsum's 137); operands of one shape
    multiply faster as they are. One numeric dtype only (einsum and multiply then give the
    same dtype)."""
    dtype = views[0].dtype
    return (dtype.kind in "fciu" and all(v.dtype == dtype for v in views)
            and any(v.shape != shape for v in views))


def _matrix_view(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """``array`` reshaped to ``shape`` without a copy, or ``None`` when that needs one."""
    if array.shape == shape:
        return array
    if array.flags.c_contiguous:
        return array.reshape(shape)
    view = array.view()
    try:
        view.shape = shape  # raises instead of copying
    except AttributeError:
        return None
    return view


def _blas_matrix(array: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A ``shape`` matrix (or stack of them) of ``array`` that BLAS takes without numpy
    copying it: a view when one has a unit stride on one axis (any leading dimension), else
    one C-ordered copy."""
    view = _matrix_view(array, shape)
    if view is not None and _blasable(view):
        return view
    return np.ascontiguousarray(array).reshape(shape)


def _blasable(matrix: np.ndarray) -> bool:
    """Whether BLAS takes ``matrix`` as it is: row- or column-major with a leading dimension
    (the stride of an axis of length one does not matter)."""
    rows, cols = matrix.shape[-2:]
    item = matrix.itemsize
    row_stride, col_stride = matrix.strides[-2:]
    if (col_stride == item or cols == 1) and (
        rows == 1 or (row_stride % item == 0 and row_stride >= cols * item)
    ):
        return True
    return (row_stride == item or rows == 1) and (
        cols == 1 or (col_stride % item == 0 and col_stride >= rows * item)
    )


class EinsumBlock:
    """``sum over dropped indices of the product of blocks``, one path step at a time.

    Each step of the chosen path runs as a cached opt_einsum expression (BLAS where opt_einsum
    finds it) or, when it sums nothing, as a broadcast multiply; intermediates are keyed as
    :func:`tensorc.ir.contraction.path_steps` orders them. With ``path=None`` (numpy's
    ``optimize=False``) the whole product is one numpy einsum.
    """

    __slots__ = ("equation", "path", "steps", "multiplies", "largest_step", "_expressions")

    def __init__(
        self,
        inputs: Sequence[Sequence[str]],
        output: Sequence[str],
        path: list[tuple[int, ...]] | None,
        sizes: dict[str, int],
    ) -> None:
        self.equation = equation(inputs, output)
        self.path = path
        self.steps: list[_Step] = []
        if path is not None and len(inputs) > 1:
            steps = path_steps(inputs, output, path, sizes)
            for taken, (taken_keys, result) in zip(
                path_operands(len(inputs), path), steps, strict=True
            ):
                self.steps.append(_Step(taken, [tuple(k) for k in taken_keys], tuple(result)))
        touched = ([set().union(*step.keys) for step in self.steps] if self.steps
                   else [set().union(*inputs)])
        # for a product of blocks of the sizes it was made for: its multiplications (each
        # step's, the product of the extents of the indices it touches), and the elements
        # of its largest step result
        self.multiplies = sum(math.prod(sizes.get(letter, 1) for letter in letters)
                              for letters in touched)
        self.largest_step = max((math.prod(sizes.get(letter, 1) for letter in step.output)
                                 for step in self.steps),
                                default=math.prod(sizes.get(letter, 1) for letter in output))
        self._expressions: dict[tuple, object] = {}

    def _run_step(self, step: _Step, blocks: tuple[np.ndarray, ...], out=None) -> np.ndarray:
        if step.gemm is not None:
            return step.matmul(blocks[0], blocks[1], out)
        if step.is_product:
            views = [
                align(b, k, step.output)
                for b, k in zip(blocks, step.keys, strict=True)
            ]
            shape = np.broadcast_shapes(*(v.shape for v in views))
            direct = out is not None and out.shape == shape and out.dtype == views[0].dtype
            if _einsum_product(views, shape):
                return np.einsum(step.text, *blocks, out=out if direct else None)
            result = np.multiply(views[0], views[1], out=out if direct else None)
            for view in views[2:]:
                np.multiply(result, view, out=result)
            return result
        shapes = (step.text, *(b.shape for b in blocks))
        expression = self._expressions.get(shapes)
        if expression is None:
            everything = [tuple(range(len(blocks)))]
            expression = oe.contract_expression(step.text, *shapes[1:], optimize=everything)
            self._expressions[shapes] = expression
        return expression(*blocks)

    def __call__(self, *blocks: np.ndarray, out=None) -> np.ndarray:
        if not self.steps:
            if out is not None and out.dtype == blocks[0].dtype:
                return np.einsum(self.equation, *blocks, out=out)
            return _finish(np.einsum(self.equation, *blocks), out)
        return self._steps_from(list(blocks), 0, out)

    def _steps_from(self, values: list, first: int, out) -> np.ndarray:
        """Run the path's steps from number ``first`` on ``values`` (the operands, then the
        results of the steps before ``first``)."""
        last = len(self.steps) - 1
        for number in range(first, len(self.steps)):
            step = self.steps[number]
            target = out if number == last else None
            values.append(self._run_step(step, tuple(values[t] for t in step.taken), target))
            for t in step.taken:
                values[t] = None
        return _finish(values[-1], out)

    def prefix_inputs(self) -> tuple[int, ...] | None:
        """The operands the path's first step takes, when it takes two or more but not all
        and more steps follow: a partial product that blocks reading the same such operands
        share (:class:`EinsumPrefix`, then :class:`EinsumRest`); else ``None``."""
        taken = self.steps[0].taken if len(self.steps) > 1 else ()
        if not 2 <= len(taken) < self.equation.count(",") + 1:
            return None
        return tuple(taken)

    def __repr__(self) -> str:
        return f"EinsumBlock({self.equation!r}, path={self.path})"


class EinsumPrefix:
    """An :class:`EinsumBlock`'s first path step over the operands it takes
    (:meth:`EinsumBlock.prefix_inputs`, in that order): the partial product several blocks'
    products share, computed once where they run (a Khatri-Rao product of two factor
    blocks, read by every block of the tensor that meets both)."""

    __slots__ = ("block",)

    def __init__(self, block: EinsumBlock) -> None:
        self.block = block

    def __call__(self, *taken: np.ndarray, out=None) -> np.ndarray:
        return _finish(self.block._run_step(self.block.steps[0], taken), out)

    def __repr__(self) -> str:
        return f"EinsumPrefix({self.block!r})"


class EinsumRest:
    """The rest of an :class:`EinsumBlock`'s path: called with the operands its first step
    did not take (in order), then that step's result (:class:`EinsumPrefix`)."""

    __slots__ = ("block",)

    def __init__(self, block: EinsumBlock) -> None:
        self.block = block

    def __call__(self, *blocks: np.ndarray, out=None) -> np.ndarray:
        taken = self.block.steps[0].taken
        values: list = [None] * (len(blocks) - 1 + len(taken))
        others = iter(blocks[:-1])
        for position in range(len(values)):
            if position not in taken:
                values[position] = next(others)
        values.append(blocks[-1])
        return self.block._steps_from(values, 1, out)

    def __repr__(self) -> str:
        return f"EinsumRest({self.block!r})"


class ElementwiseBlock:
    """A map expression over broadcast blocks, optionally folded over dropped axes."""

    __slots__ = ("fn", "inputs", "join_key", "monoid", "dtype", "dropped", "order")

    def __init__(self, fn: Expr, inputs, join_key, output, monoid: str | None, dtype) -> None:
        self.fn = fn
        self.inputs = tuple(tuple(k) for k in inputs)
        self.join_key = tuple(join_key)
        self.monoid = monoid
        self.dtype = np.dtype(dtype)
        self.dropped = tuple(k for k, n in enumerate(self.join_key) if n not in output)
        kept = [n for n in self.join_key if n in output]
        self.order = [kept.index(n) for n in output]

    def __call__(self, *blocks: np.ndarray, out=None) -> np.ndarray:
        values = [
            align(b, k, self.join_key) for b, k in zip(blocks, self.inputs, strict=True)
        ]
        full_shape = np.broadcast_shapes(*(v.shape for v in values)) if values else ()
        value = np.asarray(fused_loops.evaluate(self.fn, values, self.dtype, full_shape),
                           self.dtype)
        result = value if value.shape == full_shape else np.broadcast_to(value, full_shape)
        if self.dropped and self.monoid is not None:
            ufunc = MONOID_UFUNCS[self.monoid]
            result = ufunc.reduce(result, axis=self.dropped, dtype=self.dtype)
        if self.order != sorted(self.order):
            result = np.transpose(result, self.order)
        if out is not None:
            return _finish(result, out)
        if (result.flags.c_contiguous and result.flags.writeable
                and not any(np.may_share_memory(result, b) for b in blocks)):
            return result  # a temporary of its own already: no copy
        return np.array(result, order="C")


class ReduceBlocks:
    """Fold partial blocks with a monoid, in input order."""

    __slots__ = ("ufunc", "dtype")

    def __init__(self, monoid: str, dtype) -> None:
        self.ufunc = MONOID_UFUNCS[monoid]
        self.dtype = np.dtype(dtype)

    def __call__(self, *blocks: np.ndarray, out=None) -> np.ndarray:
        if out is None:
            acc = np.asarray(self.ufunc(blocks[0], blocks[1], dtype=self.dtype))
        else:
            self.ufunc(blocks[0], blocks[1], out=out, dtype=self.dtype, casting="unsafe")
            acc = out
        for block in blocks[2:]:
            self.ufunc(acc, block, out=acc, dtype=self.dtype, casting="unsafe")
        return acc
