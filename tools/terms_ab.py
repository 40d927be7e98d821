"""Builds with a Python strategy's terms taken straight from its spans (a9c38fc) against the Token path
before it, in one process, alternating which goes first, each setting's best of 3 (measured for a9c38fc;
the figures are in the git history of reports/builds.md):

    .venv/bin/python tools/terms_ab.py CORPUS_DIR BUILDER STRATEGY ...

"old" re-creates the build's tokenization step as it was before a9c38fc (``tokenize``, the texts of its
Tokens and, for a builder that keeps offsets, theirs); "new" is the library's. Prints build seconds without
the model load, and the build's tokenize seconds.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

os.environ["RAG_EVAL_WORKERS"] = "1"
from rag_eval.index import tokenize_pool  # noqa: E402
from rag_eval.index.offsets import encode  # noqa: E402
from rag_eval.index.writer import build  # noqa: E402

new = tokenize_pool._tokenize_one


def old(tokenizer, title, text, keep_offsets):  # type: ignore[no-untyped-def]
    tokens = tokenizer.tokenize(text)
    return (
        " ".join(t.text for t in tokenizer.tokenize(title)) if title else "",
        " ".join(t.text for t in tokens),
        encode(tokens) if keep_offsets else None,
    )


corpus, builder = sys.argv[1], sys.argv[2]
for spec in sys.argv[3:]:
    res = {"old": [], "new": []}
    for r in range(3):
        for name, fn in (("old", old), ("new", new)) if r % 2 == 0 else (("new", new), ("old", old)):
            tokenize_pool._tokenize_one = fn
            with tempfile.TemporaryDirectory() as d:
                rep = build(corpus, Path(d) / "i.sqlite", builder=builder, tokenizer=spec)
                res[name].append((rep.seconds - rep.tokenizer_load_seconds, rep.tokenize_seconds))
    for name, v in res.items():
        print(spec, name, "build {:.2f} s (tokenize {:.2f} s)".format(*min(v)))
