"""The standard's inspection API (``tc.__array_namespace_info__()``)."""

from __future__ import annotations

import numpy as np


class NamespaceInfo:
    """What this namespace supports: one device (``"cpu"``), numpy's dtypes."""

    def capabilities(self) -> dict:
        return {"boolean indexing": False, "data-dependent shapes": False,
                "max dimensions": 64}

    def default_device(self) -> str:
        return "cpu"

    def devices(self) -> list[str]:
        return ["cpu"]

    def default_dtypes(self, *, device=None) -> dict:
        return {"real floating": np.dtype("float64"), "complex floating":
                np.dtype("complex128"), "integral": np.dtype("int64"),
                "indexing": np.dtype("int64")}

    def dtypes(self, *, device=None, kind=None) -> dict:
        names = {
            "bool": ["bool"], "signed integer": ["int8", "int16", "int32", "int64"],
            "unsigned integer": ["uint8", "uint16", "uint32", "uint64"],
            "real floating": ["float32", "float64"],
            "complex floating": ["complex64", "complex128"],
        }
        names["integral"] = names["signed integer"] + names["unsigned integer"]
        names["numeric"] = names["integral"] + names["real floating"] + names[
            "complex floating"]
        if kind is None:
            chosen = [n for key in ("bool", "numeric") for n in names[key]]
        elif isinstance(kind, tuple):
            chosen = [n for k in kind for n in names[k]]
        else:
            chosen = names[kind]
        return {n: np.dtype(n) for n in chosen}


def __array_namespace_info__() -> NamespaceInfo:  # noqa: N807 - the standard's name
    return NamespaceInfo()
