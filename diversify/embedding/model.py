"""The embedding model: where it is on disk, its identity, and loading it without a network.

A model is a local directory in model2vec's format (``model.safetensors`` and ``tokenizer.json``,
as ``StaticModel.save_pretrained`` writes it), or an installed Python package that ships one (the
package folder, or its ``model`` folder, holds those files; found without importing the package). Nothing
is downloaded: a name that is neither gives an error saying how to fetch it once.
"""

from __future__ import annotations

import hashlib
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

from ..errors import InputError, require

__all__ = ["ModelInfo", "resolve_model", "load_model", "MODEL_FILES"]

#: the files a model directory must hold; their bytes make the model's digest
MODEL_FILES = ("model.safetensors", "tokenizer.json")
#: read into the digest too when present (normalization, token weights)
_OPTIONAL_FILES = ("config.json",)
_FETCH_HINT = ("Nothing is downloaded at run time. Fetch the model once where there is network access, e.g. "
               "`python -c \"from model2vec import StaticModel; StaticModel.from_pretrained('minishlab/potion-base-8M')"
               ".save_pretrained('models/potion-base-8M')\"`, then pass that directory (or install a package that "
               "ships the model and pass its name).")


@dataclass(frozen=True)
class ModelInfo:
    """What the artifact records about the model that made the vectors (``build_info["embedding"]``)."""

    name: str  # as the user gave it
    path: str  # the directory the model was loaded from
    library: str  # "model2vec <version>"
    digest: str  # sha256 over the model's files
    dim: int

    def as_dict(self) -> dict:
        return {"model": self.name, "library": self.library, "model_sha256": self.digest, "dim": self.dim}

    @property
    def cache_key(self) -> str:
        """Whatever changes the vectors: the model's bytes and the library that runs it."""
        return f"{self.library}|{self.digest}"


def resolve_model(model: Union[str, os.PathLike]) -> Path:
    """The directory of ``model``: a local path, or an installed package that ships a model."""
    if not isinstance(model, (str, os.PathLike)) or not os.fspath(model):
        raise InputError(f"`model` must be a local model directory or the name of an installed package that ships "
                         f"one; got {model!r}. {_FETCH_HINT}")
    text = os.fspath(model)
    path = Path(text).expanduser()
    if path.exists():
        return _checked_dir(path, text)
    from_package = _package_dir(text)
    if from_package is not None:
        return _checked_dir(from_package, text)
    raise InputError(f"`model` {text!r} was not found: it is neither an existing path nor an installed Python package. {_FETCH_HINT}")


def _package_dir(name: str):
    """The model directory an installed package ships (the package folder itself, or its ``model``
    folder), found on ``sys.path`` without importing it (no code of the package runs); None when no
    package of that name is installed."""
    module = name.replace("-", "_")
    if not module.isidentifier():
        return None
    for entry in sys.path:
        folder = Path(entry or ".") / module
        if not folder.is_dir():
            continue
        for candidate in (folder, folder / "model"):
            if all((candidate / f).is_file() for f in MODEL_FILES):
                return candidate
        return folder  # installed, but no model where one is looked for: named by _checked_dir
    return None


def _checked_dir(path: Path, given: str) -> Path:
    if not path.is_dir():
        raise InputError(f"`model` must be a model directory; got {given!r}, which is a file. Pass the directory "
                         f"that holds {' and '.join(MODEL_FILES)}.")
    missing = [f for f in MODEL_FILES if not (path / f).is_file()]
    if missing:
        kind = (" It looks like a sentence-transformers model: diversify embeds with model2vec static models "
                "(distill one from it with `model2vec.distill`), or embed with it yourself and pass --vectors."
                if (path / "modules.json").is_file() or (path / "config_sentence_transformers.json").is_file() else "")
        raise InputError(f"`model` {given!r} is not a model2vec model directory: {', '.join(missing)} missing in "
                         f"{str(path)!r}.{kind} {_FETCH_HINT}")
    return path


def _digest(path: Path) -> str:
    h = hashlib.sha256()
    for name in MODEL_FILES + _OPTIONAL_FILES:
        f = path / name
        if not f.is_file():
            continue
        h.update(name.encode() + b"\0")
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


def load_model(model: Union[str, os.PathLike]) -> tuple[Any, ModelInfo]:
    """(the loaded model2vec ``StaticModel``, its :class:`ModelInfo`), from disk only."""
    path = resolve_model(model)
    m2v = require("model2vec", extra="embed", purpose="diversify.embed (build --embed)")
    from model2vec import StaticModel

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a local directory never needs the hub; make sure it is not asked
    try:
        loaded = StaticModel.from_pretrained(str(path.resolve()))
    except Exception as exc:  # noqa: BLE001 - any failure to read the files is the user's model, named
        raise InputError(f"`model` {os.fspath(model)!r}: the files in {str(path)!r} could not be loaded as a model2vec "
                         f"model ({type(exc).__name__}: {exc}). Save it again with StaticModel.save_pretrained.") from None
    dim = int(loaded.dim)
    info = ModelInfo(name=os.fspath(model), path=str(path.resolve()), library=f"model2vec {m2v.__version__}",
                     digest=_digest(path), dim=dim)
    return loaded, info
