"""Bringing a repository back: an archive into an Icechunk repository that icechunk opens.

``zsarchive.restore(archive, target, ...)`` is both this package and the function: importing the
package makes Python bind ``zsarchive.restore`` to the module, so the module itself is callable.
"""

import sys
import types

from zsarchive.lazy import lazy_exports

__getattr__ = lazy_exports(
    __name__, {"restore": "zsarchive.restore.repository", "RestoreSummary": "zsarchive.restore.repository"}
)


class _CallableModule(types.ModuleType):
    def __call__(self, *args, **kwargs):
        from zsarchive.restore.repository import restore

        return restore(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

__all__ = ["RestoreSummary", "restore"]
