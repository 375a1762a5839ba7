"""A folder of files derived from other files, in the user's cache folder.

Each entry is named by a digest of everything it was made from, so a stale entry is never
read: changed inputs give another name. Writes are atomic (a temporary file renamed over the
name), and a cache that cannot be read or written (a read-only home, a full disk) only costs
speed: the caller builds what it wanted instead. When there are more than `max_entries`, the
least recently used go: a read marks its entry used (its modification time), so the entries
of the rule files a user loads every run stay while one-off entries age out.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
from pathlib import Path

import platformdirs

logger = logging.getLogger(__name__)

APP_NAME = "onnx-rewrite"


def digest(*parts: str | bytes) -> str:
    """A short hex digest of `parts` (each one length-prefixed, so they cannot run together)."""
    hasher = hashlib.sha256()
    for part in parts:
        data = part.encode() if isinstance(part, str) else part
        hasher.update(len(data).to_bytes(8, "little"))
        hasher.update(data)
    return hasher.hexdigest()[:32]


class CacheFolder:
    """Named byte strings in one folder (None: a cache that keeps nothing)."""

    def __init__(self, path: str | os.PathLike[str] | None, max_entries: int = 512) -> None:
        self.path = None if path is None else Path(path)
        self.max_entries = max_entries

    def read(self, name: str) -> bytes | None:
        """The entry's bytes, or None when it is missing or unreadable."""
        if self.path is None:
            return None
        entry = self.path / name
        try:
            data = entry.read_bytes()
        except OSError:
            return None
        with contextlib.suppress(OSError):  # a read-only cache still reads
            os.utime(entry)
        return data

    def write(self, name: str, data: bytes) -> None:
        """Store an entry atomically; a failure is logged at debug level and ignored."""
        if self.path is None:
            return
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self.path, prefix=".tmp-")
            try:
                with os.fdopen(handle, "wb") as out:
                    out.write(data)
                os.replace(temporary, self.path / name)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(temporary)
                raise
            self._prune()
        except OSError as exc:
            logger.debug("cache %s: could not write %s: %s", self.path, name, exc)

    def _prune(self) -> None:
        assert self.path is not None, "only a real folder is pruned"
        entries = [p for p in self.path.iterdir() if p.is_file() and not p.name.startswith(".")]
        if len(entries) <= self.max_entries:
            return
        entries.sort(key=lambda p: p.stat().st_mtime)
        for old in entries[: len(entries) - self.max_entries]:
            with contextlib.suppress(OSError):
                old.unlink()


def user_cache() -> CacheFolder:
    """The per-user cache folder of this tool (`~/.cache/onnx-rewrite` on Linux)."""
    return CacheFolder(platformdirs.user_cache_dir(APP_NAME, appauthor=False))
