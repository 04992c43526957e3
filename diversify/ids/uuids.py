"""The ways a UUID can be written as a str id, for online matching (:data:`UUID_FORMS`)."""

from __future__ import annotations

import uuid
from typing import Any

__all__ = ["UUID_FORMS", "uuid_form", "format_uuid", "parse_uuid"]

#: hyphenated, what Qdrant returns); ``upper`` the same in upper case; ``hex`` / ``HEX`` the 32
#: digits without hyphens; ``urn`` ``urn:uuid:`` + canonical; ``braces`` / ``BRACES`` ``{...}``.
UUID_FORMS = ("canonical", "upper", "hex", "HEX", "urn", "braces", "BRACES")


def format_uuid(u: uuid.UUID, form: str) -> str:
    """``u`` written in one of :data:`UUID_FORMS`."""
    s = str(u)
    if form == "canonical":
        return s
    if form == "upper":
        return s.upper()
    if form == "hex":
        return u.hex
    if form == "HEX":
        return u.hex.upper()
    if form == "urn":
        return u.urn
    if form == "braces":
        return "{" + s + "}"
    if form == "BRACES":
        return "{" + s.upper() + "}"
    raise ValueError(f"unknown UUID form {form!r}; expected one of {UUID_FORMS}")


def parse_uuid(x: Any) -> uuid.UUID | None:
    """``x`` as a UUID when it is one (a ``uuid.UUID``, or a str in any form ``uuid.UUID`` reads), else None."""
    if isinstance(x, uuid.UUID):
        return x
    if not isinstance(x, str) or not 32 <= len(x) <= 45:
        return None
    try:
        return uuid.UUID(x)
    except ValueError:
        return None


def uuid_form(s: Any) -> str | None:
    """Which of :data:`UUID_FORMS` the str id ``s`` is written in; None when it is not a UUID in one of them."""
    u = parse_uuid(s) if isinstance(s, str) else None
    if u is None:
        return None
    return next((form for form in UUID_FORMS if format_uuid(u, form) == s), None)
