"""Where a leaderboard lives, and the seal that says the harness made an entry: the database's file
(:func:`default_path`), the key beside it (:func:`key_path`: random, made once with mode 0600, never replaced,
ignored by git), and an HMAC-SHA256 over a canonical JSON of every field of an entry, by that key.

    entry = _seal(entry, path=db)  # Verdict.entry's last step: the harness is the one caller
    _check_seal(entry, db)         # leaderboard.add's: raises EntryRefused unless the seal matches db's key

:class:`LeaderboardFileError` is what a key (here) or a database (:mod:`.store`) that cannot be used raises.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import json
import os
import secrets
import tempfile
import time
from pathlib import Path

from .. import env, results
from .entry import _HARNESS, _NUMBER, Entry, EntryRefused, _is_bool, _show

__all__ = ["LeaderboardFileError", "default_path", "key_path"]


class LeaderboardFileError(OSError):
    """The leaderboard's file (or its key) cannot be read or written; the message names it and what to do."""


def default_path(scale: env.Scale | None = None) -> Path:
    """``results/leaderboard.sqlite`` at full scale; ``results/local/leaderboard.sqlite`` at smoke scale."""
    full = (scale or env.scale()) == "full"
    return (results.results_dir() if full else results.results_dir() / "local") / "leaderboard.sqlite"


def key_path(path: Path | str | None = None) -> Path:
    """The key that seals entries for the database at ``path``: the same file name with ``.key`` added."""
    path = Path(path) if path is not None else default_path()
    return path.with_name(path.name + ".key")


# -- the seal -----------------------------------------------------------------------------------------------

def _canonical(e: Entry) -> bytes:
    """Every field of ``e`` as one JSON text, numbers as floats (the same for 27.3 and numpy.float64(27.3))."""
    def num(v):
        try:
            return None if v is None else float(v) if isinstance(v, _NUMBER) and not _is_bool(v) else repr(v)
        except (OverflowError, ValueError):
            return _show(v, 80)

    body = {"name": e.name, "configuration": e.configuration,
            "kind": e.kind if isinstance(e.kind, str) else repr(e.kind),  # a ladder run is never one to the target
            "challenge": e.challenge if isinstance(e.challenge, str) else repr(e.challenge),
            "header": {str(k): None if v is None else str(v) for k, v in dict(e.header).items()},
            "figures": {str(k): num(v) for k, v in dict(e.figures).items()},
            "checks": {str(k): bool(v) if _is_bool(v) else repr(v) for k, v in dict(e.checks).items()}}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), default=repr).encode()


def _mac(key: bytes, e: Entry) -> str:
    return hmac.new(key, _canonical(e), hashlib.sha256).hexdigest()


def _key_error(key: Path, what: str, e: BaseException) -> LeaderboardFileError:
    return LeaderboardFileError(f"the leaderboard's key {results.shown(key)} cannot be {what} ({e}): make its folder "
                                f"{results.shown(key.parent)} writable, or give another file: verdict.entry(name, "
                                "path=...) and leaderboard.add(entry, path=...).")


def _make_key(key: Path) -> None:
    """Write a new random key at ``key`` unless one is there; never replace one (another process may have won)."""
    try:
        key.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=key.parent, prefix=key.name + ".", suffix=".tmp")  # mode 0600
    except OSError as e:
        raise _key_error(key, "made", e) from e
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(secrets.token_hex(32).encode() + b"\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, key)  # atomic, and never over a key that is there: the first writer's key wins
        except FileExistsError:
            pass
        except OSError:  # a file system without hard links: create-exclusive, then write
            try:
                fd2 = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                return
            with os.fdopen(fd2, "wb") as f:
                f.write(Path(tmp).read_bytes())
    except OSError as e:
        raise _key_error(key, "made", e) from e
    finally:
        Path(tmp).unlink(missing_ok=True)


def _key(path: Path, *, make: bool) -> bytes | None:
    """The key beside the database at ``path`` (made when ``make`` and missing; None when missing otherwise)."""
    key = key_path(path)
    for attempt in range(50):
        try:
            text = key.read_bytes()
        except FileNotFoundError:
            if not make:
                return None
            _make_key(key)
            continue
        except OSError as e:
            raise _key_error(key, "read", e) from e
        if not text and attempt < 49:  # another process is writing it (no hard links here): wait for it
            time.sleep(0.02)
            continue
        raw = text.strip()
        if len(raw) == 64:
            try:
                return bytes.fromhex(raw.decode("ascii"))
            except ValueError:  # UnicodeDecodeError included
                pass
        break
    k = results.shown(key)
    raise LeaderboardFileError(f"the leaderboard's key {k} is damaged (not 64 hex digits); it was left as it is. Move "
                               f"it aside (mv {k} {k}.broken) and make your entries again with verdict.entry(name): "
                               "a new key is made, and entries sealed with the old one are refused.")


def _seal(entry: Entry, *, path: Path | str | None = None) -> Entry:
    """``entry`` sealed for the database at ``path`` (its key is made on first use). For the harness
    (``Verdict.entry``): an entry sealed anywhere else defeats what the leaderboard is for."""
    path = Path(path) if path is not None else default_path()
    return dataclasses.replace(entry, seal=_mac(_key(path, make=True), entry))


def _check_seal(entry: Entry, path: Path) -> None:
    if not entry.seal:
        raise EntryRefused(f"{entry.name!r} was not produced by the harness: {_HARNESS} (an entry built or typed by "
                           "hand is never ranked).")
    key = _key(path, make=False)
    if key is None or not hmac.compare_digest(str(entry.seal).encode(), _mac(key, entry).encode()):
        raise EntryRefused(f"{entry.name!r} does not match its seal: it was changed after verdict.entry made it, or "
                           f"made for another leaderboard than {results.shown(path)} (give verdict.entry and "
                           "leaderboard.add the same path=).")
