"""rag-eval models: install, list and train pkuseg models."""

from __future__ import annotations

import json
from pathlib import Path

import click

from . import cli


@cli.group("models")
def models_cmd() -> None:
    """Install and list the models that strategies load (pkuseg)."""


@models_cmd.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def models_list_cmd(as_json: bool) -> None:
    """List pkuseg models: the shipped small one and the installed default one.

    \b
    Examples:
      rag-eval models list
    """
    import os

    from ..models import PKUSEG_MODEL_ENV, list_models

    models = list_models()
    chosen = os.environ.get(PKUSEG_MODEL_ENV)
    if as_json:
        click.echo(
            json.dumps(
                {
                    "models": [
                        {
                            "spec": f"pkuseg:model={m.name}",
                            "name": m.name,
                            "installed": m.installed,
                            "path": str(m.path),
                            "bytes": m.size_bytes if m.installed else None,
                            "note": m.note,
                        }
                        for m in models
                    ],
                    "env": {PKUSEG_MODEL_ENV: chosen},
                },
                ensure_ascii=False,
                indent=2,
            )
        )
        return
    for model in models:
        state = f"installed, {model.size_bytes / 1e6:.1f} MB" if model.installed else "not installed"
        click.echo(f"pkuseg:model={model.name}\t{state}\t{model.path}\n    {model.note}")
    click.echo(
        f"${PKUSEG_MODEL_ENV} = {chosen!r}" if chosen else f"${PKUSEG_MODEL_ENV} is not set (pkuseg uses default)"
    )


@models_cmd.command("install")
@click.argument("model", type=click.Choice(["pkuseg"]))
@click.option(
    "--sdist",
    type=click.Path(path_type=Path),
    help="Use an already downloaded pkuseg-0.0.25.tar.gz instead of asking pip.",
)
@click.option("--force", is_flag=True, help="Download and install again even when the model is installed.")
def models_install_cmd(model: str, sdist: Path | None, force: bool) -> None:
    """Install pkuseg's real default model from the pkuseg 0.0.25 sdist on PyPI (no GitHub).

    pip downloads the sdist, rag-eval checks its pinned sha256, extracts pkuseg/models/default into
    the cache dir and converts it to the format spacy-pkuseg loads (49 MB download, 175 MB installed).
    A model already installed this way whose files still have their recorded sha256 is kept, with nothing
    downloaded (--force installs again).

    \b
    Examples:
      rag-eval models install pkuseg
      rag-eval models install pkuseg --sdist downloads/pkuseg-0.0.25.tar.gz
    """
    from ..errors import ModelError
    from ..files.textio import open_regular
    from ..models import install_pkuseg_model

    if sdist is not None and sdist.exists():
        # Checked here, never opened for a blocking read: a FIFO would hang the sha256 and a device never end.
        with open_regular(sdist, ModelError, label=f"--sdist {sdist}"):
            pass
    install_pkuseg_model(sdist, progress=lambda message: click.echo(f"… {message}", err=True), force=force)


@models_cmd.command("train-pkuseg")
@click.argument("training_text", type=click.Path(path_type=Path), required=False)
@click.option(
    "-o",
    "--output",
    type=click.Path(path_type=Path),
    required=True,
    help="Folder to write features.msgpack and weights.npz into.",
)
@click.option("--iterations", default=20, show_default=True, help="Training iterations.")
def models_train_cmd(training_text: Path | None, output: Path, iterations: int) -> None:
    """Train a small pkuseg model from segmented text (default: the text the shipped mini model came from).

    Training shuffles without a seed, so the result differs slightly run to run; rag-eval ships one
    trained model so tests are reproducible.

    \b
    Examples:
      rag-eval models train-pkuseg -o out/my-pkuseg
      rag-eval models train-pkuseg segmented.txt -o out/my-pkuseg --iterations 10
    """
    from ..models import mini_training_text, train_pkuseg_model

    train_pkuseg_model(training_text or mini_training_text(), output, iterations=iterations)
    click.echo(f"wrote {output}")
