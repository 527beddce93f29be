"""A storage file's path, kept as a ``str``, with its ``Path`` built only when asked for.

Loading 10,000 logs spent a quarter of its CPU in ``pathlib``; the hot paths use ``path`` (a
``str`` for the ``os`` calls) and only callers that want a ``Path`` pay for one, once.
Invariant: ``_path`` is always set; ``_file`` is None or ``Path(_path)``."""

from __future__ import annotations

import os
from pathlib import Path


class FilePath:
    """Mixin: ``file`` (a ``Path``, built lazily and settable) and ``path`` (the ``str``)."""

    _path: str
    _file: Path | None

    @property
    def file(self) -> Path:
        file = self._file
        if file is None:
            file = self._file = Path(self._path)
        return file

    @file.setter
    def file(self, value: str | os.PathLike[str]) -> None:
        self._path = os.fspath(value)
        self._file = value if isinstance(value, Path) else None

    @property
    def path(self) -> str:
        """The file's path as a str (for os calls)."""
        return self._path
