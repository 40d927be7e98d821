"""A judging session: the passage on show (its Markdown rendered), grades, undo, skip, the decision in words,
the time left, and the highlights of the question's terms under every compared tokenizer (what the page asks
for)."""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ...builders import get_builder
from ...errors import RagEvalError
from ...files.textio import counted
from ...tokenizers import Tokenizer
from .judgments import Judgments
from .log_records import JudgmentsConflict
from .passage_html import render_markdown
from .selection import TOO_EARLY, score_text

if TYPE_CHECKING:
    from .pool import Pool
    from .selection import Decision, Selector

#: Gaps between two grades longer than this are breaks, not the assessor's pace.
BREAK_SECONDS = 300.0


# -- highlighting -------------------------------------------------------------------------------------------


def query_marks(text: str, question: str, tokenizers: Sequence[Tokenizer]) -> list[tuple[int, int, int]]:
    """Spans ``(start, end, level)`` of ``text`` whose tokens are the question's terms under ANY of the
    tokenizers (each field of a hybrid on its own): level 2 where a term of two or more characters matches,
    1 where only single characters do (unigram's matches would otherwise drown the words)."""
    levels = [0] * len(text)
    for tokenizer in tokenizers:
        for field, terms in zip(tokenizer.fields, tokenizer.field_queries(question), strict=True):
            wanted = set(terms.terms)
            if not wanted or not text:
                continue
            for token in field.tokenizer.tokenize(text):
                if token.text in wanted:
                    level = 2 if token.end - token.start > 1 else 1
                    for position in range(token.start, token.end):
                        levels[position] = max(levels[position], level)
    spans: list[tuple[int, int, int]] = []
    for position, level in enumerate(levels):
        if not level:
            continue
        if spans and spans[-1][1] == position and spans[-1][2] == level:
            spans[-1] = (spans[-1][0], position + 1, level)
        else:
            spans.append((position, position + 1, level))
    return spans


# -- the session --------------------------------------------------------------------------------------------


def decision_words(decision: Decision) -> str:
    """The decision so far in plain words: the leader is the first bar, or the words say why it leads all the
    same; before a leader is likely enough, that it is too early to tell."""
    if decision.judged == 0:
        return "No grades yet: too early to tell which system is best."
    if decision.too_early:
        return f"Too early to tell which system is best: {TOO_EARLY}. Keep judging."
    left = counted(decision.pooled - decision.judged, "unjudged passage")
    if decision.certain:
        return f"Winner: {decision.lead()}. Settled for certain: no grades of the {left} can change the winner."
    # off the top bar, the lead itself says how often the leader comes out best: the same number
    sure = f"; {decision.percent}% sure it stays ahead" if decision.on_top else ""
    if decision.settled:
        return f"Leader: {decision.lead()}{sure}. Settled: you may stop, though the {left} could still change it."
    return f"Leader: {decision.lead()}{sure}. Not settled yet: keep judging."


def decision_badge(decision: Decision) -> str:
    """The decision's state in a few words, with the same percentage as :func:`decision_words`."""
    if decision.judged == 0:
        return "no grades yet"
    if decision.too_early:
        return "too early to tell"
    if decision.certain:
        return "settled for certain"
    return f"{'settled' if decision.settled else 'not settled'} · {decision.percent}% sure"


def decision_view(decision: Decision) -> dict[str, Any]:
    """What the page shows of the decision: every number in it rounded here, once."""
    return {
        # the system the words name as leader (None while it is too early to tell)
        "leader": None if decision.too_early else decision.leader,
        "percent": None if decision.too_early else decision.percent,
        "settled": decision.settled,
        "certain": decision.certain,
        "badge": decision_badge(decision),
        "words": decision_words(decision),
        "line": decision.line(),
        # before the first grade the model's estimate says nothing about the systems: no bars
        "bars": [] if decision.judged == 0 else [[name, score, score_text(score)] for name, score in decision.bars()],
    }


class Session:
    """One assessor's judging of a pool: the passage on show, grades, undo, skip; safe across threads."""

    def __init__(self, pool: Pool, judgments: Judgments, selector: Selector) -> None:
        self.pool = pool
        self.judgments = judgments
        self.selector = selector
        self.lock = threading.Lock()
        self.current: tuple[str, str] | None = None
        self.grade_times: list[float] = []
        builder = get_builder(next(iter(pool.systems.values())).builder) if pool.systems else None
        self.markdown = builder is not None and builder.text_markup == "markdown"
        in_pool = {(query, doc) for query, docs in selector.pool.items() for doc in docs}
        for query_id, docs in judgments.grades.items():
            for doc_id, grade in docs.items():
                if (query_id, doc_id) in in_pool:
                    selector.record(query_id, doc_id, grade)

    # Every public method takes the lock: the HTTP server answers requests on several threads.

    def state(self, position: int | None = None) -> dict[str, Any]:
        """What the page shows: the passage at ``position`` in the judged history, else the next to judge."""
        with self.lock:
            return self._state(position)

    def grade(self, query_id: str, doc_id: str, grade: int, position: int | None = None) -> dict[str, Any]:
        """Grade a pooled pair (again, to change it, from its ``position`` in the history) and move on. A new grade
        (no ``position``) for a pair already graded is :class:`JudgmentsConflict`: another page graded it meanwhile,
        and this one would overwrite that grade without having seen it."""
        with self.lock:
            self._check_pair(query_id, doc_id)
            history = self.judgments.history() if position is not None else []
            if position is not None and not (0 <= position < len(history) and history[position] == (query_id, doc_id)):
                # a stale page (another tab undid it) or a made-up position: never a new grade past the check below
                raise JudgmentsConflict(
                    "the judged history changed, in another tab or window; the page now shows where judging stands"
                )
            if position is None and self.judgments.grade_of(query_id, doc_id) is not None:
                raise JudgmentsConflict(
                    "this passage was graded meanwhile, in another tab or window; the page now shows where "
                    "judging stands (step back with k to change that grade)"
                )
            self.judgments.record(query_id, doc_id, grade)
            self.selector.record(query_id, doc_id, grade)
            self.grade_times.append(time.monotonic())
            if self.current == (query_id, doc_id):
                self.current = None
            if position is not None:
                following = position + 1
                return self._state(following if following < len(history) else None)
            return self._state(None)

    def undo(self) -> dict[str, Any]:
        """Withdraw the last grade and show that passage again."""
        with self.lock:
            undone = self.judgments.undo()
            if undone is not None:
                pair = (undone.query_id, undone.doc_id)
                earlier = self.judgments.grade_of(*pair)
                if earlier is None:
                    self.selector.forget(*pair)
                else:
                    self.selector.record(*pair, earlier)
                self.current = pair
                if self.grade_times:
                    self.grade_times.pop()
            state = self._state(None)
            state["undone"] = (
                None
                if undone is None
                else {
                    "query": undone.query_id,
                    "doc": undone.doc_id,
                    "grade": self.judgments.grade_of(undone.query_id, undone.doc_id),
                }
            )
            return state

    def skip(self, query_id: str, doc_id: str) -> dict[str, Any]:
        """Pass over a pair for now; it comes back when nothing else is left."""
        with self.lock:
            self._check_pair(query_id, doc_id)
            self.judgments.skip(query_id, doc_id)
            if self.current == (query_id, doc_id):
                self.current = None
            return self._state(None)

    def _check_pair(self, query_id: str, doc_id: str) -> None:
        if doc_id not in self.selector.pool.get(query_id, ()):
            raise RagEvalError(f"{query_id} / {doc_id} is not in the pool")

    def _next(self) -> tuple[str, str] | None:
        judged = self.selector.judged
        if self.current is not None and self.current[1] not in judged.get(self.current[0], {}):
            return self.current
        skipped = {pair for pair in self.judgments.skipped if pair[1] not in judged.get(pair[0], {})}
        self.current = self.selector.next(exclude=skipped)
        if self.current is None and skipped:
            self.current = self.selector.next()  # only skipped passages are left: show them again
        return self.current

    def _state(self, position: int | None) -> dict[str, Any]:
        history = self.judgments.history()
        if position is not None and not 0 <= position < len(history):
            position = None
        pair = history[position] if position is not None else self._next()
        decision = self.selector.decision()
        left = decision.pooled - decision.judged
        return {
            "item": None if pair is None else self._item(*pair),
            "position": position,
            "history": len(history),
            "judged": decision.judged,
            "pooled": decision.pooled,
            "left": left,
            "skipped": len(self.judgments.skipped),
            "estimate": self._estimate(left, decision),
            "decision": decision_view(decision),
        }

    def _item(self, query_id: str, doc_id: str) -> dict[str, Any]:
        question = self.pool.dataset.queries[query_id].text
        passage = self.pool.dataset.corpus[doc_id]
        tokenizers = list(self.pool.tokenizers.values())

        def marks(text: str) -> list[tuple[int, int, int]]:
            return query_marks(text, question, tokenizers)

        return {
            "query": query_id,
            "question": question,
            "doc": doc_id,
            "title": passage.title,
            "title_marks": marks(passage.title),
            # the text as written, with its marks (the page's source view), and rendered when it is Markdown
            "text": passage.text,
            "marks": marks(passage.text),
            "html": render_markdown(passage.text, marks) if self.markdown else None,
            "grade": self.judgments.grade_of(query_id, doc_id),
            "skipped": (query_id, doc_id) in self.judgments.skipped,
        }

    def _estimate(self, left: int, decision: Decision) -> str:
        if left == 0:
            return "Every pooled passage is judged."
        gaps = [b - a for a, b in zip(self.grade_times, self.grade_times[1:], strict=False) if b - a < BREAK_SECONDS]
        if decision.certain:
            prefix = "Nothing left can change the winner"
        elif decision.settled:
            prefix = "The winner is settled"
        else:
            prefix = f"{counted(left, 'passage')} left"
        if len(gaps) < 3:
            return f"{prefix}; an estimate of the time needs a few more grades."
        pace = statistics.median(gaps)
        return f"{prefix}; about {_duration(left * pace)} to judge them all at {_duration(pace)} a passage."


def _duration(seconds: float) -> str:
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
