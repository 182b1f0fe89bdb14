"""Lazy arrays: the array API standard namespace of ``tc.Array`` (one module per chapter of
the standard, as ``import tensorc as tc`` exports them), their expression graph, its
lowering to one statement program, and evaluation."""
