"""Whether an index can be opened as it is stored: its schema version, its config (readable, true
to its fingerprint, equal to a config given) and the settings the live index cannot honour."""

from __future__ import annotations

import json
from typing import Any, Optional

from ..config import BuildConfig, fingerprint
from ..errors import ConfigError, IncompatibleIndexError
from .storage import SCHEMA_VERSION, Meta

__all__ = ["check_index_config", "config_difference", "stored_config"]


def check_index_config(cfg: BuildConfig) -> None:
    """The settings the live index cannot honour yet, refused with the alternative."""
    if cfg.clustering == "components":
        raise ConfigError("the live index keeps clusters it can verify (clique: every two members similar; star: "
                          "every member similar to its representative); got clustering='components'. Use "
                          "clustering='clique' (the default) or 'star', or the batch "
                          "build for components.")


def config_difference(stored: BuildConfig, given: BuildConfig) -> list[str]:
    """The fields (dotted) that differ, as ``name: stored -> given``."""

    def flat(d: Any, prefix: str = "") -> dict:
        if isinstance(d, dict):
            out: dict = {}
            for k, v in d.items():
                out.update(flat(v, f"{prefix}{k}."))
            return out
        return {prefix[:-1]: d}

    a, b = flat(stored.model_dump(mode="json")), flat(given.model_dump(mode="json"))
    return [f"{k}: {a.get(k, '(unset)')!r} -> {b.get(k, '(unset)')!r}" for k in sorted(set(a) | set(b))
            if a.get(k, "(unset)") != b.get(k, "(unset)")]


def stored_config(meta: Meta, given: Optional[BuildConfig], url: str) -> BuildConfig:
    """The config stored in the index at ``url`` (its ``meta``), refused when this version cannot read it,
    when it does not match its fingerprint, or when ``given`` (a config the caller passed) differs."""
    if meta.schema_version > SCHEMA_VERSION:
        raise IncompatibleIndexError(
            f"the index at {url} has schema version {meta.schema_version}, written by diversify "
            f"{meta.created_by}; this version reads schema {SCHEMA_VERSION} and older. Upgrade diversify "
            "(pip install -U diversify-retrieval); the index was not changed.")
    try:
        cfg = BuildConfig(**json.loads(meta.config_json))
    except (ValueError, TypeError, RecursionError, ConfigError) as exc:
        raise IncompatibleIndexError(f"the config stored in the index at {url} cannot be read by this "
                                     f"version ({exc}); open it with the version that created it "
                                     f"({meta.created_by}).") from exc
    if fingerprint(cfg) != meta.fingerprint:
        raise IncompatibleIndexError(f"the config stored in the index at {url} does not match its "
                                     "fingerprint under this version's hash scheme; open it with diversify "
                                     f"{meta.created_by}, or export and rebuild.")
    if given is not None and fingerprint(given) != meta.fingerprint:
        diff = config_difference(cfg, given)
        raise IncompatibleIndexError(
            f"`config` must match the config the index at {url} was created with; differing fields: "
            f"{'; '.join(diff) or 'the hash scheme'} (stored -> given). Pass config=None to use the index's "
            "own, or create a new index for the new config.")
    check_index_config(cfg)
    return cfg
