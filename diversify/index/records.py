"""Stored records read back, checked: what a backend hands the index is not trusted blindly.

The meta and state records (:class:`~diversify.index.storage.Meta`,
:class:`~diversify.index.storage.State`), the counters beside them and the stored document ids are
checked field by field as they are read. A damaged field (missing, a counter that is not a decimal
int64 in range, an id kind other than ``str``/``int``, text that is not UTF-8, an ``int`` id kind
over ids that are not decimal ints) is a :class:`~diversify.errors.StorageError` naming the record,
the field, what it holds and the fix, never a bare ValueError, KeyError or UnicodeDecodeError.

It is also where the meta and state records are encoded for storage (:func:`meta_fields`,
:func:`state_fields`: the text every backend stores, field by field, under the names
:data:`META_FIELDS` and :data:`STATE_FIELDS`), so the three backends write and read them alike.
"""

from __future__ import annotations

from typing import Optional, Union

from ..errors import StorageError
from .storage import Meta, State

__all__ = ["checked_meta", "checked_state", "checked_int", "stored_id_text", "stored_id", "damaged", "META_FIELDS",
           "STATE_FIELDS", "meta_fields", "state_fields"]

#: the fields of the meta record, in the order of :class:`Meta`
META_FIELDS = ("schema_version", "config_json", "fingerprint", "created_by")
#: the fields of the state record, in the order of :class:`State`
STATE_FIELDS = ("next_seq", "next_cluster", "id_kind", "layout")

_DAMAGED = ("the index was altered outside diversify or its storage is damaged: restore it from a backup, or "
            "create a new index and add the documents again")


def damaged(url: str, record: str, what: str) -> StorageError:
    """The StorageError of a damaged stored record: which record, what is wrong with it, the fix."""
    return StorageError(f"the {record} record of the index at {url} is damaged: {what}. It was not changed; "
                        f"{_DAMAGED}.")


def _damaged(url: str, record: str, field: str, rule: str, found: object) -> StorageError:
    return damaged(url, record, f"`{field}` must be {rule}; found {found!r:.80}")


def meta_fields(meta: Meta) -> dict[str, str]:
    """The meta record as the text a backend stores (:func:`checked_meta` reads it back)."""
    return {"schema_version": str(int(meta.schema_version)), "config_json": meta.config_json,
            "fingerprint": meta.fingerprint, "created_by": meta.created_by}


def state_fields(state: State) -> dict[str, str]:
    """The state record as the text a backend stores (``id_kind`` ``""`` for none yet; read back by
    :func:`checked_state`)."""
    return {"next_seq": str(int(state.next_seq)), "next_cluster": str(int(state.next_cluster)),
            "id_kind": state.id_kind or "", "layout": state.layout}


def _text_field(url: str, record: str, field: str, value: object) -> str:
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise _damaged(url, record, field, "UTF-8 text", bytes(value)) from None
    if not isinstance(value, str):
        raise _damaged(url, record, field, "text", value)
    return value


def checked_int(url: str, record: str, field: str, value: object, low: int) -> int:
    """A stored counter as an int in [low, 2**63-1] (str, bytes or int), or StorageError naming it."""
    if value is None:
        raise _damaged(url, record, field, "present (an integer)", None)
    text = value if isinstance(value, int) and not isinstance(value, bool) else _text_field(url, record, field, value)
    try:
        v = int(text)
    except (TypeError, ValueError):
        v = None
    if v is None or not low <= v <= 2**63 - 1 or (isinstance(text, str) and str(v) != text):
        raise _damaged(url, record, field, f"an integer from {low} to 2**63-1 in decimal", value)
    return v


def checked_meta(fields: dict, url: str) -> Meta:
    """A :class:`Meta` from a backend's stored fields (str, bytes or int values; a missing one is
    absent from ``fields``), or StorageError naming the damaged field, what it holds and the fix."""
    for name in META_FIELDS:
        if fields.get(name) is None:
            raise _damaged(url, "meta", name, "present", None)
    return Meta(schema_version=checked_int(url, "meta", "schema_version", fields["schema_version"], 1),
                config_json=_text_field(url, "meta", "config_json", fields["config_json"]),
                fingerprint=_text_field(url, "meta", "fingerprint", fields["fingerprint"]),
                created_by=_text_field(url, "meta", "created_by", fields["created_by"]))


def checked_state(url: str, next_seq: object, next_cluster: object, id_kind: object, layout: object) -> State:
    """A :class:`State` from a backend's stored fields (``id_kind`` ``""``/None for none yet), or
    StorageError naming the damaged field."""
    kind = _text_field(url, "state", "id_kind", id_kind) if id_kind is not None else ""
    if kind not in ("", "str", "int"):
        raise _damaged(url, "state", "id_kind", "'str', 'int' or empty", id_kind)
    return State(next_seq=checked_int(url, "state", "next_seq", next_seq, 0),
                 next_cluster=checked_int(url, "state", "next_cluster", next_cluster, 0), id_kind=kind or None,
                 layout=_text_field(url, "state", "layout", layout if layout is not None else ""))


def stored_id_text(raw: bytes, url: str, seq: int) -> str:
    """The id of document ``seq`` from the UTF-8 bytes a backend stored, or StorageError."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise _damaged(url, f"document (seq {seq})", "id", "UTF-8 text", bytes(raw)) from None


def stored_id(text: str, kind: Optional[str], url: str) -> Union[str, int]:
    """A stored id (:attr:`DocRow.id`) as the caller's type: an int when the index's id kind is
    ``"int"``, else the text. StorageError when the id kind record contradicts the stored id."""
    if kind != "int":
        return text
    try:
        v = int(text)
    except ValueError:
        v = None
    if v is None or str(v) != text:
        raise StorageError(f"the index at {url} records int ids (its state's `id_kind` is 'int') but holds the id "
                           f"{text!r:.80}, which is not an int in decimal: the id_kind record contradicts the stored "
                           f"ids. Nothing was changed; {_DAMAGED} (an index of str ids has id_kind 'str').")
    return v
