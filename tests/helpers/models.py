"""Fake pkuseg sdists for the model-install tests."""

from __future__ import annotations

import hashlib
import io
import pickle
import tarfile
from pathlib import Path

import srsly

from rag_eval.models import (
    mini_model_dir,
)


def fake_sdist(folder: Path) -> Path:
    """A tarball laid out like pkuseg-0.0.25.tar.gz, holding the shipped small model in pkuseg's old format."""
    features = srsly.read_msgpack(mini_model_dir() / "features.msgpack")
    members = {
        "pkuseg-0.0.25/setup.py": b"# not used\n",
        "pkuseg-0.0.25/pkuseg/models/default/features.pkl": pickle.dumps(features),
        "pkuseg-0.0.25/pkuseg/models/default/weights.npz": (mini_model_dir() / "weights.npz").read_bytes(),
    }
    return write_tarball(folder / "pkuseg-0.0.25.tar.gz", members)


def write_tarball(path: Path, members: dict[str, bytes]) -> Path:
    """A gzipped tarball at ``path`` holding ``members`` (name: bytes)."""
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
