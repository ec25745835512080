"""Functional forms of the in-place operators: they allocate their outputs
and never modify their inputs (``stableops.<name>``, re-exported by the
package). The in-place, schema-shaped wrappers are in :mod:`stableops.ops`.
"""

from __future__ import annotations

__all__: list[str] = []
