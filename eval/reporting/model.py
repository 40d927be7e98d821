"""The comparison's result as a typed model: what ``rag-eval compare`` measured, what report.json holds, and what
every page, chart, the gate and the printed table read.

:class:`Comparison` is the whole report; :class:`SystemResult` one row of it (a system, an outside run or a fused
system) with its metrics, costs, significance against the reference and label-free figures. ``to_json()`` writes
report.json's shape exactly (key order included); ``from_json()`` builds the model from that shape, filling what a
report written by an earlier version lacks with ``None`` (or empty). A report.json read from a file is first
checked against the JSON Schema shipped beside this module (:mod:`.reader`); the schema is versioned by the
report's ``schema`` field (``rag-eval/compare/1``, and ``rag-eval/baseline/1`` for a baseline, which keeps only
identities and mean metrics).

A key absent from a report and a key holding ``null`` read the same (``None``); which keys a report writes is
decided by what kind of row or section it is, so ``from_json(to_json(m)) == m`` for every model.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: What compare's report.json holds, and what --write-baseline writes: the schemas (and versions) this model reads.
REPORT_SCHEMA = "rag-eval/compare/1"
BASELINE_SCHEMA = "rag-eval/baseline/1"

Interval = tuple[float, float]
#: Per system name, per query id, per metric: the value (report.json's ``per_query``).
PerQuery = Mapping[str, Mapping[str, Mapping[str, float]]]


def _interval(value: Any) -> Interval | None:
    return None if value is None else (float(value[0]), float(value[1]))


def _listed(value: Interval | None) -> list[float] | None:
    return None if value is None else [value[0], value[1]]


def _without_none(pairs: Iterable[tuple[str, Any]]) -> dict[str, Any]:
    """The pairs whose value is not None, in order: keys a report writes only when they have a value."""
    return {key: value for key, value in pairs if value is not None}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


# --- the dataset and the run's provenance --------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetStats:
    """Counts and average lengths of the dataset, as ``rag-eval datasets show`` prints them."""

    id: str | None = None
    passages: int | None = None
    queries: int | None = None
    judged_queries: int | None = None
    qrels: int | None = None
    qrels_per_judged_query: float | None = None
    avg_passage_chars: float | None = None
    avg_query_chars: float | None = None
    query_kinds: Mapping[str, int] | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DatasetStats:
        kinds = data.get("query_kinds")
        return cls(
            data.get("id"),
            data.get("passages"),
            data.get("queries"),
            data.get("judged_queries"),
            data.get("qrels"),
            data.get("qrels_per_judged_query"),
            data.get("avg_passage_chars"),
            data.get("avg_query_chars"),
            None if kinds is None else dict(kinds),
        )

    def to_json(self) -> dict[str, Any]:
        kinds = None if self.query_kinds is None else dict(self.query_kinds)
        return _without_none(
            (
                ("id", self.id),
                ("passages", self.passages),
                ("queries", self.queries),
                ("judged_queries", self.judged_queries),
                ("qrels", self.qrels),
                ("qrels_per_judged_query", self.qrels_per_judged_query),
                ("avg_passage_chars", self.avg_passage_chars),
                ("avg_query_chars", self.avg_query_chars),
                ("query_kinds", kinds),
            )
        )


@dataclass(frozen=True)
class DatasetInfo:
    """Which data was compared: its id and checksum, counts, what a passage is, its as-of date, whether its
    queries are synthetic."""

    id: str
    checksum: str
    stats: DatasetStats | None = None
    #: What a passage is (the builder's unit): an index's chunk count differs where its builder splits a unit.
    units: str | None = None
    as_of: str | None = None
    synthetic: bool | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> DatasetInfo:
        stats = data.get("stats")
        return cls(
            data.get("id") or "",
            data.get("checksum") or "",
            None if stats is None else DatasetStats.from_json(stats),
            data.get("units"),
            data.get("as_of"),
            data.get("synthetic"),
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "checksum": self.checksum}
        if self.stats is not None:
            out["stats"] = self.stats.to_json()
        if self.units is not None:
            out["units"] = self.units
        out["as_of"] = self.as_of  # null when the dataset has no as-of date
        if self.synthetic is not None:
            out["synthetic"] = self.synthetic
        return out


@dataclass(frozen=True)
class Machine:
    """The machine a report was measured on."""

    platform: str | None = None
    processor: str | None = None
    cpus: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {"platform": self.platform, "processor": self.processor, "cpus": self.cpus}


@dataclass(frozen=True)
class LoadAverage:
    """The machine's load average over 1, 5 and 15 minutes at the start and the end of a comparison (None where
    the system has none)."""

    start: tuple[float, ...] | None = None
    end: tuple[float, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "start": None if self.start is None else list(self.start),
            "end": None if self.end is None else list(self.end),
        }


@dataclass(frozen=True)
class Environment:
    """Machine, versions, commit, time and command line every report records (a baseline keeps some of them)."""

    rag_eval: str | None = None
    python: str | None = None
    sqlite: str | None = None
    packages: Mapping[str, str | None] | None = None
    machine: Machine | None = None
    commit: str | None = None
    created_utc: str | None = None
    command: str | None = None
    load_average: LoadAverage | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Environment:
        machine, load = data.get("machine"), data.get("load_average")
        packages = data.get("packages")
        return cls(
            data.get("rag_eval"),
            data.get("python"),
            data.get("sqlite"),
            None if packages is None else dict(packages),
            None
            if machine is None
            else Machine(machine.get("platform"), machine.get("processor"), machine.get("cpus")),
            data.get("commit"),
            data.get("created_utc"),
            data.get("command"),
            None if load is None else LoadAverage(_floats(load.get("start")), _floats(load.get("end"))),
        )

    def to_json(self) -> dict[str, Any]:
        return _without_none(
            (
                ("rag_eval", self.rag_eval),
                ("python", self.python),
                ("sqlite", self.sqlite),
                ("packages", None if self.packages is None else dict(self.packages)),
                ("machine", None if self.machine is None else self.machine.to_json()),
                ("commit", self.commit),
                ("created_utc", self.created_utc),
                ("command", self.command),
                ("load_average", None if self.load_average is None else self.load_average.to_json()),
            )
        )


def _floats(values: Any) -> tuple[float, ...] | None:
    return None if values is None else tuple(values)


# --- how significance and latency were measured ---------------------------------------------------------------------


@dataclass(frozen=True)
class SignificanceTest:
    """How every system was tested against the reference (report.json's top-level ``significance``)."""

    test: str | None = None
    permutations: int | None = None
    #: Whether every sign vector was tried (an exact test): 2**n <= permutations for n judged queries.
    exact: bool | None = None
    sign_vectors: int | None = None
    seed: int | None = None
    correction: str | None = None
    alpha: float | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SignificanceTest:
        return cls(
            data.get("test"),
            data.get("permutations"),
            data.get("exact"),
            data.get("sign_vectors"),
            data.get("seed"),
            data.get("correction"),
            data.get("alpha"),
        )

    def to_json(self) -> dict[str, Any]:
        return _without_none(
            (
                ("test", self.test),
                ("permutations", self.permutations),
                ("exact", self.exact),
                ("sign_vectors", self.sign_vectors),
                ("seed", self.seed),
                ("correction", self.correction),
                ("alpha", self.alpha),
            )
        )


@dataclass(frozen=True)
class LatencyPair:
    """Two systems' search latencies (``statistic``: median or p95) compared on the same bootstrap resamples."""

    a: str
    b: str
    statistic: str
    #: b's value over a's: how many times slower b is (None when a's is 0).
    ratio: float | None
    difference_ci95_ms: Interval
    #: The faster system's name; None when the two cannot be told apart (the interval holds 0).
    faster: str | None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LatencyPair:
        return cls(
            data["a"],
            data["b"],
            data["statistic"],
            data.get("ratio"),
            _interval(data["difference_ci95_ms"]) or (0.0, 0.0),
            data.get("faster"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "statistic": self.statistic,
            "ratio": self.ratio,
            "difference_ci95_ms": _listed(self.difference_ci95_ms),
            "faster": self.faster,
        }


@dataclass(frozen=True)
class LatencyMethod:
    """How latency was taken (report.json's top-level ``latency``): repeats, warm-up, the intervals, the pairs."""

    repeat: int | None = None
    warmup_questions: int | None = None
    per_question: str | None = None
    interval: str | None = None
    pairs: tuple[LatencyPair, ...] = ()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LatencyMethod:
        return cls(
            data.get("repeat"),
            data.get("warmup_questions"),
            data.get("per_question"),
            data.get("interval"),
            tuple(LatencyPair.from_json(pair) for pair in data.get("pairs") or ()),
        )

    def to_json(self) -> dict[str, Any]:
        out = _without_none(
            (
                ("repeat", self.repeat),
                ("warmup_questions", self.warmup_questions),
                ("per_question", self.per_question),
                ("interval", self.interval),
            )
        )
        return out | {"pairs": [pair.to_json() for pair in self.pairs]}


# --- one row ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LatencySummary:
    """min, median, mean, p95, p99 and max of a phase's times, in ms (a statistic not measured is None)."""

    min: float | None = None
    median: float | None = None
    mean: float | None = None
    p95: float | None = None
    p99: float | None = None
    max: float | None = None

    STATISTICS = ("min", "median", "mean", "p95", "p99", "max")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LatencySummary:
        return cls(*(data.get(name) for name in cls.STATISTICS))

    def to_json(self) -> dict[str, Any]:
        return _without_none((name, self.statistic(name)) for name in self.STATISTICS)

    def statistic(self, name: str) -> float | None:
        """The statistic called ``name`` (``median``, ``p95``, ...)."""
        if name not in self.STATISTICS:
            raise ValueError(f"no latency statistic {name!r}")
        value: float | None = getattr(self, name)
        return value


@dataclass(frozen=True)
class RowLatency:
    """A row's latency per phase (report.json's ``latency_ms``): tokenize and search, each question's first search
    alone (with repeats), a fused system's own fusion time."""

    tokenize: LatencySummary | None = None
    search: LatencySummary | None = None
    search_first_run: LatencySummary | None = None
    fusion: LatencySummary | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RowLatency:
        def phase(name: str) -> LatencySummary | None:
            found = data.get(name)
            return None if found is None else LatencySummary.from_json(found)

        return cls(phase("tokenize"), phase("search"), phase("search_first_run"), phase("fusion"))

    def to_json(self) -> dict[str, Any]:
        phases = (
            ("tokenize", self.tokenize),
            ("search", self.search),
            ("search_first_run", self.search_first_run),
            ("fusion", self.fusion),
        )
        return {name: summary.to_json() for name, summary in phases if summary is not None}


@dataclass(frozen=True)
class BuildInfo:
    """A system's index build: times, size, chunks, whether the cache held it, and the tokenizing process pool."""

    seconds: float | None = None
    tokenizer_load_seconds: float | None = None
    tokenize_seconds: float | None = None
    write_seconds: float | None = None
    index_bytes: float | None = None
    chunks: int | None = None
    cached: bool | None = None
    workers: int | None = None
    start_method: str | None = None
    worker_load_seconds: tuple[float, ...] | None = None
    tokenize_speedup: float | None = None

    FIELDS = (
        "seconds",
        "tokenizer_load_seconds",
        "tokenize_seconds",
        "write_seconds",
        "index_bytes",
        "chunks",
        "cached",
        "workers",
        "start_method",
        "worker_load_seconds",
        "tokenize_speedup",
    )

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BuildInfo:
        loads = data.get("worker_load_seconds")
        values = {name: data.get(name) for name in cls.FIELDS} | {"worker_load_seconds": _floats(loads)}
        return cls(**values)

    def to_json(self, *, own: bool = True) -> dict[str, Any]:
        """Every field (null where not measured) for a system's own build; a fused system builds nothing and
        records its members' index bytes only (``own=False``)."""
        if not own:
            return {"index_bytes": self.index_bytes}
        loads = None if self.worker_load_seconds is None else list(self.worker_load_seconds)
        return {name: getattr(self, name) for name in self.FIELDS} | {"worker_load_seconds": loads}


@dataclass(frozen=True)
class Costs:
    """What a timed row cost: latency per phase and per question, queries per second, the build, tokenizer speed,
    tokens per passage, questions without hits and the false-hit rate on unanswerable questions. An outside run
    and a fusion with an outside member have none."""

    latency: RowLatency | None = None
    #: Each question's search time (ms), the fastest of its repeats.
    search_samples_ms: tuple[float, ...] | None = None
    #: Queries answered per second, one after another: tokenize and search, as a caller waits.
    qps: float | None = None
    build: BuildInfo | None = None
    tokenize_chars_per_second: float | None = None
    tokens_per_passage: float | None = None
    zero_hit_queries: int | None = None
    no_answer_queries: int | None = None
    no_answer_false_hit_rate: float | None = None

    KEYS = (
        "latency_ms",
        "latency_samples_ms",
        "qps",
        "build",
        "tokenize_chars_per_second",
        "tokens_per_passage",
        "zero_hit_queries",
        "no_answer_queries",
        "no_answer_false_hit_rate",
    )

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Costs | None:
        """The costs of a row, or None when it has none (no key of them)."""
        if not any(key in data for key in cls.KEYS):
            return None
        latency, build = data.get("latency_ms"), data.get("build")
        samples = _mapping(data.get("latency_samples_ms")).get("search")
        return cls(
            None if latency is None else RowLatency.from_json(latency),
            _floats(samples),
            data.get("qps"),
            None if build is None else BuildInfo.from_json(build),
            data.get("tokenize_chars_per_second"),
            data.get("tokens_per_passage"),
            data.get("zero_hit_queries"),
            data.get("no_answer_queries"),
            data.get("no_answer_false_hit_rate"),
        )

    def to_json(self, *, fused: bool) -> dict[str, Any]:
        """The keys in report.json's order; a fused system has no QPS of its own and builds nothing."""
        out: dict[str, Any] = {}
        if self.latency is not None:
            out["latency_ms"] = self.latency.to_json()
        if self.search_samples_ms is not None:
            out["latency_samples_ms"] = {"search": list(self.search_samples_ms)}
        if not fused:
            out["qps"] = self.qps
        if self.build is not None:
            out["build"] = self.build.to_json(own=not fused)
        return out | {
            "tokenize_chars_per_second": self.tokenize_chars_per_second,
            "tokens_per_passage": self.tokens_per_passage,
            **_without_none(
                (("zero_hit_queries", self.zero_hit_queries), ("no_answer_queries", self.no_answer_queries))
            ),
            "no_answer_false_hit_rate": self.no_answer_false_hit_rate,
        }


@dataclass(frozen=True)
class EngineInfo:
    """The engine that ranked a row: its name, canonical spec, whether it is exact, its build engine, and what it
    measured (``stats``: keys each engine declares, e.g. ``postings_bytes``, ``rss_growth_bytes``)."""

    name: str
    spec: str
    exact: bool
    build: str
    stats: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EngineInfo:
        known = ("name", "spec", "exact", "build")
        stats = {key: value for key, value in data.items() if key not in known}
        return cls(data.get("name", ""), data.get("spec", ""), bool(data.get("exact")), data.get("build", ""), stats)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "spec": self.spec, "exact": self.exact, "build": self.build, **self.stats}

    def stat(self, key: str) -> Any:
        """What the engine measured under ``key``, or None."""
        return self.stats.get(key)


@dataclass(frozen=True)
class FusionInfo:
    """A fused system: its method and option (``k`` for rrf, ``normalise`` for the others), weights, members'
    full names, depth, and how its costs are counted."""

    method: str
    weights: tuple[float, ...]
    members: tuple[str, ...]
    depth: int
    k: int | None = None
    normalise: str | None = None
    #: How latency and index bytes are counted for it, in words.
    latency_note: str = ""
    index_bytes_note: str = ""

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> FusionInfo:
        return cls(
            data.get("method", ""),
            tuple(data.get("weights") or ()),
            tuple(data.get("members") or ()),
            data.get("depth", 0),
            data.get("k"),
            data.get("normalise"),
            data.get("latency", ""),
            data.get("index_bytes", ""),
        )

    def to_json(self) -> dict[str, Any]:
        option = _without_none((("k", self.k), ("normalise", self.normalise)))
        return {
            "method": self.method,
            **option,
            "weights": list(self.weights),
            "members": list(self.members),
            "depth": self.depth,
            "latency": self.latency_note,
            "index_bytes": self.index_bytes_note,
        }


@dataclass(frozen=True)
class KindMeans:
    """A row's mean metrics over the judged queries of one query kind."""

    queries: int
    means: Mapping[str, float]

    def to_json(self) -> dict[str, Any]:
        return {"queries": self.queries, **self.means}


@dataclass(frozen=True)
class Significance:
    """A row against the reference on one metric: the mean difference, p (and Holm's), wins, ties and losses."""

    delta: float
    p: float
    p_holm: float
    significant: bool
    wins: int
    ties: int
    losses: int

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Significance:
        return cls(
            data["delta"],
            data["p"],
            data["p_holm"],
            data["significant"],
            data.get("wins", 0),
            data.get("ties", 0),
            data.get("losses", 0),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "delta": self.delta,
            "p": self.p,
            "p_holm": self.p_holm,
            "significant": self.significant,
            "wins": self.wins,
            "ties": self.ties,
            "losses": self.losses,
        }

    @property
    def arrow(self) -> str:
        """``↑``/``↓`` when significantly better/worse than the reference, else ``""``."""
        if not self.significant:
            return ""
        return "↑" if self.delta > 0 else "↓"


@dataclass(frozen=True)
class QueryDifference:
    """One query whose value differs most from the reference's: its id, the difference, its kind and text."""

    query: str
    delta: float
    kind: str | None = None
    text: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> QueryDifference:
        return cls(data["query"], data["delta"], data.get("kind"), data.get("text"))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"query": self.query, "delta": self.delta, "kind": self.kind}
        return out | _without_none((("text", self.text),))


@dataclass(frozen=True)
class JudgedTop:
    """How much of a row's top ``depth`` was judged (Judged@depth) and how many unjudged passages it held."""

    depth: int
    share: float
    unjudged: int | None = None


_JUDGED_KEY = re.compile(r"judged@(\d+)")


@dataclass(frozen=True)
class SystemResult:
    """One row of a comparison: a system (tokenizer, builder, mode, engine), an outside run or a fused system."""

    name: str
    tokenizer: str = ""
    builder: str = ""
    mode: str = ""
    engine: EngineInfo | None = None
    fusion: FusionInfo | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)
    ci95: Mapping[str, Interval] | None = None
    recall_curve: Mapping[str, float] | None = None
    costs: Costs | None = None
    #: 95% intervals of the search median and p95 (ms), for a timed row.
    search_ci95_ms: Mapping[str, Interval] | None = None
    by_kind: Mapping[str, KindMeans] | None = None
    significance: Mapping[str, Significance] | None = None
    largest_gains: tuple[QueryDifference, ...] | None = None
    largest_losses: tuple[QueryDifference, ...] | None = None
    zero_hit_rate: float | None = None
    judged: JudgedTop | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SystemResult:
        engine, fusion = data.get("engine"), data.get("fusion")
        ci95, interval = data.get("ci95"), _mapping(data.get("latency_ci95_ms")).get("search")
        by_kind, significance = data.get("by_kind"), data.get("significance")
        return cls(
            data["name"],
            data.get("tokenizer") or "",
            data.get("builder") or "",
            data.get("mode") or "",
            None if not isinstance(engine, Mapping) else EngineInfo.from_json(engine),
            None if fusion is None else FusionInfo.from_json(fusion),
            dict(data.get("metrics") or {}),
            None if ci95 is None else {m: _interval(v) or (0.0, 0.0) for m, v in ci95.items()},
            None if data.get("recall_curve") is None else dict(data["recall_curve"]),
            Costs.from_json(data),
            None if interval is None else {s: _interval(v) or (0.0, 0.0) for s, v in interval.items()},
            None if by_kind is None else {kind: _kind_means(table) for kind, table in by_kind.items()},
            None if significance is None else {m: Significance.from_json(s) for m, s in significance.items()},
            _differences(data.get("largest_gains")),
            _differences(data.get("largest_losses")),
            data.get("zero_hit_rate"),
            _judged_top(data),
        )

    def to_json(self) -> dict[str, Any]:
        """The row as report.json writes it: identity, then (a fused system's costs before its quality) metrics,
        costs, intervals, kinds, significance, differences and the label-free figures."""
        out: dict[str, Any] = {"name": self.name, "tokenizer": self.tokenizer, "builder": self.builder}
        out["mode"] = self.mode
        if self.engine is not None:
            out["engine"] = self.engine.to_json()
        if self.fusion is not None:
            out["fusion"] = self.fusion.to_json()
            if self.costs is not None:
                out |= self.costs.to_json(fused=True)
        out |= self._quality_json()
        if self.costs is not None and self.fusion is None:
            out |= self.costs.to_json(fused=False)
        return out | self._compared_json()

    def _quality_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"metrics": dict(self.metrics)}
        if self.ci95 is not None:
            out["ci95"] = {m: _listed(v) for m, v in self.ci95.items()}
        if self.recall_curve is not None:
            out["recall_curve"] = dict(self.recall_curve)
        return out

    def _compared_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.search_ci95_ms is not None:
            out["latency_ci95_ms"] = {"search": {s: _listed(v) for s, v in self.search_ci95_ms.items()}}
        if self.by_kind is not None:
            out["by_kind"] = {kind: means.to_json() for kind, means in self.by_kind.items()}
        if self.significance is not None:
            out["significance"] = {m: s.to_json() for m, s in self.significance.items()}
        for key, items in (("largest_gains", self.largest_gains), ("largest_losses", self.largest_losses)):
            if items is not None:
                out[key] = [item.to_json() for item in items]
        if self.zero_hit_rate is not None:
            out["zero_hit_rate"] = self.zero_hit_rate
        if self.judged is not None:
            out[f"judged@{self.judged.depth}"] = self.judged.share
            if self.judged.unjudged is not None:
                out[f"unjudged_in_top{self.judged.depth}"] = self.judged.unjudged
        return out

    # What the pages and the gate ask of a row.

    @property
    def timed(self) -> bool:
        """Whether the row has latency (an outside run, or a fusion with one as a member, has none)."""
        return self.costs is not None and self.costs.latency is not None

    @property
    def search(self) -> LatencySummary | None:
        """The search latency summary (ms), or None for an untimed row."""
        return None if self.costs is None or self.costs.latency is None else self.costs.latency.search

    @property
    def tokenize(self) -> LatencySummary | None:
        """The tokenize latency summary (ms), or None for an untimed row."""
        return None if self.costs is None or self.costs.latency is None else self.costs.latency.tokenize

    @property
    def build(self) -> BuildInfo | None:
        """The index build (a fused system's: its members' index bytes), or None."""
        return None if self.costs is None else self.costs.build

    @property
    def index_bytes(self) -> float | None:
        """The size of the row's index (a fused system: its members' together), or None."""
        build = self.build
        return None if build is None else build.index_bytes

    def arrow(self, metric: str) -> str:
        """``↑``/``↓`` when significantly better/worse than the reference on ``metric``, else ``""``."""
        found = (self.significance or {}).get(metric)
        return "" if found is None else found.arrow


def _kind_means(table: Mapping[str, Any]) -> KindMeans:
    return KindMeans(table.get("queries", 0), {key: value for key, value in table.items() if key != "queries"})


def _differences(items: Any) -> tuple[QueryDifference, ...] | None:
    return None if items is None else tuple(QueryDifference.from_json(item) for item in items)


def _judged_top(data: Mapping[str, Any]) -> JudgedTop | None:
    for key, value in data.items():
        found = _JUDGED_KEY.fullmatch(key)
        if found is not None:
            depth = int(found.group(1))
            return JudgedTop(depth, value, data.get(f"unjudged_in_top{depth}"))
    return None


# --- what needs no judgments -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Overlap:
    """Two systems' mean Jaccard of their top ``depth`` sets and mean rank-biased overlap."""

    a: str
    b: str
    jaccard: float | None
    rbo: float | None


@dataclass(frozen=True)
class Disagreement:
    """A question whose systems' tops overlap least: its mean Jaccard, each system's first results, and (without
    ``--no-text``) its text and the titles of those results."""

    query: str
    mean_jaccard: float
    top: Mapping[str, tuple[str, ...]]
    text: str | None = None
    titles: Mapping[str, str] | None = None


@dataclass(frozen=True)
class LabelFree:
    """The label-free section (report.json's ``without_labels``): zero hits, overlap, disagreements, the script
    mix of the questions, and with few judgments a warning and the difference the test can detect."""

    depth: int
    rbo_p: float
    questions: int
    judged: bool
    zero_hit_rate: Mapping[str, float]
    overlap: tuple[Overlap, ...]
    disagreements: tuple[Disagreement, ...]
    warning: str | None = None
    detectable_difference: float | None = None
    #: Han-only, mixed and Latin-only questions (reports before it have none).
    scripts: Mapping[str, int] | None = None
    #: Without judgments: rag-eval's default recommendation (``system``, ``systems_file``, ``evidence``,
    #: ``caveat``; :mod:`rag_eval.eval.compare.recommended`).
    default_choice: Mapping[str, str] | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LabelFree:
        depth = data.get("depth", 10)
        overlap = tuple(
            Overlap(pair["a"], pair["b"], pair.get(f"jaccard@{depth}"), pair.get(f"rbo@{depth}"))
            for pair in data.get("overlap") or ()
        )
        hardest = tuple(
            Disagreement(
                item["query"],
                item.get(f"mean_jaccard@{depth}", 0.0),
                {system: tuple(docs) for system, docs in item.get("top", {}).items()},
                item.get("text"),
                None if item.get("titles") is None else dict(item["titles"]),
            )
            for item in data.get("disagreements") or ()
        )
        scripts = data.get("scripts")
        return cls(
            depth,
            data.get("rbo_p", 0.0),
            data.get("questions", 0),
            bool(data.get("judged")),
            dict(data.get("zero_hit_rate") or {}),
            overlap,
            hardest,
            data.get("warning"),
            data.get("detectable_difference"),
            None if scripts is None else dict(scripts),
            None if data.get("default_choice") is None else dict(data["default_choice"]),
        )

    def to_json(self) -> dict[str, Any]:
        depth = self.depth
        out: dict[str, Any] = {"depth": depth, "rbo_p": self.rbo_p, "questions": self.questions}
        if self.scripts is not None:
            out["scripts"] = dict(self.scripts)
        out |= {
            "judged": self.judged,
            "zero_hit_rate": dict(self.zero_hit_rate),
            "overlap": [
                {"a": pair.a, "b": pair.b, f"jaccard@{depth}": pair.jaccard, f"rbo@{depth}": pair.rbo}
                for pair in self.overlap
            ],
            "disagreements": [self._disagreement_json(item) for item in self.disagreements],
            "warning": self.warning,
            "detectable_difference": self.detectable_difference,
        }
        if self.default_choice is not None:
            out["default_choice"] = dict(self.default_choice)
        return out

    def _disagreement_json(self, item: Disagreement) -> dict[str, Any]:
        out: dict[str, Any] = {
            "query": item.query,
            f"mean_jaccard@{self.depth}": item.mean_jaccard,
            "top": {system: list(docs) for system, docs in item.top.items()},
        }
        if item.text is not None:
            out["text"] = item.text
        if item.titles is not None:
            out["titles"] = dict(item.titles)
        return out


# --- the rest of a comparison ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Skipped:
    """A tokenizer left out of a default comparison, why, and how to make it available."""

    tokenizer: str
    reason: str
    hint: str = ""

    def line(self) -> str:
        """``pkuseg: skipped, the pkuseg default model is not installed; run: rag-eval models install pkuseg``."""
        return f"{self.tokenizer}: skipped, {self.reason}" + (f"; {self.hint}" if self.hint else "")

    def to_json(self) -> dict[str, Any]:
        return {"tokenizer": self.tokenizer, "reason": self.reason, "hint": self.hint}


@dataclass(frozen=True)
class EngineAgreement:
    """A system run under two exact engines: whether their runs and per-query metrics are identical."""

    system: str
    engines: tuple[str, ...]
    names: tuple[str, ...]
    queries_with_hits: int
    queries_differing: int
    first_differing: tuple[str, ...]
    same_metrics: bool

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EngineAgreement:
        return cls(
            data["system"],
            tuple(data["engines"]),
            tuple(data["names"]),
            data["queries_with_hits"],
            data["queries_differing"],
            tuple(data.get("first_differing") or ()),
            data["same_metrics"],
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "system": self.system,
            "engines": list(self.engines),
            "names": list(self.names),
            "queries_with_hits": self.queries_with_hits,
            "queries_differing": self.queries_differing,
            "first_differing": list(self.first_differing),
            "same_metrics": self.same_metrics,
        }


@dataclass(frozen=True)
class TunedSplit:
    """Which queries a systems file tune wrote was evaluated on (report.json's ``tuned_split``), and why."""

    file: str
    tuned_on_dataset: str
    tuned_on_checksum: str
    same_data: bool
    dev_queries: int
    held_back_queries: int
    #: ``held-back`` or ``all``.
    queries: str
    note: str | None = None
    warning: str | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TunedSplit:
        tuned_on = _mapping(data.get("tuned_on"))
        return cls(
            data.get("file", ""),
            tuned_on.get("dataset", ""),
            tuned_on.get("checksum", ""),
            bool(data.get("same_data")),
            data.get("dev_queries", 0),
            data.get("held_back_queries", 0),
            data.get("queries", ""),
            data.get("note"),
            data.get("warning"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "tuned_on": {"dataset": self.tuned_on_dataset, "checksum": self.tuned_on_checksum},
            "same_data": self.same_data,
            "dev_queries": self.dev_queries,
            "held_back_queries": self.held_back_queries,
            "queries": self.queries,
            "note": self.note,
            "warning": self.warning,
        }


@dataclass(frozen=True)
class GateChange:
    """A metric of a system that dropped (a regression) or rose by more than the tolerance."""

    system: str
    metric: str
    old: float
    new: float
    tolerance: float

    def to_json(self) -> dict[str, Any]:
        return {"system": self.system, "metric": self.metric, "old": self.old, "new": self.new} | {
            "tolerance": self.tolerance
        }


@dataclass(frozen=True)
class StaleSystem:
    """A system whose identity changed since the baseline: per field, the baseline's value and this run's."""

    system: str
    differences: Mapping[str, tuple[Any, Any]]

    def to_json(self) -> dict[str, Any]:
        return {"system": self.system, "differences": {k: [v[0], v[1]] for k, v in self.differences.items()}}


@dataclass(frozen=True)
class GateSection:
    """What the gate found against a baseline (report.json's ``gate``)."""

    against: str | None
    tolerance: float
    compared: int
    regressions: tuple[GateChange, ...] = ()
    improvements: tuple[GateChange, ...] = ()
    stale: tuple[StaleSystem, ...] = ()
    unmatched: tuple[str, ...] = ()

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GateSection:
        def changes(key: str) -> tuple[GateChange, ...]:
            return tuple(
                GateChange(item["system"], item["metric"], item["old"], item["new"], item.get("tolerance", 0.0))
                for item in data.get(key) or ()
            )

        stale = tuple(
            StaleSystem(item["system"], {k: (v[0], v[1]) for k, v in item.get("differences", {}).items()})
            for item in data.get("stale") or ()
        )
        return cls(
            data.get("against"),
            data.get("tolerance", 0.0),
            data.get("compared", 0),
            changes("regressions"),
            changes("improvements"),
            stale,
            tuple(data.get("unmatched") or ()),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "against": self.against,
            "tolerance": self.tolerance,
            "compared": self.compared,
            "regressions": [item.to_json() for item in self.regressions],
            "improvements": [item.to_json() for item in self.improvements],
            "stale": [item.to_json() for item in self.stale],
            "unmatched": list(self.unmatched),
        }


@dataclass(frozen=True)
class Comparison:
    """A whole comparison: every row with its figures, the dataset, how the tests and timings were made, what
    needs no labels, and where it came from. A baseline (``BASELINE_SCHEMA``) holds identities and mean metrics."""

    schema: str
    dataset: DatasetInfo
    metrics: tuple[str, ...]
    systems: tuple[SystemResult, ...]
    environment: Environment = field(default_factory=Environment)
    reference: str | None = None
    significance: SignificanceTest | None = None
    judged_queries: int | None = None
    questions: int | None = None
    latency: LatencyMethod | None = None
    without_labels: LabelFree | None = None
    skipped: tuple[Skipped, ...] | None = None
    engines: tuple[EngineAgreement, ...] | None = None
    per_query: PerQuery | None = None
    tuned_split: TunedSplit | None = None
    gate: GateSection | None = None
    #: The run files of a written report folder (``runs/``), and which system's run each holds.
    run_files: tuple[str, ...] | None = None
    run_file_of: Mapping[str, str] | None = None

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Comparison:
        """The model of report.json's shape (or a baseline's), trusting its types: a file is checked against the
        schema first (:func:`.reader.read_report`)."""
        return cls(
            data.get("schema", REPORT_SCHEMA),
            DatasetInfo.from_json(_mapping(data.get("dataset"))),
            tuple(data.get("metrics") or ()),
            tuple(SystemResult.from_json(row) for row in data.get("systems") or ()),
            Environment.from_json(_mapping(data.get("environment"))),
            data.get("reference"),
            _built(SignificanceTest.from_json, data.get("significance")),
            data.get("judged_queries"),
            data.get("questions"),
            _built(LatencyMethod.from_json, data.get("latency")),
            _built(LabelFree.from_json, data.get("without_labels")),
            _skipped(data.get("skipped")),
            _built(lambda items: tuple(EngineAgreement.from_json(item) for item in items), data.get("engines")),
            data.get("per_query"),
            _built(TunedSplit.from_json, data.get("tuned_split")),
            _built(GateSection.from_json, data.get("gate")),
            _built(tuple, data.get("run_files")),
            _built(dict, data.get("run_file_of")),
        )

    def to_json(self) -> dict[str, Any]:
        """report.json's content (a baseline's, for ``BASELINE_SCHEMA``), keys in the order compare writes them."""
        if self.schema.startswith("rag-eval/baseline/"):
            return {
                "schema": self.schema,
                "environment": self.environment.to_json(),
                "dataset": self.dataset.to_json(),
                "metrics": list(self.metrics),
                "systems": [row.to_json() for row in self.systems],
            }
        return self._head_json() | self._tail_json()

    def _head_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "schema": self.schema,
            "environment": self.environment.to_json(),
            "dataset": self.dataset.to_json(),
            "metrics": list(self.metrics),
            "reference": self.reference,
        }
        return out | _without_none(
            (
                ("significance", None if self.significance is None else self.significance.to_json()),
                ("judged_queries", self.judged_queries),
                ("questions", self.questions),
                ("latency", None if self.latency is None else self.latency.to_json()),
                ("without_labels", None if self.without_labels is None else self.without_labels.to_json()),
                ("skipped", None if self.skipped is None else [item.to_json() for item in self.skipped]),
                ("engines", None if self.engines is None else [item.to_json() for item in self.engines]),
            )
        )

    def _tail_json(self) -> dict[str, Any]:
        return {"systems": [row.to_json() for row in self.systems]} | _without_none(
            (
                ("per_query", self.per_query),
                ("tuned_split", None if self.tuned_split is None else self.tuned_split.to_json()),
                ("gate", None if self.gate is None else self.gate.to_json()),
                ("run_files", None if self.run_files is None else list(self.run_files)),
                ("run_file_of", None if self.run_file_of is None else dict(self.run_file_of)),
            )
        )

    def row(self, name: str) -> SystemResult | None:
        """The row called ``name``, or None."""
        return next((row for row in self.systems if row.name == name), None)


def _built(build: Any, value: Any) -> Any:
    return None if value is None else build(value)


def _skipped(items: Any) -> tuple[Skipped, ...] | None:
    if items is None:
        return None
    return tuple(Skipped(item["tokenizer"], item["reason"], item.get("hint", "")) for item in items)


def as_comparison(report: Comparison | Mapping[str, Any]) -> Comparison:
    """``report`` as the model: a Comparison as it is, report.json's content (a report read by hand, a report of an
    earlier version) built into one."""
    return report if isinstance(report, Comparison) else Comparison.from_json(report)


def as_rows(rows: Sequence[SystemResult | Mapping[str, Any]]) -> list[SystemResult]:
    """Rows as the model: each a SystemResult as it is, or built from report.json's row."""
    return [row if isinstance(row, SystemResult) else SystemResult.from_json(row) for row in rows]
