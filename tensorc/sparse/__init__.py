"""Sparse tensors: scipy and pydata sparse operands in ``tc.einsum``, cut into blocks and
computed block by block where their non-zeros are (``README.md``, "Sparse tensors").

``tc.sparse`` re-exports the public names: :func:`random`, :func:`from_coo`,
:func:`load_tns`, :func:`save_tns`, :func:`is_sparse`, :class:`SparseTensor` (what
``tc.asarray`` makes of a sparse array). The package's modules:
``formats`` (which objects are sparse, canonical coordinates, result types), ``blocks``
(an operand cut into blocks), ``rules`` (result type, steps, blocking by non-zeros),
``plan`` (the plan and ``explain()``), ``einsum`` (one call), ``results`` (the sparse
result assembled from its blocks), ``construct`` and ``tns`` (making and reading arrays),
``tensor`` (``SparseTensor``), ``elementwise`` (element-wise functions, sparse where they
keep zeros), ``reductions`` (``tc.sum``), ``observed`` (densities seen on earlier runs).
"""

from tensorc.sparse.construct import from_coo, random
from tensorc.sparse.formats import is_sparse
from tensorc.sparse.tensor import SparseTensor
from tensorc.sparse.tns import load_tns, save_tns

__all__ = ["SparseTensor", "from_coo", "is_sparse", "load_tns", "random", "save_tns"]
