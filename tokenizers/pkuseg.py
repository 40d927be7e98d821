"""pkuseg word segmentation through spacy-pkuseg (wheels, pkuseg's API), with a local model only."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..errors import ModelError, UnavailableError
from ..models import INSTALL_COMMAND, model_checksum, resolve_pkuseg_model
from ..spec import Option
from .base import PythonTokenizer, user_dictionary, with_options


def _userdict(value: str) -> str:
    if value in ("", "none"):
        return value
    if not Path(value).expanduser().exists():  # one that exists but is no regular file: user_dictionary says so
        raise ValueError(f"no such file: {value} (use a path, '' for pkuseg's built-in dictionary, or none)")
    return user_dictionary(value)


@lru_cache(maxsize=4)
def _load_pkuseg(path: str, model_checksum: str, userdict: str, userdict_checksum: str) -> Any:
    """One loaded segmenter per model and dictionary (and their contents) per process."""
    import spacy_pkuseg

    return spacy_pkuseg.pkuseg(model_name=path, user_dict=None if userdict == "none" else (userdict or "default"))


class PkusegTokenizer(PythonTokenizer):
    """pkuseg (a CRF segmenter) with the model resolved from, in order: the ``model=`` option,
    ``$RAG_EVAL_PKUSEG_MODEL``, the default model installed in rag-eval's cache dir.

    ``model=mini`` is the small model shipped with rag-eval (trained on its own text; fine for tests,
    not for measuring); ``model=default`` is pkuseg's real model (``rag-eval models install pkuseg``).
    Models are never downloaded at run time.
    """

    name = "pkuseg"
    summary = "pkuseg CRF word segmentation (spacy-pkuseg) with a local model"
    option_set = with_options(
        PythonTokenizer.option_set,
        Option(
            "model",
            "mini (shipped), default (installed) or a model directory; '' = $RAG_EVAL_PKUSEG_MODEL, then default",
            "",
        ),
        Option("userdict", "'' = pkuseg's built-in dictionary, none, or a path with one word per line", "", _userdict),
    )
    libraries = ("spacy-pkuseg",)
    parallel = True
    install_hint = "pip install 'spacy-pkuseg>=1.0,<1.1'; then: rag-eval models install pkuseg (or use model=mini)"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._segmenter: Any = None

    @classmethod
    def availability(cls) -> str | None:
        """The library, then the model the default options resolve to."""
        reason = cls.missing_libraries()
        if reason is not None:
            return reason
        try:
            resolve_pkuseg_model("")
        except UnavailableError as exc:
            return str(exc)
        return None

    def check_available(self) -> None:
        """The library, then the model these options name (``model=mini`` needs no install)."""
        missing = self.missing_libraries()
        if missing is not None:
            raise UnavailableError(f"tokenizer {self.name!r} is unavailable: {missing}", hint=self.install_hint)
        resolve_pkuseg_model(self.options["model"])

    def fingerprint(self) -> dict[str, str]:
        details = super().fingerprint()
        label, path = resolve_pkuseg_model(self.options["model"])
        details["model"] = f"{label}@sha256:{model_checksum(path)[:16]}"
        userdict = self.options["userdict"]
        if userdict not in ("", "none"):
            details["userdict"] = "sha256:" + hashlib.sha256(Path(userdict).read_bytes()).hexdigest()[:16]
        return details

    def _load(self) -> None:
        label, path = resolve_pkuseg_model(self.options["model"])
        details = self.fingerprint()
        try:
            self._segmenter = _load_pkuseg(
                str(path), details["model"], self.options["userdict"], details.get("userdict", "")
            )
        except Exception as exc:  # files of the right names holding something else: name the model, not only pkuseg
            userdict = self.options["userdict"]
            where = "" if label == str(path) else f" in {path}"
            used = f" with the user dictionary {userdict}" if userdict not in ("", "none") else ""
            raise ModelError(
                f"pkuseg model {label!r}{where}{used} cannot be loaded: {type(exc).__name__}: {exc}",
                hint=f"give a folder written by rag-eval models install or train-pkuseg, or run: {INSTALL_COMMAND}",
            ) from exc

    def _spans(self, text: str) -> Iterator[tuple[int, int]]:
        # pkuseg returns the words of the text in order with whitespace removed; find each in turn.
        position = 0
        for word in self._segmenter.cut(text):
            start = text.find(word, position)
            if start < 0:  # pragma: no cover - pkuseg never rewrites characters of normalised text
                continue
            position = start + len(word)
            yield start, position
