"""Where the blocks of a block program's tensors are, for given sizes and block counts.

Contract: :func:`environment(program, shapes, counts)` reads every size off the inputs'
shapes (a size seen twice must agree) and returns ``(env, bounds)``: ``env`` binds every size
and block count to an integer, ``bounds[size]`` are the block edges of that size — a size ``N``
with a count ``NB`` is cut into ``NB`` near-equal blocks (block ``k`` spans ``k*N//NB`` to
``(k+1)*N//NB``), any other size is one block. Errors are :class:`~tensorc.errors.ShapeError`s
naming the input, the size and the dimension.
"""

from __future__ import annotations

from tensorc.errors import ShapeError
from tensorc.ir.block_program import BlockProgramIR


def environment(program: BlockProgramIR, shapes: dict[str, tuple[int, ...]],
                counts: dict[str, int]) -> tuple[dict[str, int], dict[str, tuple[int, ...]]]:
    """The sizes read off the inputs' shapes and the block counts, and the block bounds of
    every size: ``(env, bounds by size name)``."""
    env: dict[str, int] = {}
    origin: dict[str, str] = {}
    for name in program.inputs():
        spec = program.tensors[name]
        if name not in shapes:
            raise ShapeError(f"missing input {name!r}")
        shape = tuple(shapes[name])
        if len(shape) != len(spec.dims):
            raise ShapeError(f"input {name} is declared {spec.dtype}[{', '.join(spec.dims)}] "
                             f"but has shape {shape}")
        for axis, (dim, extent) in enumerate(zip(spec.dims, shape, strict=True)):
            where = f"{name}'s dimension {axis}"
            if dim in env and env[dim] != extent:
                raise ShapeError(f"size {dim} is {env[dim]} from {origin[dim]} but {extent} "
                                 f"from {where} (shape {shape})")
            env.setdefault(dim, extent)
            origin.setdefault(dim, where)
    for size in program.sizes:
        if size not in env:
            raise ShapeError(f"size {size} is not the extent of any input")
    bounds = {size: (0, env[size]) for size in program.sizes}
    for count, size in program.blocks.items():
        if count not in counts:
            raise ShapeError(f"no block count for {count} (blocks of {size})")
        value = int(counts[count])
        if not 1 <= value <= max(env[size], 1):
            raise ShapeError(f"block count {count} = {value} must be between 1 and {size} = "
                             f"{env[size]}")
        env[count] = value
        bounds[size] = tuple(k * env[size] // value for k in range(value + 1))
    return env, bounds


def tensor_bounds(program: BlockProgramIR, name: str, bounds: dict) -> tuple[tuple[int, ...], ...]:
    return tuple(bounds[dim] for dim in program.tensors[name].dims)


def block_slices(edges: tuple[tuple[int, ...], ...], coords: tuple[int, ...]) -> tuple[slice, ...]:
    return tuple(slice(e[c], e[c + 1]) for e, c in zip(edges, coords, strict=True))


def grid_coords(edges) -> list[tuple[int, ...]]:
    coords = [()]
    for e in edges:
        coords = [(*c, k) for c in coords for k in range(len(e) - 1)]
    return coords
