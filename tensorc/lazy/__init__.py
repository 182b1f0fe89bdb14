"""Lazy arrays: the array API standard namespace of ``tc.Array`` (one module per chapter of
the standard, as ``import tensorc as tc`` exports them), their expression graph, its
lowering to one statement program, and evaluation.

The chapter modules ``tc.Array``'s methods call are imported here, in one place, and bound
into :mod:`tensorc.lazy.namespace` (``array_object`` cannot import them: they import it);
see that module for the wiring. The element-wise functions are bound the same way into
:mod:`tensorc.sparse.elementwise`, whose sparse arrays densify into ``tc.Array``s.
"""

from tensorc.lazy import elementwise, explaining, indexing, interop, linear, manipulation
from tensorc.lazy.namespace import Chapters, bind_chapters
from tensorc.sparse.elementwise import bind_dense

bind_chapters(Chapters(explaining=explaining, indexing=indexing, interop=interop,
                       linear=linear, manipulation=manipulation))
bind_dense(elementwise.FUNCTIONS)
