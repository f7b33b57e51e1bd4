"""Signed provider records: a record the user did not write is not trusted (docs/providers.md,
"The provider contract").

A durable run stores what it ran on (``runs.provider``: the provider's record, its identity and
model aliases). ``resume`` rebuilds the provider from it: sends the API key to its base URL,
runs its command. So the stored record carries ``signature``: HMAC-SHA256, keyed with a
per-user key, over the canonical JSON (sorted keys, no spaces, UTF-8) of the run id together
with the record. A record edited in the store, copied from another user's store or written
before records were signed does not verify.

The key is 32 random bytes (hex) in ``record-key`` of the user's configuration folder:
``$XDG_CONFIG_HOME/dsh-workflow/`` (default ``~/.config/dsh-workflow/``). The folder is created
``0o700``, the file ``0o600``, atomically on the first signature (written aside, then linked
in place: two processes starting at once end with one key). Verifying never creates it.

Contract: :func:`signed` never raises (a key that cannot be made leaves the record unsigned, so
it will not verify, and logs a warning naming the key's path); :func:`verified` never raises and
never trusts a record without a valid signature.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .files import PRIVATE_FILE, private_folder, tighten

__all__ = ["SIGNATURE", "key_path", "signed", "verified"]

logger = logging.getLogger("dsh_workflow.store")

#: The key of a stored record that holds its signature (``hmac-sha256:<hex>``).
SIGNATURE = "signature"
_SCHEME = "hmac-sha256:"
_KEY_FILE = "record-key"
_KEY_BYTES = 32


def key_path() -> Path:
    """Where this user's record key lives (see the module docstring)."""
    base = os.environ.get("XDG_CONFIG_HOME") or ""
    folder = Path(base) if os.path.isabs(base) else Path.home() / ".config"
    return folder / "dsh-workflow" / _KEY_FILE


def _read_key(path: Path) -> bytes | None:
    try:
        info = path.stat()
        if info.st_uid != os.geteuid():
            return None  # not this user's key: it signs nothing of theirs
        tighten(str(path), PRIVATE_FILE)
        key = bytes.fromhex(path.read_text(encoding="ascii").strip())
    except (OSError, ValueError):
        return None
    return key if len(key) >= 16 else None


def _make_key(path: Path) -> bytes | None:
    """The key at ``path``, created owner-only and atomically when missing; None when it
    cannot be read or made."""
    found = _read_key(path)
    if found is not None:
        return found
    if path.exists():  # made meanwhile by another process (its read then succeeds), or unusable
        return _read_key(path)
    try:
        private_folder(str(path.parent))
        aside = path.with_name(f".{_KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
        fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC | os.O_NOFOLLOW,
                     PRIVATE_FILE)
        try:
            with os.fdopen(fd, "w", encoding="ascii") as out:
                out.write(secrets.token_hex(_KEY_BYTES) + "\n")
                out.flush()
                os.fsync(out.fileno())
            try:
                os.link(aside, path)  # fails when another process made the key first
            except FileExistsError:
                pass
        finally:
            aside.unlink(missing_ok=True)
    except OSError:
        return None
    return _read_key(path)


def _digest(key: bytes, run_id: str, record: Mapping[str, Any]) -> str:
    body = {SIGNATURE: None, **record}
    del body[SIGNATURE]
    canonical = json.dumps({"run_id": run_id, "record": body}, sort_keys=True,
                           separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return _SCHEME + hmac.new(key, canonical.encode("utf-8", "surrogatepass"),
                              hashlib.sha256).hexdigest()


def signed(run_id: str, record: Mapping[str, Any]) -> dict[str, Any]:
    """``record`` with its signature for run ``run_id`` (the key made on first use); the
    record unsigned when no key can be made or the record is not JSON."""
    out = {key: value for key, value in record.items() if key != SIGNATURE}
    key = _make_key(key_path())
    if key is None:
        logger.warning("dsh-workflow: no usable record key at %s: run %s's provider record is "
                       "stored unsigned, so resuming it will need the provider options again",
                       key_path(), run_id)
        return out
    try:
        out[SIGNATURE] = _digest(key, run_id, out)
    except (TypeError, ValueError):
        pass
    return out


def verified(run_id: str, stored: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
    """The stored record without its signature, and whether the signature is this user's
    for run ``run_id`` and this exact record."""
    record = {key: value for key, value in stored.items() if key != SIGNATURE}
    signature = stored.get(SIGNATURE)
    key = _read_key(key_path())
    if not isinstance(signature, str) or key is None:
        return record, False
    try:
        expected = _digest(key, run_id, record)
    except (TypeError, ValueError):
        return record, False
    return record, hmac.compare_digest(signature, expected)
