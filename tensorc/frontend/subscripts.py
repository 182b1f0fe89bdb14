"""Parse einsum subscripts with numpy's full semantics into an :class:`EinsumSpec`.

Contract: ``parse_einsum(subscripts, shapes)`` either returns an ``EinsumSpec`` that names
every dimension of every operand with an index name, fixes the size of every index, and
lists the output indices in numpy's order, or raises a :class:`~tensorc.errors.ParseError`
(bad string, wrong operand count) or :class:`~tensorc.errors.ShapeError` (sizes that do not
agree). Both are ``ValueError``s and their wording follows numpy's.

Naming of indices:

- a subscript letter is its own index name (``"i"``);
- the dimensions covered by ``...`` are named ``"...0"``, ``"...1"``, … counted from the
  left of the broadcast ellipsis shape (operands with fewer ellipsis dimensions take the
  rightmost names, as numpy right-aligns them);
- a dimension of size 1 that broadcasts against a larger size of the same index is renamed
  ``"<index>~<operand>"`` (size 1, used nowhere else), so the IR reduces it away as an index
  that occurs in one operand only and no special case for broadcasting survives this module.

A repeated letter within one operand (``"ii->i"``) stays repeated: the IR's ``Scan`` of that
operand reads its diagonal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tensorc.errors import ArgumentError, ParseError, ShapeError

ELLIPSIS = "..."


@dataclass(frozen=True, slots=True)
class EinsumSpec:
    """A checked einsum: index names per operand dimension, the output, and index sizes."""

    inputs: tuple[tuple[str, ...], ...]
    output: tuple[str, ...]
    sizes: tuple[tuple[str, int], ...]

    @property
    def size_of(self) -> dict[str, int]:
        return dict(self.sizes)

    def output_shape(self) -> tuple[int, ...]:
        sizes = self.size_of
        return tuple(sizes[name] for name in self.output)


def _split_terms(subscripts: str, num_operands: int) -> tuple[list[str], str | None]:
    if not isinstance(subscripts, str):
        raise ParseError(
            f"einsum subscripts must be a string, got {type(subscripts).__name__}"
        )
    text = subscripts.replace(" ", "")
    if text.count("->") > 1:
        raise ParseError(
            "einstein sum subscripts string includes '->' more than once: "
            f"{subscripts!r}"
        )
    if "->" in text:
        lhs, rhs = text.split("->")
    else:
        lhs, rhs = text, None
    terms = lhs.split(",")
    if len(terms) < num_operands:
        raise ParseError(
            "more operands provided to einstein sum function than specified in the "
            f"subscripts string: {len(terms)} term(s) in {subscripts!r}, "
            f"{num_operands} operand(s) given"
        )
    if len(terms) > num_operands:
        raise ParseError(
            "fewer operands provided to einstein sum function than specified in the "
            f"subscripts string: {len(terms)} term(s) in {subscripts!r}, "
            f"{num_operands} operand(s) given"
        )
    return terms, rhs


def _letters(term: str, where: str) -> tuple[list[str], bool]:
    """Split one term into letters; report whether it holds an ellipsis."""
    has_ellipsis = ELLIPSIS in term
    if has_ellipsis:
        before, _, after = term.partition(ELLIPSIS)
        if "." in before or "." in after:
            raise ParseError(
                "einstein sum subscripts string contains a '.' that is not part of an "
                f"ellipsis ('...') in {where}"
            )
        body = before + after
    else:
        if "." in term:
            raise ParseError(
                "einstein sum subscripts string contains a '.' that is not part of an "
                f"ellipsis ('...') in {where}"
            )
        body = term
    for char in body:
        if not (char.isascii() and char.isalpha()):
            raise ParseError(
                f"invalid subscript '{char}' in einstein sum subscripts string, "
                "subscripts must be letters"
            )
    return list(body), has_ellipsis


def parse_einsum(subscripts: str, shapes: Sequence[tuple[int, ...]]) -> EinsumSpec:
    """Check ``subscripts`` against operand ``shapes`` and name every dimension.

    Args:
        subscripts: numpy einsum subscripts, e.g. ``"ijk,if,jf->if"`` or ``"...ij->...ji"``.
        shapes: the shape of each operand (``()`` for scalars).

    Returns:
        The checked :class:`EinsumSpec`.

    Raises:
        ParseError: the string is malformed or names the wrong number of operands.
        ShapeError: dimension sizes disagree.
    """
    terms, rhs = _split_terms(subscripts, len(shapes))
    per_operand: list[list[str]] = []
    ellipsis_ndims: list[int] = []
    for position, (term, shape) in enumerate(zip(terms, shapes, strict=True)):
        letters, has_ellipsis = _letters(term, f"operand {position}")
        ndim = len(shape)
        if len(letters) > ndim:
            raise ParseError(
                "einstein sum subscripts string contains too many subscripts for "
                f"operand {position}: {term!r} names {len(letters)} dimension(s), "
                f"the operand has shape {tuple(shape)}"
            )
        if not has_ellipsis and len(letters) < ndim:
            raise ParseError(
                f"operand {position} has more dimensions than subscripts given in "
                f"einstein sum: {term!r} names {len(letters)} dimension(s), the operand "
                f"has shape {tuple(shape)}; use '...' to broadcast the extra dimensions"
            )
        per_operand.append(letters)
        ellipsis_ndims.append(ndim - len(letters) if has_ellipsis else 0)

    ellipsis_ndim = max(ellipsis_ndims, default=0)
    ellipsis_names = [f"{ELLIPSIS}{d}" for d in range(ellipsis_ndim)]

    # Name every dimension; ellipsis dimensions are right-aligned.
    named: list[list[str]] = []
    for position, term in enumerate(terms):
        letters = per_operand[position]
        count = ellipsis_ndims[position]
        names = ellipsis_names[ellipsis_ndim - count:] if count else []
        if ELLIPSIS in term:
            before = term.partition(ELLIPSIS)[0]
            named.append(letters[: len(before)] + names + letters[len(before):])
        else:
            named.append(letters)

    # Sizes: repeated letters within one operand must match exactly; across operands a
    # dimension of size 1 broadcasts.
    sizes: dict[str, int] = {}
    for position, (names, shape) in enumerate(zip(named, shapes, strict=True)):
        seen: dict[str, int] = {}
        for name, dim in zip(names, shape, strict=True):
            if name in seen and seen[name] != dim:
                raise ShapeError(
                    f"dimensions in single operand for collapsing index '{name}' don't match "
                    f"({seen[name]} != {dim}) in operand {position} of shape {tuple(shape)}"
                )
            seen[name] = dim
        for name, dim in seen.items():
            previous = sizes.get(name)
            if previous is None or previous == 1:
                sizes[name] = dim
            elif dim not in (1, previous):
                what = (
                    f"dimension {name[len(ELLIPSIS):]} of the ellipsis ('...')"
                    if name.startswith(ELLIPSIS)
                    else f"label '{name}'"
                )
                raise ShapeError(
                    f"Size of {what} for operand {position} ({dim}) does not match previous "
                    f"terms ({previous}); operand shapes are "
                    + ", ".join(str(tuple(s)) for s in shapes)
                )

    # Rename size-1 dimensions that broadcast against a larger size.
    final_inputs: list[tuple[str, ...]] = []
    for position, (names, shape) in enumerate(zip(named, shapes, strict=True)):
        renamed = []
        for name, dim in zip(names, shape, strict=True):
            if dim == 1 and sizes[name] != 1:
                renamed.append(f"{name}~{position}")
            else:
                renamed.append(name)
        final_inputs.append(tuple(renamed))
    for names in final_inputs:
        for name in names:
            if "~" in name:
                sizes[name] = 1

    output = _output(rhs, named, ellipsis_names, subscripts)
    for name in output:
        if name not in sizes:  # an ellipsis name with no operand holding it cannot happen
            raise ParseError(f"output index {name!r} has no size")
    ordered_sizes = tuple(sorted(sizes.items()))
    return EinsumSpec(inputs=tuple(final_inputs), output=output, sizes=ordered_sizes)


def _output(
    rhs: str | None,
    named: list[list[str]],
    ellipsis_names: list[str],
    subscripts: str,
) -> tuple[str, ...]:
    counts: dict[str, int] = {}
    for names in named:
        for name in names:
            counts[name] = counts.get(name, 0) + 1
    if rhs is None:
        letters = sorted(
            (n for n, c in counts.items() if c == 1 and not n.startswith(ELLIPSIS)),
            key=ord,
        )
        return tuple(ellipsis_names) + tuple(letters)

    letters, has_ellipsis = _letters(rhs, "the output")
    seen: set[str] = set()
    for letter in letters:
        if letter in seen:
            raise ParseError(
                f"einstein sum subscripts string includes output subscript '{letter}' "
                f"multiple times: {subscripts!r}"
            )
        seen.add(letter)
        if letter not in counts:
            raise ParseError(
                f"einstein sum subscripts string included output subscript '{letter}' "
                f"which never appeared in an input: {subscripts!r}"
            )
    if ellipsis_names and not has_ellipsis:
        raise ParseError(
            "output has more dimensions than subscripts given in einstein sum, but no '...' "
            f"ellipsis provided to broadcast the extra dimensions: {subscripts!r}"
        )
    if not has_ellipsis:
        return tuple(letters)
    before = rhs.partition(ELLIPSIS)[0]
    return tuple(letters[: len(before)]) + tuple(ellipsis_names) + tuple(letters[len(before):])


def sublist_to_subscripts(args: Sequence[object]) -> tuple[str, list[object]]:
    """Convert numpy's interleaved form ``(op0, sub0, op1, sub1, ..., [out])``.

    A sublist is any sequence (list, tuple, range, 1-d integer array) of integers in
    ``[0, 52)`` (0-25 are ``a``-``z``, 26-51 ``A``-``Z``; numpy integers included) or ``...``.
    """
    operands: list[object] = []
    terms: list[str] = []
    items = list(args)
    output: str | None = None
    if len(items) % 2 == 1:
        output = _sublist_term(items.pop(), "the output sublist")
    for k in range(0, len(items), 2):
        operands.append(items[k])
        terms.append(_sublist_term(items[k + 1], f"the sublist of operand {k // 2}"))
    subscripts = ",".join(terms) + ("" if output is None else "->" + output)
    return subscripts, operands


def _sublist_items(sublist: object, where: str) -> list[object]:
    if isinstance(sublist, (str, bytes)) or not hasattr(sublist, "__len__"):
        raise ArgumentError(
            f"{where} must be a sequence of ints or Ellipsis, got {type(sublist).__name__} "
            "(the first argument of einsum is the subscripts string, or an operand followed "
            "by its sublist)"
        )
    if isinstance(sublist, np.ndarray):
        if sublist.ndim != 1 or sublist.dtype.kind not in "iu":
            raise ArgumentError(f"{where} must be a 1-d integer array, got {sublist!r}")
        return sublist.tolist()
    return list(sublist)


def _sublist_term(sublist: object, where: str) -> str:
    out = []
    for item in _sublist_items(sublist, where):
        if item is Ellipsis:
            out.append(ELLIPSIS)
            continue
        if isinstance(item, bool) or not isinstance(item, (int, np.integer)):
            raise ArgumentError(f"{where} holds {item!r}; subscripts are ints or Ellipsis")
        item = int(item)
        if 0 <= item < 26:
            out.append(chr(ord("a") + item))
        elif 26 <= item < 52:
            out.append(chr(ord("A") + item - 26))
        else:
            raise ParseError(
                f"subscript {item} in {where} is not within the valid range [0, 52)"
            )
    return "".join(out)
