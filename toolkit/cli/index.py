"""rag-eval index build/info/list/verify, search and read."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..engines.base import AUTO, search_engine_names
from ..search.query import MODES
from . import cli
from .params import TEXT, UTF8_PATH
from .progress import Bars

if TYPE_CHECKING:
    from ..index.writer import BuildReport
    from ..search.searching import SearchResult


class EngineChoice(click.Choice):
    """The engines ``search`` and ``index build`` offer (``extra`` first, e.g. ``auto``), read from the engine
    registry when first needed: a plug-in's engine is a choice with no change here, and ``--help`` of other
    commands loads no engine."""

    def __init__(self, *extra: str) -> None:
        self.extra = extra
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        return (*self.extra, *search_engine_names())

    @choices.setter
    def choices(self, value: object) -> None:
        pass  # the registry's, not given

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        # An engine with options (impact:k1=0.9,b=0.4): its name is a choice; the library checks the options.
        if isinstance(value, str) and ":" in value:
            name, _, options = value.partition(":")
            return f"{super().convert(name.strip(), param, ctx)}:{options}"
        return super().convert(value, param, ctx)


#: ``--category``: search and index list keep one category alike.
category_option = click.option("--category", type=TEXT, help="Only this category (top-level folder).")
#: ``--json`` of the listing commands.
json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON.")


@cli.group("index")
def index_cmd() -> None:
    """Build, inspect, list and verify FTS5 indexes."""


@index_cmd.command("build")
@click.argument("source", type=UTF8_PATH)
@click.option(
    "-o",
    "--output",
    "index_path",
    required=True,
    type=click.Path(),  # a str: pathlib would drop a trailing '/', which names a folder, not an index file
    help="Index file to create or update (SQLite), outside SOURCE's folder.",
)
@click.option(
    "-b",
    "--builder",
    "builder_spec",
    metavar="SPEC",
    type=TEXT,
    help="Builder spec: lines (manifest.json + .txt), sections (Markdown folder), passages (BEIR corpus.jsonl); "
    "options as NAME:key=value, e.g. sections:max_chars=1500. Default: the one the index records (a sync), "
    "else the one SOURCE's layout calls for (a manifest.json: lines; a corpus.jsonl: passages; Markdown: sections).",
)
@click.option(
    "-t",
    "--tokenizer",
    "tokenizer_spec",
    metavar="SPEC",
    type=TEXT,
    help="Tokenizer spec, e.g. jieba, pkuseg:model=mini, or a hybrid such as unigram^2+bigram. Default: the one "
    "the index records (a sync), else bigram.",
)
@click.option(
    "--processing",
    metavar="SPEC",
    type=TEXT,
    help="Query processing recorded in the index and used by its searches, e.g. stopwords=zh,max_df=0.3. "
    "Default: what the index records (a sync); '' for none.",
)
@click.option(
    "--from",
    "system_file",
    type=click.Path(path_type=Path),
    help="Take the tokenizer, builder and query processing from a systems TOML file's one [[system]] "
    "(e.g. the recommendation.toml `rag-eval tune` writes); -t, -b and --processing override it.",
)
@click.option(
    "--engine",
    type=EngineChoice(AUTO),
    help="Recorded as the index's search engine. impact: also store bm25 impact postings, so searches rank "
    "from them (FTS5's exact scores and order, measured faster for every strategy: reports/latency.md; "
    "a larger file and a longer build); impact:k1=0.9,b=0.4: the same postings, ranked with bm25 at that k1 "
    "and b; fts5: FTS5's bm25 statement alone; auto: impact. Default: the one the index records (a sync), "
    "else auto.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the build report as JSON.")
def index_build_cmd(
    source: Path,
    index_path: str,
    builder_spec: str | None,
    tokenizer_spec: str | None,
    processing: str | None,
    system_file: Path | None,
    engine: str | None,
    as_json: bool,
) -> None:
    """Build or sync an index from SOURCE in one transaction.

    Everything is validated before anything is written; a failed or killed build leaves the previous
    index exactly as it was. Re-running on the same index re-tokenizes only chunks whose text changed
    (everything when the builder or tokenizer spec changed); what -b, -t, --processing and --engine leave
    out is what the index records. INDEX must be new or an index rag-eval
    wrote: any other file is refused. A progress bar shows on a terminal.

    \b
    Examples:
      rag-eval index build docs/ -t jieba -o docs.sqlite       # Markdown: the sections builder
      rag-eval index build corpus/ -b lines -t bigram -o evidence.sqlite
      rag-eval index build beir/corpus.jsonl -b passages:title_weight=2 -t unigram -o passages.sqlite
      rag-eval index build docs/ -b sections -t unigram^2+bigram^2+jieba^2 --processing stopwords=zh -o docs.sqlite
      rag-eval index build docs/ -b sections --from out/tune/recommendation.toml -o docs.sqlite
      rag-eval index build sentences/ -b passages -t bigram --engine impact:k1=0.6,b=0.3 -o sentences.sqlite
    """
    from ..index.writer import build

    _check_index_target(index_path, source)
    if tokenizer_spec is not None and not tokenizer_spec.strip():
        raise click.UsageError("-t is empty: name a tokenizer spec, e.g. -t jieba (or leave -t out)")
    if builder_spec is not None and not builder_spec.strip():
        raise click.UsageError("-b is empty: name a builder spec, e.g. -b sections (or leave -b out)")
    if system_file is not None:
        tokenizer_spec, builder_spec, processing, engine = _from_system(
            system_file, tokenizer_spec, builder_spec, processing, engine
        )
    with Bars() as progress:
        report = build(
            source,
            index_path,
            builder=builder_spec or None,
            tokenizer=tokenizer_spec or None,
            processing=processing,
            progress=progress,
            engine=engine,
        )
    click.echo(json.dumps(report.__dict__) if as_json else _build_summary(report, index_path))


def _check_index_target(index_path: str, source: Path) -> None:
    """Refused before anything is read: the working folder, one of its parents, a path ending in '..' (whose
    folders the build would create before finding it names an existing folder) or in '/', NUL, a parent that is a
    file, a name SQLite takes for another database's side file (X-wal, X-shm, X-journal); nor inside the folder it
    indexes, with its side files (-wal, -shm, the hidden file a new build writes)."""
    from ..files.outputs import checked_target, refuse_inside_source

    checked_target(index_path, what="index", file=True)
    refuse_inside_source(index_path, [source], what="index")


def _from_system(
    system_file: Path, tokenizer_spec: str | None, builder_spec: str | None, processing: str | None, engine: str | None
) -> tuple[str | None, str | None, str | None, str | None]:
    """-t, -b, --processing and --engine with what they leave out taken from the systems file's one system: its
    engine (with its options; a peer's build) when that build writes postings (a build's own default is the impact
    engine's anyway)."""
    from ..engines.base import engine_class, get_engine
    from ..eval.compare.compare import one_system

    chosen = one_system(system_file)
    named = get_engine(chosen.engine)
    if engine is None and engine_class(named.build_engine).tables:
        # The system's own engine when search uses it (its options, k1 and b say, recorded), else its build's.
        engine = named.build_engine if named.peer else named.system
    processing = processing if processing is not None else chosen.query
    return tokenizer_spec or chosen.tokenizer, builder_spec or chosen.builder or None, processing, engine


def _build_summary(report: BuildReport, index_path: str) -> str:
    from ..files.textio import counted

    return (
        f"indexed {counted(report.chunks, 'chunk')} ({report.extra['chunks_are']}) from "
        f"{counted(report.files, 'file')} into {index_path} "
        f"({report.index_bytes / 1e6:.2f} MB) in {report.seconds:.2f} s; "
        f"tokenized {counted(report.chunks_tokenized, 'chunk')} from "
        f"{counted(report.files_tokenized, 'changed file')} "
        f"(tokenizer load {report.tokenizer_load_seconds:.2f} s, tokenize {report.tokenize_seconds:.2f} s, "
        f"write {report.write_seconds:.2f} s)"
        + (f"; tokenized in {report.extra['tokenize_plan']}" if report.extra.get("tokenize_plan") else "")
    )


_LINE_BREAKS = re.compile(r"\s*[\t\n\r\v\f\x1c-\x1e\x85\u2028\u2029]\s*")
#: The other control characters (ESC starts a terminal's escape sequences): shown as their Unicode pictures
#: (U+2400 block), C1 controls as U+FFFD, so a corpus's text cannot drive the terminal that prints a hit.
_CONTROLS = re.compile(r"[\x00-\x08\x0e-\x1b\x1f\x7f\x80-\x84\x86-\x9f]")


def _one_line(text: str) -> str:
    """``text`` as one line of a tab-separated listing: line breaks and tabs as one space, controls shown."""
    shown = _CONTROLS.sub(lambda m: chr(0x2400 + min(ord(m.group()), 0x21)) if m.group() <= "\x7f" else "\ufffd", text)
    return _LINE_BREAKS.sub(" ", shown)


@index_cmd.command("info")
@click.argument("index_path", metavar="INDEX", type=click.Path())
@json_option
def index_info_cmd(index_path: str, as_json: bool) -> None:
    """Show what an index holds: builder, tokenizer spec, counts, size, build time, corpus checksum.

    \b
    Examples:
      rag-eval index info handbook.sqlite
      rag-eval index info handbook.sqlite --json
    """
    from ..index.store import Index, index_size

    with Index.open(index_path) as index:
        info = {**index.meta, "index_bytes": index_size(index_path)}
    if as_json:
        click.echo(json.dumps(info, ensure_ascii=False, indent=2))
        return
    for key in sorted(info):
        click.echo(f"{key}: {info[key]}")


@index_cmd.command("list")
@click.argument("index_path", metavar="INDEX", type=click.Path())
@category_option
@json_option
def index_list_cmd(index_path: str, category: str | None, as_json: bool) -> None:
    """List the documents (lines) or sections (sections, passages) of an index.

    Sections print their key (PATH#ANCHOR, which `rag-eval read` takes back), category and heading path.

    \b
    Examples:
      rag-eval index list handbook.sqlite
      rag-eval index list handbook.sqlite --category data
    """
    from ..index.store import Index
    from ..search.read import list_entries

    with Index.open(index_path) as index:
        entries = list_entries(index, category=category)
    if as_json:
        click.echo(json.dumps(entries, ensure_ascii=False, indent=2))
        return
    for entry in entries:
        if "anchor" in entry:
            # One entry per line, three tab-separated columns: a title's line breaks and tabs (a passage's
            # title is any JSON string, a heading may hold a tab) are shown as one space, as search does.
            heading = _one_line(entry["heading_path"] or entry["title"])
            click.echo(f"{_one_line(entry['key'])}\t{entry['category']}\t{heading}")
        else:
            click.echo(
                f"{entry['doc']}@{entry['revision']}\t{entry['status']}\t{entry['expires'] or '-'}\t"
                f"{entry['path']}\t{entry['lines']} lines"
            )


@index_cmd.command("verify")
@click.argument("index_path", metavar="INDEX", type=click.Path())
@click.option(
    "--root",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Corpus folder to check against (default: the one recorded at build time).",
)
@click.option(
    "--chunks", "per_chunk", is_flag=True, help="One line per chunk (source id, section) instead of per file."
)
@click.option("--problems", is_flag=True, help="Only what is not ok.")
@json_option
def index_verify_cmd(index_path: str, root: Path | None, per_chunk: bool, problems: bool, as_json: bool) -> None:
    """Check an index itself, then against its sources: ok, stale, missing or new; exit 1 if anything is not ok.

    First the file: SQLite's integrity check, FTS5's (the index against the stored text) and the impact
    postings against FTS5's document frequencies. A damaged index is one 'damaged' line per table and the
    command that rebuilds it; its sources are not checked then. Otherwise, per source file: stale: the file
    changed since the build, or the index's chunks or tokens are not what its builder and tokenizer make of
    the file now (rebuild); missing: the file is gone (path '.': the source cannot be listed, so new files
    cannot be seen); new: the source has a file the index does not hold. One line per source file (status,
    path, chunks, detail); a summary on stderr.

    \b
    Examples:
      rag-eval index verify evidence.sqlite
      rag-eval index verify evidence.sqlite --root corpus --problems
      rag-eval index verify evidence.sqlite --chunks --json
    """
    from ..index.integrity import verify
    from ..index.store import Index
    from ..index.verify import STATES

    with Index.open(index_path) as index:
        found = verify(index, root, per_chunk=per_chunk)
    if found.damage:
        if as_json:
            entries = [{"status": "damaged", **d.__dict__, "rebuild": found.rebuild} for d in found.damage]
            click.echo(json.dumps(entries, ensure_ascii=False, indent=2))
        else:
            for damage in found.damage:
                click.echo(f"damaged\t{damage.table or '(file)'}\t{_one_line(damage.detail)}")
            click.echo(f"# index damaged: its sources were not checked; rebuild it: {found.rebuild}", err=True)
        sys.exit(1)
    statuses = found.sources
    shown = [s for s in statuses if s.status != "ok"] if problems else statuses
    if as_json:
        click.echo(json.dumps([s.__dict__ for s in shown], ensure_ascii=False, indent=2))
    else:
        for status in shown:
            name = status.key if per_chunk else status.path
            detail = f"\t{status.detail}" if status.detail else ""
            click.echo(f"{status.status}\t{name}" + ("" if per_chunk else f"\t{status.chunks}") + detail)
        counts = ", ".join(f"{sum(s.status == state for s in statuses)} {state}" for state in STATES)
        click.echo(f"# {'chunks' if per_chunk else 'files'}: {counts}", err=True)
    if any(s.status != "ok" for s in statuses):
        sys.exit(1)


@cli.command("search")
@click.argument("index_path", metavar="INDEX", type=click.Path())
@click.argument("query", type=TEXT, required=False)
@click.option(
    "--mode",
    type=click.Choice(list(MODES)),
    help="and: every term; or: any term, ranked; phrase: the exact text. Default: the builder's.",
)
@click.option(
    "--limit",
    type=int,
    help="Number of hits (default and maximum recorded by the builder); with --queries, chunks per query "
    "(default 100, as compare ranks them; at most 10000).",
)
@click.option("--as-of", type=TEXT, help="Only current chunks whose expiry date is after this YYYY-MM-DD date.")
@category_option
@click.option("--path-prefix", type=TEXT, help="Only paths starting with this prefix.")
@click.option(
    "--processing",
    metavar="SPEC",
    type=TEXT,
    help="Query processing: stopwords=zh (drop question and function words), max_df=F (drop terms in more "
    "than F of the chunks), top_terms=N (keep the N rarest), prf=rm3|bo1 (pseudo-relevance feedback on or "
    "queries, with fb_docs, fb_terms, original_weight); e.g. stopwords=zh,max_df=0.3.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the agent tool result (JSON with provenance).")
@click.option(
    "--explain", is_flag=True, help="Show the normalised query, its tokens, the MATCH expression and hits per term."
)
@click.option(
    "--queries",
    "topics",
    type=click.Path(path_type=Path),
    help="Batch search: answer every query of FILE (queries.jsonl, TREC topics, or one question per line) "
    "with the index and tokenizer loaded once; needs --run.",
)
@click.option(
    "--run",
    "run_file",
    type=click.Path(),  # a str: pathlib would drop a trailing '/', which the library refuses for a file
    help="With --queries: the TREC run file to write (a new file, outside the folder the index was built from; "
    "qid Q0 docid rank score tag).",
)
@click.option("--run-tag", type=TEXT, help="With --queries: the run's tag, its sixth column  [default: rag-eval]")
@click.option(
    "--engine",
    type=EngineChoice(),
    help="Rank with FTS5's bm25 statement or the impact postings (index build --engine impact); same scores "
    "and order. impact:k1=0.9,b=0.4 ranks the impact postings with bm25 at that k1 and b. --explain names the "
    "engine that answered. Default: the index's.",
)
def search_cmd(
    index_path: str,
    query: str | None,
    mode: str | None,
    limit: int | None,
    as_of: str | None,
    category: str | None,
    path_prefix: str | None,
    as_json: bool,
    explain: bool,
    processing: str | None,
    topics: Path | None,
    run_file: str | None,
    run_tag: str | None,
    engine: str | None,
) -> None:
    """Search INDEX for QUERY, best bm25 first (ties by chunk id), with highlighted snippets.

    With --queries FILE --run OUT, answer every query of FILE instead (batch search, the tokenizer loaded
    once) and write a TREC run that `rag-eval evaluate OUT QRELS` scores: documents are the index's judged
    units (as compare ranks them, 100 deep by default), a progress bar shows on a terminal, and queries
    per second are printed at the end. FILE is queries.jsonl (_id, text), TREC topics (<top> blocks, or
    qid<TAB>text lines in a .tsv) or one question per line (ids as compare --queries gives them). OUT is
    written once at the end: a failed or interrupted batch leaves no file.

    \b
    Examples:
      rag-eval search docs.sqlite "导出文件保留多久"
      rag-eval search evidence.sqlite "退款 工作日" --as-of 2026-10-07 --json
      rag-eval search handbook.sqlite 导出 --mode and --category data --explain
      rag-eval search docs.sqlite "导出文件保留多久呢" --processing stopwords=zh,max_df=0.3 --explain
      rag-eval search docs.sqlite "导出文件保留多久呢" --processing prf=rm3 --explain
      rag-eval search docs.sqlite "导出文件保留多久" --engine impact:k1=2,b=0.3
      rag-eval search docs.sqlite --queries questions.txt --run out/docs.run
      rag-eval search passages.sqlite --queries beir/queries.jsonl --run out/bm25.run --limit 1000 --run-tag bigram
    """
    from ..index.processing import QueryProcessing

    processed = QueryProcessing.parse(processing) if processing else None
    if topics is not None or run_file is not None or run_tag is not None:
        if topics is None or run_file is None:
            raise click.UsageError("batch search needs both --queries FILE and --run OUT")
        if query is not None or as_json or explain:
            raise click.UsageError("--queries answers a file of queries into a run: no QUERY, --json or --explain")
        shared = dict(mode=mode, as_of=as_of, category=category, path_prefix=path_prefix, engine=engine)
        _batch(index_path, topics, run_file, limit=limit, tag=run_tag, processing=processed, **shared)
        return
    if query is None:
        raise click.UsageError("Missing argument 'QUERY'.")
    if not query.strip():  # as the MCP server's search says it; an empty query is a mistake, not "no hits"
        raise click.UsageError("the query is empty: give the words to search for")
    options: dict[str, Any] = dict(mode=mode, as_of=as_of, category=category, path_prefix=path_prefix, engine=engine)
    _search(index_path, query, as_json, limit=limit, explain=explain, processing=processed, **options)


def _search(index_path: str, query: str, as_json: bool, **options: Any) -> None:
    """One query: the evidence result as JSON, or the explanation and one hit per line with a hint when it finds
    nothing."""
    from ..index.store import Index
    from ..search.evidence import evidence
    from ..search.read import unknown_category_hint
    from ..search.request import SearchRequest
    from ..search.searching import search

    with Index.open(index_path) as index:
        request = SearchRequest.of(query, **options)
        if as_json:
            click.echo(json.dumps(evidence(index, request), ensure_ascii=False, indent=2))
            return
        result = search(index, request)
        # A category no chunk has (a typo, or another index's) finds nothing: say so rather than only "no hits".
        hint = None if result.hits else unknown_category_hint(index, request.filters.category)
    _print_hits(result)
    _hint(hint)


def _batch(index_path: str, topics: Path, run_file: str, **options: Any) -> None:
    """``search --queries FILE --run OUT``: the batch with a progress bar, its summary and hint on stderr."""
    from ..search.batch import batch_search

    with Bars() as progress:
        report = batch_search(index_path, topics, run_file, progress=progress, **options)
    click.echo(report.summary(), err=True)
    _hint(report.hint)


def _print_hits(result: SearchResult) -> None:
    """The explanation (``# key: value`` lines) and one hit per line, four tab-separated columns (cut and awk read
    them): a snippet's line breaks and tabs are shown as one space, other control characters as their pictures."""
    for key, value in result.explain.items():
        click.echo(f"# {key}: {json.dumps(value, ensure_ascii=False)}")
    for hit in result.hits:
        chunk = hit.chunk
        where = f"{chunk.path}:{chunk.line}" if chunk.line is not None else chunk.key
        click.echo(f"{hit.rank}\t{hit.score:.4f}\t{_one_line(where)}\t{_one_line(hit.snippet)}")
    if not result.hits:
        click.echo("no hits", err=True)


def _hint(hint: str | None) -> None:
    if hint is not None:
        click.echo(f"hint: {hint}", err=True)


@cli.command("read")
@click.argument("index_path", metavar="INDEX", type=click.Path())
@click.argument("target", metavar="PATH[#ANCHOR]", type=TEXT)
@click.option(
    "--root",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Corpus folder for whole-file reads (default: the one recorded at build time).",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print JSON: the text with its key, path, anchor, heading path, sha256."
)
def read_cmd(index_path: str, target: str, root: Path | None, as_json: bool) -> None:
    """Print a stored section (PATH#ANCHOR) or a whole source file (PATH) the index was built from.

    PATH#ANCHOR splits at its last '#', so paths may contain '#'; a whole file whose name contains '#' is
    read with a trailing '#' (notes#1.md#). A whole file is read only if the index holds it (never a
    dotfile or a file under a dot-folder) and it still resolves under the root to a regular file the index
    holds; anything else is one line that does not tell whether the file exists. Also taken: any key search
    prints (a key's %20 is the file name's space), and PATH:N, the stored line N of a lines index.

    \b
    Examples:
      rag-eval read handbook.sqlite "data/export-data.md#支持的导出格式"
      rag-eval read handbook.sqlite data/export-data.md --json
      rag-eval read evidence.sqlite refund-policy.txt:2
    """
    from ..index.store import Index
    from ..search.read import read_entry

    with Index.open(index_path) as index:
        entry = read_entry(index, target, root=root)
    click.echo(json.dumps(entry, ensure_ascii=False, indent=2) if as_json else entry["text"])
