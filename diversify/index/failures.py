"""The storage errors of the three backends, worded once.

A backend's driver (``sqlite3``, ``psycopg``, ``redis``) fails with its own exception types; every
such failure reaches the user as one :class:`~diversify.errors.StorageError` shape: what was being
done, the URL with its password masked, the driver's exception (type and text, with any password
scrubbed) and, inside a write, that the batch was rolled back. The messages that the backends share
(the writer lock not acquired in time, the batch rolled back, nothing written) are spelled here.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import Optional

from ..errors import StorageError

__all__ = ["ROLLED_BACK", "NOTHING_WRITTEN", "NOTHING_CREATED", "failed", "lock_timeout", "storage_errors",
           "driver_error"]

#: the tail of a failure inside a write transaction (the transaction is gone, the index unchanged)
ROLLED_BACK = "The batch was rolled back; nothing of it was written. Run it again."
#: the tail of a failure before a write transaction started
NOTHING_WRITTEN = "Nothing was written."
#: the tail of a failure while creating an index
NOTHING_CREATED = "Nothing was created."

#: the top-level modules whose exceptions are driver failures (not bugs of ours)
_DRIVERS = frozenset({"sqlite3", "psycopg", "redis", "psycopg_pool"})


def scrub(text: str, secrets: Sequence[str] = ()) -> str:
    """``text`` with each of ``secrets`` (passwords, longest first) replaced by ``***``."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return text


def failed(action: str, url: str, exc: BaseException, tail: str = "", secrets: Sequence[str] = ()) -> StorageError:
    """``"<action> <url> failed: <Type>: <text>. <tail>"``: a driver's failure as a StorageError.

    ``url`` is already masked; the driver's text is put on one line (libpq's span several) and
    scrubbed of ``secrets``.
    """
    text = " ".join(str(exc).split()).rstrip(".")
    cause = scrub(f"{type(exc).__name__}: {text}", secrets)
    return StorageError(f"{action} {url} failed: {cause}." + (f" {tail}" if tail else ""))


def lock_timeout(where: str, seconds: float, holder: str = "another process is writing a long batch") -> StorageError:
    """The writer lock of ``where`` (the masked URL, or the index on it) was not acquired in time."""
    return StorageError(f"the writer lock of {where} was not acquired within {seconds:g} s: {holder}; nothing was "
                        "written. Retry, or raise lock_timeout.")


def driver_error(exc: BaseException) -> bool:
    """Errors of the database client libraries (and the OS below them), not bugs in our code."""
    mod = type(exc).__module__ or ""
    return isinstance(exc, OSError) or mod.split(".")[0] in _DRIVERS


@contextlib.contextmanager
def storage_errors(url: str, action: str, *, rolled_back: bool = False, tail: str = "",
                   kinds: Optional[tuple[type[BaseException], ...]] = None,
                   secrets: Sequence[str] = ()) -> Iterator[None]:
    """Re-raise a driver's exception as :func:`failed`'s StorageError (the one error translator).

    ``kinds`` are the exception types translated (default: any driver's, :func:`driver_error`);
    ``rolled_back`` adds :data:`ROLLED_BACK` (a failure inside a write transaction), else ``tail``.
    """
    try:
        yield
    except StorageError:
        raise
    except Exception as exc:
        if not (isinstance(exc, kinds) if kinds is not None else driver_error(exc)):
            raise
        raise failed(action, url, exc, ROLLED_BACK if rolled_back else tail, secrets) from exc
