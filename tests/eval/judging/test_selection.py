"""The judging order and the settled signal (rag_eval.eval.judging.selection) on small hand-made runs."""

from __future__ import annotations

import math

import pytest

from rag_eval.errors import RagEvalError
from rag_eval.eval.judging import selection
from rag_eval.eval.judging.selection import DEFAULT_METHOD, METHODS, PICK_SURE, Selector
from rag_eval.eval.judging.session import decision_words

# two systems that swap their top two passages on one query, and agree on another
SWAP = {
    "a": {"q1": ["x", "y"], "q2": ["z"]},
    "b": {"q1": ["y", "x"], "q2": ["z"]},
}


def test_the_pool_is_the_union_of_each_systems_top_depth() -> None:
    runs = {"a": {"q1": ["d1", "d2", "d3"]}, "b": {"q1": ["d4", "d1"], "q2": ["d5"]}}
    selector = Selector(runs, depth=2)
    assert {q: sorted(d) for q, d in selector.pool.items()} == {"q1": ["d1", "d2", "d4"], "q2": ["d5"]}
    assert selector.decision().pooled == 4 and selector.judged == {}


def test_the_naive_order_is_rank_1_of_every_system_for_every_query_then_rank_2() -> None:
    runs = {
        "a": {"q1": ["a1", "s1", "a3"], "q2": ["s2", "a2"]},
        "b": {"q1": ["s1", "b2"], "q2": ["s2", "b3", "b4"]},
    }
    selector = Selector(runs, method="naive", depth=3)
    seen = []
    while (pair := selector.next()) is not None:
        seen.append(pair)
        selector.record(*pair, 0)
    # rank 1: q1 a1, s1 (b's rank 1); q2 s2 (both); rank 2: q1 b2 (s1 already seen); q2 a2, b3; rank 3: ...
    assert seen == [
        ("q1", "a1"),
        ("q1", "s1"),
        ("q2", "s2"),
        ("q1", "b2"),
        ("q2", "a2"),
        ("q2", "b3"),
        ("q1", "a3"),
        ("q2", "b4"),
    ]


@pytest.mark.parametrize("method", METHODS)
def test_every_method_visits_every_pooled_pair_once_then_says_none(method: str) -> None:
    selector = Selector(SWAP, method=method, samples=50)
    seen = set()
    while (pair := selector.next()) is not None:
        assert pair not in seen
        seen.add(pair)
        selector.record(*pair, 1)
    assert seen == {("q1", "x"), ("q1", "y"), ("q2", "z")}
    decision = selector.decision()
    assert decision.judged == decision.pooled == 3 and decision.certain and decision.settled


def test_next_skips_excluded_pairs() -> None:
    selector = Selector(SWAP, method="naive")
    assert selector.next() == ("q1", "x")
    assert selector.next(exclude=[("q1", "x")]) == ("q1", "y")
    assert selector.next(exclude=[("q1", "x"), ("q1", "y"), ("q2", "z")]) is None


def test_a_single_judgment_decides() -> None:
    """x is a's first and b's second passage: once x is graded 2, whatever y gets, a wins or ties."""
    selector = Selector(SWAP)
    assert not selector.decision().certain
    selector.record("q1", "x", 2)
    decision = selector.decision()
    assert decision.certain and decision.settled and decision.confidence == 1.0
    assert decision.leader == "a" and decision.runner_up == "b"


def test_not_certain_while_an_unjudged_passage_can_still_turn_the_result() -> None:
    """Only the shared z is judged: x relevant makes a win, y relevant makes b win."""
    selector = Selector(SWAP)
    selector.record("q2", "z", 1)
    assert not selector.decision().certain
    selector.record("q1", "x", 0)
    decision = selector.decision()  # y relevant: b wins; y not: a tie; b wins or ties either way
    assert decision.certain and decision.leader == "b"
    selector.record("q1", "y", 1)
    # hand-computed over q1 and q2: a = (1 / log2(3) + 1) / 2, b = (1 + 1) / 2
    assert selector.judged_scores() == pytest.approx({"a": (1 / math.log2(3) + 1) / 2, "b": 1.0})
    assert selector.decision().margin == pytest.approx(1 - (1 / math.log2(3) + 1) / 2)


def test_certain_allows_the_largest_grade_recorded() -> None:
    """a ranks w first, b ranks w second and v first; v unjudged could be 5 (a 5 was recorded elsewhere)."""
    runs = {"a": {"q1": ["w", "v"], "q2": ["u"]}, "b": {"q1": ["v", "w"], "q2": ["u"]}}
    selector = Selector(runs)
    selector.record("q1", "w", 2)
    assert selector.decision().certain  # v <= 2 only ties
    selector.record("q2", "u", 5)
    assert not selector.decision().certain  # v = 5 would make b win q1


def test_forget_restores_the_previous_state_exactly() -> None:
    runs = {
        "a": {"q1": ["d1", "d2", "d3"], "q2": ["e1", "e2"]},
        "b": {"q1": ["d3", "d1", "d4"], "q2": ["e2", "e3"]},
        "c": {"q1": ["d2", "d4"]},
    }
    selector = Selector(runs, samples=200, seed=3)
    selector.record("q1", "d1", 1)
    before, pair = selector.decision(), selector.next()
    selector.record("q2", "e2", 2)
    selector.record("q1", "d1", 0)  # re-recording replaces
    assert selector.judged == {"q1": {"d1": 0}, "q2": {"e2": 2}}
    selector.forget("q2", "e2")
    selector.record("q1", "d1", 1)
    assert selector.decision() == before and selector.next() == pair
    selector.forget("q1", "d1")
    assert selector.judged == {} and selector.decision() == Selector(runs, samples=200, seed=3).decision()


def test_the_same_seed_gives_the_same_order_and_decisions() -> None:
    runs = {f"s{k}": {f"q{q}": [f"d{(q + k * r) % 13}" for r in range(1, 6)] for q in range(6)} for k in range(1, 4)}

    def replay(seed: int) -> list[tuple[tuple[str, str], float]]:
        selector = Selector(runs, samples=100, seed=seed)
        out = []
        for step in range(12):
            pair = selector.next()
            assert pair is not None
            selector.record(*pair, step % 3)
            out.append((pair, selector.decision().confidence))
        return out

    assert replay(7) == replay(7)


def test_queries_not_every_system_answered_and_short_lists() -> None:
    runs = {"a": {"q1": ["d1"]}, "b": {"q2": ["d2", "d3"]}, "c": {"q1": [], "q2": ["d3"]}}
    selector = Selector(runs)
    assert selector.pool == {"q1": ["d1"], "q2": ["d3", "d2"]}
    selector.record("q1", "d1", 1)
    selector.record("q2", "d2", 0)
    selector.record("q2", "d3", 0)
    decision = selector.decision()
    # q2 has no relevant passage: it counts as 0 in the mean, as compare counts it
    assert decision.certain and decision.leader == "a" and decision.scores["a"] == pytest.approx(0.5)
    assert decision.line().startswith("winner a, 0.500 nDCG@10 ahead of b; settled for certain")
    assert decision.line().endswith("; 3 of 3 judged")


def test_the_default_method_is_listed() -> None:
    assert DEFAULT_METHOD in METHODS and "naive" in METHODS


@pytest.mark.parametrize(
    ("runs", "options", "message"),
    [
        (SWAP, {"method": "bogus"}, "unknown judging order 'bogus'; choose from: naive"),
        (SWAP, {"depth": 0}, "depth"),
        ({}, {}, "no runs"),
        ({"a": {}}, {}, "no runs"),
        ({"a": {"q1": "d1"}}, {}, "list of document ids"),
        ({"a": {"q1": ["d1", "d1"]}}, {}, "ranked twice"),
        (SWAP, {"target": 0}, "target"),
    ],
)
def test_invalid_input_is_a_rag_eval_error(runs: object, options: dict[str, object], message: str) -> None:
    with pytest.raises(RagEvalError, match=message):
        Selector(runs, **options)  # type: ignore[arg-type]


def test_invalid_grades_and_pairs_are_rag_eval_errors() -> None:
    selector = Selector(SWAP)
    with pytest.raises(RagEvalError, match="grade"):
        selector.record("q1", "x", -1)
    with pytest.raises(RagEvalError, match="not in the pool"):
        selector.record("q1", "nope", 1)
    with pytest.raises(RagEvalError, match="no grade to forget"):
        selector.forget("q1", "x")


def test_settled_needs_a_grade_per_query_and_the_target_held_for_ten_grades() -> None:
    """a ranks each query's relevant passage first, b second. With a target any leader meets, the decision
    settles at the 12th grade (one per query), not before, and not by certainty."""
    queries = [f"q{n:02d}" for n in range(12)]
    runs = {"a": {q: [f"{q}r", f"{q}n"] for q in queries}, "b": {q: [f"{q}n", f"{q}r"] for q in queries}}
    selector = Selector(runs, target=0.01, samples=200)
    settled_at = []
    for step, query in enumerate(queries, start=1):
        selector.record(query, f"{query}r", 1)  # every query's relevant passage: a pulls ahead
        decision = selector.decision()
        assert not decision.certain  # the unjudged second passages could still be relevant
        if decision.settled:
            settled_at.append(step)
    assert settled_at == [12] and decision.leader == "a"
    selector.forget(queries[-1], f"{queries[-1]}r")
    assert not selector.decision().settled

    # grades recorded without a decision do not count towards the ten
    fresh = Selector(runs, target=0.01, samples=200)
    for query in queries:
        fresh.record(query, f"{query}r", 1)
    looks = [fresh.decision()]
    for query in queries[:9]:
        fresh.record(query, f"{query}n", 0)
        looks.append(fresh.decision())
    held = [d.settled for d in looks if not d.certain]  # late on, certainty alone settles it
    assert held[:9] == [False] * min(9, len(held)) and len(held) >= 6


def test_in_a_close_race_the_leader_is_the_best_system_on_the_judged_passages() -> None:
    # three systems with disjoint pools; one relevant passage found, at b's rank 2: too little for the
    # model to favour anyone strongly, so the pick is the judged-only best (b), not the model's favourite
    runs = {s: {f"q{i}": [f"{s}{i}_{r}" for r in range(10)] for i in range(12)} for s in "abc"}
    selector = Selector(runs)
    selector.record("q0", "b0_1", 2)
    wins = selector.completions().winners.mean(axis=1)
    decision = selector.decision()
    assert int(wins.argmax()) != 1 and wins.max() < PICK_SURE
    assert decision.leader == "b" and not decision.settled
    assert decision.confidence == pytest.approx(wins[1])
    # the pick is kept (the oracle counts it), but the page and the line name no leader: too early to tell
    assert decision.too_early and decision.line().startswith("too early to tell which system is best")


def test_a_leader_behind_on_average_is_never_said_to_lead_by_a_negative_margin() -> None:
    """Regression: the page said 'b leads a by -0.004' when the pick trails the runner-up's expected score."""
    runs = {s: {f"q{i}": [f"{s}{i}_{r}" for r in range(10)] for i in range(12)} for s in "abc"}
    selector = Selector(runs)
    selector.record("q0", "b0_1", 2)
    decision = selector.decision()
    assert decision.margin < 0 and decision.confidence < PICK_SURE
    for words in (decision.line(), decision_words(decision)):
        assert "-0." not in words and "leader" not in words.lower() and "too early to tell" in words.lower()


# q1, q2 and q3 each have passages the two systems rank differently
THREE = {
    "a": {"q1": ["x", "y", "w", "t"], "q2": ["u", "v"], "q3": ["m", "n"]},
    "b": {"q1": ["t", "w", "y", "x"], "q2": ["v", "u"], "q3": ["n", "m"]},
}


def _until_q1(selector: Selector) -> list[tuple[str, str]]:
    """Grade 0 to every pair chosen until one of q1 comes up; the pairs chosen before it."""
    seen = []
    while (pair := selector.next()) is not None and pair[0] != "q1":
        seen.append(pair)
        selector.record(*pair, 0)
    assert pair is not None and pair[0] == "q1"
    return seen


def test_while_answered_queries_are_expected_to_hold_few_more_they_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    """Once q1 has a relevant passage, its other passages (still able to move the race) wait until q2 and
    q3, which have none judged relevant yet, are answered or exhausted."""
    monkeypatch.setattr(selection, "FEW_MORE", math.inf)
    selector = Selector(THREE, samples=50)
    selector.record("q1", "x", 2)
    assert sorted(_until_q1(selector)) == [("q2", "u"), ("q2", "v"), ("q3", "m"), ("q3", "n")]
    # once every query is answered the rule no longer restricts
    selector = Selector(THREE, samples=50)
    for pair, grade in ((("q1", "x"), 1), (("q2", "u"), 2), (("q3", "m"), 2)):
        selector.record(*pair, grade)
    assert selector.next() is not None


def test_where_answered_queries_may_hold_more_they_compete(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(selection, "FEW_MORE", 0.0)
    selector = Selector(THREE, samples=50)
    selector.record("q1", "x", 2)
    assert len(_until_q1(selector)) < 4  # q1 had a second look before q2 and q3 were done


def test_the_model_learns_whether_answered_queries_hold_more() -> None:
    """Four queries judged completely teach the model how many relevant passages a query holds beyond its
    first: few when each held one (answered queries then wait), many when each held three."""
    docs = ["d1", "d2", "d3", "d4"]
    runs = {
        "a": {f"q{n:02d}": [f"{d}-{n}" for d in docs] for n in range(1, 13)},
        "b": {f"q{n:02d}": [f"{d}-{n}" for d in reversed(docs)] for n in range(1, 13)},
    }

    def taught(relevant: set[str]) -> float | None:
        selector = Selector(runs, samples=200)
        assert selector.more_expected() is None  # nothing answered yet
        for n in range(1, 5):
            for d in docs:
                selector.record(f"q{n:02d}", f"{d}-{n}", 2 if d in relevant else 0)
        for n in range(5, 12):
            selector.record(f"q{n:02d}", f"d1-{n}", 2)
        return selector.more_expected()

    one, three = taught({"d1"}), taught({"d1", "d2", "d4"})
    assert one is not None and three is not None
    assert one < selection.FEW_MORE < three


def test_the_scores_shown_are_the_means_compare_reports_once_everything_is_judged() -> None:
    """A question whose pooled passages are all graded 0 counts in compare's means (as 0); the page's scores
    and margin said the means over the questions with a relevant passage (0.693 and 1.0 here, not 0.347, 0.5)."""
    from rag_eval.eval.metrics.measures import Qrel, RankedDoc, evaluate

    runs = {"a": {"q1": ["y", "x"], "q2": ["z"]}, "b": {"q1": ["x", "y"], "q2": ["w"]}}
    grades = {("q1", "x"): 1, ("q1", "y"): 0, ("q2", "z"): 0, ("q2", "w"): 0}
    selector = Selector(runs, samples=50)
    for (query, doc), grade in grades.items():
        selector.record(query, doc, grade)
    decision = selector.decision()
    assert decision.certain
    qrels = [Qrel(q, d, g) for (q, d), g in grades.items()]
    for system, by_query in runs.items():
        run = [RankedDoc(q, d, n, 1.0 / n) for q, docs in by_query.items() for n, d in enumerate(docs, 1)]
        means, _ = evaluate(qrels, run, ["nDCG@10"])
        assert math.isclose(decision.scores[system], means["nDCG@10"], rel_tol=1e-9), system
    assert math.isclose(decision.margin, decision.scores["b"] - decision.scores["a"], rel_tol=1e-9)
    assert decision.leader == "b"
