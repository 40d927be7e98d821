"""The ``rag-eval`` command line: thin wrappers that parse options, call the library, format results."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable, TypeVar

import click

from . import __version__
from .errors import RagEvalError

F = TypeVar("F", bound=Callable[..., Any])


class _Group(click.Group):
    """Turns every RagEvalError into one line on stderr and exit status 1 (``--debug`` shows the traceback)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except RagEvalError as exc:
            if ctx.meta.get("rag_eval.debug"):
                raise
            click.echo(f"error: {exc}", err=True)
            if exc.hint:
                click.echo(f"hint: {exc.hint}", err=True)
            ctx.exit(1)
        except OSError as exc:  # a file system problem rag-eval did not anticipate: still one line
            if ctx.meta.get("rag_eval.debug"):
                raise
            where = f": {exc.filename}" if exc.filename else ""
            click.echo(f"error: {exc.strerror or exc}{where}", err=True)
            ctx.exit(1)


def _versions() -> str:
    import platform
    import sqlite3

    from .tokenizers import TOKENIZERS
    from .tokenizers.base import library_version

    lines = [f"rag-eval {__version__}", f"python {platform.python_version()}", f"sqlite {sqlite3.sqlite_version}"]
    libraries: dict[str, None] = {}
    for name in TOKENIZERS:
        try:
            cls = TOKENIZERS[name]
        except RagEvalError:
            continue
        libraries.update(dict.fromkeys(getattr(cls, "libraries", ())))
    libraries["opencc"] = None
    lines += [f"{lib} {library_version(lib)}" for lib in libraries]
    return "\n".join(lines)


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(_versions())
        ctx.exit()


def _set_debug(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    ctx.meta["rag_eval.debug"] = value


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Print the versions of rag-eval, SQLite and every tokenizer library, then exit.")
@click.option("--debug", is_flag=True, expose_value=False, is_eager=True, callback=_set_debug,
              help="Show the full traceback on errors.")
def cli() -> None:
    """Pick a tokenization strategy for Chinese full-text search on SQLite FTS5 from evidence.

    \b
    Start here:
      rag-eval tokenizers                     list strategies, their options and specs
      rag-eval tokenize -t jieba 导出文件保留三十天   see how one strategy cuts a text
      rag-eval models install pkuseg          install pkuseg's real model (offline after that)

    A strategy is named by a spec, NAME[:key=value,...], for example bigram, jieba:mode=precise,
    pkuseg:model=mini or bigram:t2s=true.
    """


@cli.command("tokenizers")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list instead of a table.")
def tokenizers_cmd(as_json: bool) -> None:
    """List every registered tokenizer: available or why not, its options and spec."""
    from .tokenizers import TOKENIZERS
    from .tokenizers.listing import describe_all

    rows = describe_all(TOKENIZERS)
    if as_json:
        click.echo(json.dumps([row._asdict() for row in rows], ensure_ascii=False, indent=2))
        return
    for row in rows:
        status = click.style("available", fg="green") if row.available else click.style("unavailable", fg="red")
        click.echo(f"{click.style(row.name, bold=True)}  ({row.kind})  {status}")
        if row.summary:
            click.echo(f"  {row.summary}")
        if not row.available:
            click.echo(f"  why: {row.reason}")
        for option in row.options:
            click.echo(f"  option {option}")
        if row.spec:
            click.echo(f"  spec: {row.spec}")
        if row.hint:
            click.echo(f"  {'install' if not row.available else 'try'}: {row.hint}")
        click.echo()


@cli.command("tokenize")
@click.option("-t", "--tokenizer", "specs", multiple=True, metavar="SPEC",
              help="Tokenizer spec, e.g. bigram, jieba:mode=precise, pkuseg:model=mini. Repeat to compare; "
              "omit to compare every available strategy.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON: per spec, a list of {text, start, end}.")
@click.argument("text")
def tokenize_cmd(specs: tuple[str, ...], as_json: bool, text: str) -> None:
    """Show how strategies cut TEXT (use - to read standard input as UTF-8).

    With one -t, prints one token per line: start, end, text (character offsets into TEXT, end
    exclusive). With several -t, or none, prints each strategy's terms side by side.
    """
    from .tokenizers import tokenize_many

    if text == "-":
        text = _read_stdin()
    results = tokenize_many(list(specs), text)
    if as_json:
        payload = [
            {"spec": r.spec, "tokens": [t._asdict() for t in r.tokens]} if r.error is None
            else {"spec": r.system, "error": r.error}
            for r in results
        ]
        click.echo(json.dumps(payload[0] if len(specs) == 1 else payload, ensure_ascii=False))
        return
    if len(specs) == 1:
        only = results[0]
        click.echo(f"# {only.spec}: {len(only.tokens)} tokens")
        for token in only.tokens:
            click.echo(f"{token.start}\t{token.end}\t{token.text}")
        return
    width = max(len(r.system) for r in results)
    for result in results:
        if result.error is not None:
            click.echo(f"{result.system:<{width}}  " + click.style(f"unavailable: {result.error}", fg="red"))
        else:
            click.echo(f"{result.system:<{width}}  " + " | ".join(t.text for t in result.tokens))


def _read_stdin() -> str:
    data = sys.stdin.buffer.read() if hasattr(sys.stdin, "buffer") else sys.stdin.read().encode()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        from .errors import InvalidTextError

        raise InvalidTextError(f"standard input is not valid UTF-8 at byte {exc.start}") from None


@cli.group("models")
def models_cmd() -> None:
    """Install and list the models that strategies load (pkuseg)."""


@models_cmd.command("list")
def models_list_cmd() -> None:
    """List pkuseg models: the shipped small one and the installed default one."""
    from .models import PKUSEG_MODEL_ENV, list_models

    import os

    for model in list_models():
        state = f"installed, {model.size_bytes / 1e6:.1f} MB" if model.installed else "not installed"
        click.echo(f"pkuseg:model={model.name}\t{state}\t{model.path}\n    {model.note}")
    chosen = os.environ.get(PKUSEG_MODEL_ENV)
    click.echo(f"${PKUSEG_MODEL_ENV} = {chosen!r}" if chosen else f"${PKUSEG_MODEL_ENV} is not set (pkuseg uses default)")


@models_cmd.command("install")
@click.argument("model", type=click.Choice(["pkuseg"]))
@click.option("--sdist", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Use an already downloaded pkuseg-0.0.25.tar.gz instead of asking pip.")
def models_install_cmd(model: str, sdist: Path | None) -> None:
    """Install pkuseg's real default model from the pkuseg 0.0.25 sdist on PyPI (no GitHub).

    pip downloads the sdist, rag-eval checks its pinned sha256, extracts pkuseg/models/default into
    the cache dir and converts it to the format spacy-pkuseg loads (49 MB download, 167 MB installed).
    """
    from .models import install_pkuseg_model

    install_pkuseg_model(sdist, progress=lambda message: click.echo(f"… {message}", err=True))


@models_cmd.command("train-pkuseg")
@click.argument("training_text", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=False)
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder to write features.msgpack and weights.npz into.")
@click.option("--iterations", default=20, show_default=True, help="Training iterations.")
def models_train_cmd(training_text: Path | None, output: Path, iterations: int) -> None:
    """Train a small pkuseg model from segmented text (default: the text the shipped mini model came from).

    Training shuffles without a seed, so the result differs slightly run to run; rag-eval ships one
    trained model so tests are reproducible.
    """
    from .models import mini_training_text, train_pkuseg_model

    train_pkuseg_model(training_text or mini_training_text(), output, iterations=iterations)
    click.echo(f"wrote {output}")


@cli.group("index")
def index_cmd() -> None:
    """Build, inspect, list and verify FTS5 indexes."""


def _builder_choices() -> list[str]:
    from .builders import BUILDERS

    return sorted(BUILDERS)


@index_cmd.command("build")
@click.argument("source", type=click.Path(exists=True, path_type=Path))
@click.option("-o", "--output", "index_path", required=True, type=click.Path(dir_okay=False, path_type=Path),
              help="Index file to create or update (SQLite).")
@click.option("-b", "--builder", "builder_spec", required=True, metavar="SPEC",
              help="Builder spec: lines (manifest.json + .txt), sections (Markdown folder), passages (BEIR corpus.jsonl); "
              "options as NAME:key=value, e.g. sections:max_chars=1500.")
@click.option("-t", "--tokenizer", "tokenizer_spec", default="bigram", show_default=True, metavar="SPEC",
              help="Tokenizer spec, e.g. jieba, pkuseg:model=mini, unicode61.")
@click.option("--json", "as_json", is_flag=True, help="Print the build report as JSON.")
def index_build_cmd(source: Path, index_path: Path, builder_spec: str, tokenizer_spec: str, as_json: bool) -> None:
    """Build or sync an index from SOURCE in one transaction.

    Everything is validated and read before anything is written; a failed build leaves the previous
    index exactly as it was. Re-running on the same index re-tokenizes only files whose sha256 changed.
    """
    from .writer import build

    with _progress() as progress:
        report = build(source, index_path, builder=builder_spec, tokenizer=tokenizer_spec, progress=progress)
    if as_json:
        click.echo(json.dumps(report.__dict__))
        return
    click.echo(f"indexed {report.chunks} chunks from {report.files} files into {index_path} "
               f"({report.index_bytes / 1e6:.2f} MB) in {report.seconds:.2f} s; "
               f"tokenized {report.chunks_tokenized} chunks from {report.files_tokenized} changed files "
               f"(tokenizer load {report.tokenizer_load_seconds:.2f} s, tokenize {report.tokenize_seconds:.2f} s, "
               f"write {report.write_seconds:.2f} s)")


class _progress:
    """A rich progress bar for builds over 200 KB of source, a few hundred chunks (stderr, terminals only)."""

    def __enter__(self) -> Callable[[str, int, int], None]:
        self._bar: Any = None
        return self.update

    def update(self, phase: str, done: int, total: int) -> None:
        if total < 200_000 or not sys.stderr.isatty():
            return
        if self._bar is None:
            from rich.progress import Progress

            self._bar = Progress(transient=True)
            self._bar.start()
            self._task = self._bar.add_task(phase, total=total)
        self._bar.update(self._task, completed=done, description=phase)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


@index_cmd.command("info")
@click.argument("index_path", metavar="INDEX", type=click.Path(exists=True, dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def index_info_cmd(index_path: str, as_json: bool) -> None:
    """Show what an index holds: builder, tokenizer spec, counts, size, build time, corpus checksum."""
    from .store import Index, index_size

    with Index.open(index_path) as index:
        info = {**index.meta, "index_bytes": index_size(index_path)}
    if as_json:
        click.echo(json.dumps(info, ensure_ascii=False, indent=2))
        return
    for key in sorted(info):
        click.echo(f"{key}: {info[key]}")


@index_cmd.command("list")
@click.argument("index_path", metavar="INDEX", type=click.Path(exists=True, dir_okay=False))
@click.option("--category", help="Only this category (top-level folder).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def index_list_cmd(index_path: str, category: str | None, as_json: bool) -> None:
    """List the documents (lines) or sections (sections, passages) of an index."""
    from .read import list_entries
    from .store import Index

    with Index.open(index_path) as index:
        entries = list_entries(index, category=category)
    if as_json:
        click.echo(json.dumps(entries, ensure_ascii=False, indent=2))
        return
    for entry in entries:
        if "anchor" in entry:
            click.echo(f"{entry['path']}#{entry['anchor']}\t{entry['category']}\t{entry['heading_path'] or entry['title']}")
        else:
            click.echo(f"{entry['doc']}@{entry['revision']}\t{entry['status']}\t{entry['expires'] or '-'}\t"
                       f"{entry['path']}\t{entry['lines']} lines")


@index_cmd.command("verify")
@click.argument("index_path", metavar="INDEX", type=click.Path(exists=True, dir_okay=False))
@click.option("--root", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Corpus folder to check against (default: the one recorded at build time).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def index_verify_cmd(index_path: str, root: Path | None, as_json: bool) -> None:
    """Check every source id against the files: ok, stale or missing; exit 1 if any is not ok."""
    from .read import verify_index
    from .store import Index

    with Index.open(index_path) as index:
        statuses = verify_index(index, root)
    if as_json:
        click.echo(json.dumps([s.__dict__ for s in statuses], ensure_ascii=False, indent=2))
    else:
        for status in statuses:
            click.echo(f"{status.status}\t{status.key}")
        counts = {state: sum(s.status == state for s in statuses) for state in ("ok", "stale", "missing")}
        click.echo(f"# {counts['ok']} ok, {counts['stale']} stale, {counts['missing']} missing", err=True)
    if any(s.status != "ok" for s in statuses):
        sys.exit(1)


@cli.command("search")
@click.argument("index_path", metavar="INDEX", type=click.Path(exists=True, dir_okay=False))
@click.argument("query")
@click.option("--mode", type=click.Choice(["and", "or", "phrase"]),
              help="and: every term; or: any term, ranked; phrase: the exact text. Default: the builder's.")
@click.option("--limit", type=int, help="Number of hits (default and maximum recorded by the builder).")
@click.option("--as-of", help="Only current chunks whose expiry date is after this YYYY-MM-DD date.")
@click.option("--category", help="Only this category (top-level folder).")
@click.option("--path-prefix", help="Only paths starting with this prefix.")
@click.option("--json", "as_json", is_flag=True, help="Print the agent tool result (JSON with provenance).")
@click.option("--explain", is_flag=True, help="Show the normalised query, its tokens, the MATCH expression and hits per term.")
def search_cmd(index_path: str, query: str, mode: str | None, limit: int | None, as_of: str | None,
               category: str | None, path_prefix: str | None, as_json: bool, explain: bool) -> None:
    """Search INDEX for QUERY, best bm25 first (ties by chunk id), with highlighted snippets."""
    from .search import search
    from .store import Index

    with Index.open(index_path) as index:
        result = search(index, query, mode=mode, limit=limit, as_of=as_of, category=category,
                        path_prefix=path_prefix, explain=explain)
    if as_json:
        payload = {"kind": "document_evidence", "query": query, "as_of": as_of,
                   "hits": [hit.as_dict() for hit in result.hits], "action_authority": False}
        if explain:
            payload["explain"] = result.explain
        click.echo(json.dumps(payload, ensure_ascii=False, indent=2))
        return
    if explain:
        for key, value in result.explain.items():
            click.echo(f"# {key}: {json.dumps(value, ensure_ascii=False)}")
    for hit in result.hits:
        chunk = hit.chunk
        where = f"{chunk.path}:{chunk.line}" if chunk.line is not None else (
            f"{chunk.path}#{chunk.anchor}" if chunk.anchor else chunk.key)
        click.echo(f"{hit.rank}\t{hit.score:.4f}\t{where}\t{hit.snippet}")
    if not result.hits:
        click.echo("no hits", err=True)


@cli.command("read")
@click.argument("index_path", metavar="INDEX", type=click.Path(exists=True, dir_okay=False))
@click.argument("target", metavar="PATH[#ANCHOR]")
@click.option("--root", type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="Corpus folder for whole-file reads (default: the one recorded at build time).")
def read_cmd(index_path: str, target: str, root: Path | None) -> None:
    """Print a stored section (PATH#ANCHOR) or a whole source file (PATH) that stays under the root."""
    from .read import read
    from .store import Index

    with Index.open(index_path) as index:
        click.echo(read(index, target, root=root))


@cli.group("datasets")
def datasets_cmd() -> None:
    """List, inspect, export and convert labelled datasets."""


@datasets_cmd.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def datasets_list_cmd(as_json: bool) -> None:
    """List the datasets shipped with rag-eval, with their counts."""
    from .eval.shipped import entry, load_shipped, shipped_ids

    rows = []
    for dataset_id in shipped_ids():
        stats = load_shipped(dataset_id).stats()
        rows.append({**stats, "builder": entry(dataset_id)["builder"], "description": entry(dataset_id)["description"]})
    if as_json:
        click.echo(json.dumps(rows, ensure_ascii=False, indent=2))
        return
    for row in rows:
        click.echo(f"{row['id']}\t{row['builder']}\t{row['passages']} passages\t{row['queries']} queries "
                   f"({row['judged_queries']} judged)\t{row['qrels']} qrels\n    {row['description']}")


@datasets_cmd.command("show")
@click.argument("reference", metavar="ID|DIR")
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON (no datasheet).")
def datasets_show_cmd(reference: str, as_json: bool) -> None:
    """Print a dataset's datasheet and statistics: passages, queries, qrels per query, kinds, lengths."""
    from .eval.formats import load_dataset
    from .eval.shipped import datasheet, shipped_ids

    dataset = load_dataset(reference)
    stats = dataset.stats()
    stats["checksum"] = dataset.checksum()
    if as_json:
        click.echo(json.dumps(stats, ensure_ascii=False, indent=2))
        return
    if reference in shipped_ids():
        click.echo(datasheet(reference).rstrip() + "\n")
    click.echo("# statistics")
    for key, value in stats.items():
        click.echo(f"{key}: {json.dumps(value, ensure_ascii=False) if isinstance(value, dict) else value}")


@datasets_cmd.command("export")
@click.argument("dataset_id", metavar="ID")
@click.argument("target", metavar="DIR", type=click.Path(path_type=Path))
def datasets_export_cmd(dataset_id: str, target: Path) -> None:
    """Write a shipped set to a new folder: corpus/ in its builder's layout plus BEIR files.

    Use DIR/corpus with `rag-eval index build` and `rag-eval index verify --root`, and DIR itself as a
    BEIR folder with other tools. An existing DIR is never overwritten.
    """
    from .eval.shipped import entry, export_shipped

    export_shipped(dataset_id, target)
    info = entry(dataset_id)
    click.echo(f"wrote {target}: corpus/ ({info['builder']} layout), corpus.jsonl, queries.jsonl, qrels/test.tsv, README.md")
    click.echo(f"build it with: rag-eval index build {target / 'corpus'} -b {info['builder']} -t bigram -o {dataset_id}.sqlite")


@datasets_cmd.command("convert")
@click.argument("source_format", metavar="FORMAT", type=click.Choice(["squad"]))
@click.argument("inputs", metavar="FILE...", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(path_type=Path), help="New BEIR folder to write.")
def datasets_convert_cmd(source_format: str, inputs: tuple[Path, ...], output: Path) -> None:
    """Convert reading-comprehension JSON (SQuAD, CMRC 2018, DRCD, DuReader-robust) to a BEIR retrieval set.

    Passages are the distinct paragraphs, queries the distinct questions, and each question's relevant
    passages the paragraphs it was asked on. Duplicates are merged and counted.
    """
    from .errors import DatasetError
    from .eval.beir import write_beir
    from .eval.squad import convert_squad

    if output.exists():
        raise DatasetError(f"{output} already exists; convert writes a new folder and never overwrites")
    dataset, summary = convert_squad(list(inputs), dataset_id=output.name)
    write_beir(dataset, output)
    click.echo(json.dumps(summary.__dict__))


@cli.command("compare")
@click.argument("dataset", metavar="DATASET")
@click.option("-t", "--tokenizer", "tokenizers", multiple=True, metavar="SPEC",
              help="A tokenizer to compare (repeat). Default: every available strategy.")
@click.option("--builder", "builder_spec", metavar="SPEC", help="Builder spec (default: the dataset's; BEIR folders use passages).")
@click.option("--mode", type=click.Choice(["and", "or", "phrase"]), help="Query mode (default: the dataset's).")
@click.option("--metric", "metrics", multiple=True, metavar="NAME",
              help="ir-measures name, e.g. nDCG@10, R@100, RR@10, P@1, MAP@100 (repeat). Default: those six.")
@click.option("--reference-system", "reference", metavar="SPEC", help="System to test the others against (default: bigram).")
@click.option("--systems", "systems_file", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="TOML file of [[system]] tables (tokenizer, builder, mode), instead of -t.")
@click.option("--run", "outside_runs", multiple=True, metavar="NAME=FILE",
              help="A TREC run file from another engine to put in the same table (repeat).")
@click.option("--no-text", is_flag=True, help="Print and write query ids only, never query text.")
@click.option("--against", "baseline_file", type=click.Path(dir_okay=False, path_type=Path),
              help="A previous report.json or baseline: print regressions, improvements and stale systems.")
@click.option("--fail-on-regression", is_flag=True, help="With --against: exit 1 when any metric drops by more than the tolerance.")
@click.option("--tolerance", type=float, default=0.005, show_default=True, help="Largest drop that is not a regression.")
@click.option("--write-baseline", "write_baseline", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write this run as a baseline file (identities and mean metrics) for later --against.")
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Folder for report.json, report.md, report.html, runs/ and per_query.tsv.")
def compare_cmd(dataset: str, tokenizers: tuple[str, ...], builder_spec: str | None, mode: str | None,
                metrics: tuple[str, ...], reference: str | None, systems_file: Path | None,
                outside_runs: tuple[str, ...], no_text: bool, baseline_file: Path | None, fail_on_regression: bool,
                tolerance: float, write_baseline: Path | None, output: Path) -> None:
    """Build one index per system, run every labelled query, and compare quality, latency and cost.

    DATASET is a shipped id (rag-eval datasets list) or a BEIR folder. A system is a tokenizer spec with
    a builder and a query mode; indexes are cached by corpus checksum and system spec, so adding one
    more system only builds that one. Significance is a paired randomization test against the
    reference system, Holm-corrected.
    """
    from .eval.compare import OutsideRun, compare, default_systems, load_systems_file
    from .eval.formats import load_dataset
    from .eval.gate import baseline_of, check, load_baseline
    from .eval.report import write_outputs
    from .eval.runner import System

    if fail_on_regression and baseline_file is None:
        raise click.UsageError("--fail-on-regression needs --against FILE")
    baseline = load_baseline(baseline_file) if baseline_file is not None else None
    data = load_dataset(dataset)
    if systems_file is not None:
        systems = load_systems_file(systems_file)
    elif tokenizers:
        systems = [System(spec, builder_spec or "", mode or "") for spec in tokenizers]
    else:
        systems = default_systems(data, builder_spec, mode)
    outside = []
    for item in outside_runs:
        name, eq, file = item.partition("=")
        if not eq or not name or not file:
            raise click.BadParameter(f"expected NAME=FILE, got {item!r}", param_hint="--run")
        outside.append(OutsideRun(name, Path(file)))
    with _compare_progress() as progress:
        report, runs = compare(data, systems, metrics=list(metrics) or None, reference=reference, outside=outside,
                               no_text=no_text, progress=progress)
    gate = check(report, baseline, tolerance=tolerance) if baseline is not None else None
    if gate is not None:
        report["gate"] = {"against": str(baseline_file), "tolerance": tolerance, "compared": gate.compared,
                          "regressions": gate.regressions, "improvements": gate.improvements, "stale": gate.stale,
                          "unmatched": gate.unmatched}
    write_outputs(report, runs, output)
    _print_comparison(report)
    click.echo(f"wrote {output}/report.json, report.md, report.html, per_query.tsv and {len(runs)} run files", err=True)
    if write_baseline is not None:
        write_baseline.parent.mkdir(parents=True, exist_ok=True)
        write_baseline.write_text(json.dumps(baseline_of(report), ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        click.echo(f"wrote baseline {write_baseline}", err=True)
    if gate is not None:
        for line in gate.lines():
            click.echo(line, err=True)
        click.echo(f"gate: {gate.compared} systems compared with {baseline_file}: {len(gate.regressions)} regressions, "
                   f"{len(gate.improvements)} improvements, {len(gate.stale)} stale", err=True)
        if fail_on_regression and gate.regressions:
            from .errors import RagEvalError

            raise RagEvalError(f"{len(gate.regressions)} metric regressions against {baseline_file} "
                               f"(tolerance {tolerance}); see the REGRESSION lines above")


class _compare_progress:
    """One progress bar per system and phase on a terminal; nothing otherwise."""

    def __enter__(self) -> Callable[[str, str, int, int], None]:
        self._bar: Any = None
        self._tasks: dict[tuple[str, str], Any] = {}
        return self.update

    def update(self, system: str, phase: str, done: int, total: int) -> None:
        if not sys.stderr.isatty():
            return
        if self._bar is None:
            from rich.console import Console
            from rich.progress import Progress

            self._bar = Progress(console=Console(stderr=True), transient=True)
            self._bar.start()
        key = (system, phase)
        if key not in self._tasks:
            self._tasks[key] = self._bar.add_task(f"{system[:40]} {phase}", total=total)
        self._bar.update(self._tasks[key], completed=done)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def _print_comparison(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    metrics = report["metrics"]
    rows = report["systems"]
    shared = {(row["builder"], row["mode"]) for row in rows if row.get("mode")}
    # With one builder and mode for every system, the tokenizer alone names a row.
    label = (lambda row: row["name"].split(" | ")[0]) if len(shared) == 1 else (lambda row: row["name"])
    setting = f"builder {next(iter(shared))[0]}, mode {next(iter(shared))[1]}; " if len(shared) == 1 else ""
    table = Table(title=f"{report['dataset']['id']}: {report['judged_queries']} judged queries; {setting}reference "
                        f"{label({'name': report['reference'] or ''})} (↑/↓ significant, Holm p < 0.05)")
    table.add_column("system")
    for metric in metrics:
        table.add_column(metric, justify="right")
    table.add_column("search p50 ms", justify="right")
    table.add_column("no-answer false hits", justify="right")
    best = {m: max(row["metrics"][m] for row in report["systems"]) for m in metrics}
    for row in rows:
        cells = []
        for metric in metrics:
            value = row["metrics"][metric]
            text = f"{value:.4f}"
            sig = row.get("significance", {}).get(metric)
            if sig and sig["significant"]:
                text += "↑" if sig["delta"] > 0 else "↓"
            cells.append(f"[bold green]{text}[/]" if value == best[metric] else text)
        latency = row.get("latency_ms", {}).get("search", {}).get("median")
        false_hits = row.get("no_answer_false_hit_rate")
        table.add_row(label(row), *cells, "-" if latency is None else f"{latency:.3f}",
                      "-" if false_hits is None else f"{false_hits:.2f}")
    # Logs and pipes get the whole table rather than an 80-column squeeze.
    Console(width=None if sys.stdout.isatty() else 160).print(table)


@cli.command("evaluate")
@click.argument("run_file", metavar="RUN", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("qrels_file", metavar="QRELS", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--metric", "metrics", multiple=True, metavar="NAME", help="ir-measures name (repeat). Default: the six headline metrics.")
@click.option("--per-query", is_flag=True, help="Also print each judged query's values.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def evaluate_cmd(run_file: Path, qrels_file: Path, metrics: tuple[str, ...], per_query: bool, as_json: bool) -> None:
    """Score a TREC run file against qrels (TREC four-column or BEIR TSV) with trec_eval's definitions."""
    from .eval.compare import read_run
    from .eval.metrics import DEFAULT_METRICS, evaluate
    from .eval.records import Qrel
    from .eval.trec import read_trec_qrels

    first = qrels_file.read_text(encoding="utf-8").split("\n", 1)[0]
    if "\t" in first:
        from .eval.beir import read_qrels

        qrels = read_qrels(qrels_file)
    else:
        qrels = read_trec_qrels(qrels_file)
    qrel_list = [Qrel(q, d, r) for q, docs in qrels.items() for d, r in docs.items()]
    means, values = evaluate(qrel_list, read_run(run_file), list(metrics) or list(DEFAULT_METRICS))
    if as_json:
        click.echo(json.dumps({"mean": means, **({"per_query": values} if per_query else {})}, indent=2))
        return
    if per_query:
        for query_id, row in values.items():
            for metric, value in row.items():
                click.echo(f"{metric}\t{query_id}\t{value:.4f}")
    for metric, value in means.items():
        click.echo(f"{metric}\tall\t{value:.4f}")


def _show_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                  file: Any = None, line: str | None = None) -> None:
    click.echo(f"warning: {message}", err=True)


def main() -> None:
    """Console-script entry point."""
    import warnings

    warnings.showwarning = _show_warning
    cli(prog_name="rag-eval")
