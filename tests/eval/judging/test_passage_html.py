"""A passage's Markdown rendered for the judging page (issue #34): tables, lists, code and links as text, never
raw HTML, an address to follow, or a style; the question's terms marked in the text as it reads."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rag_eval.eval.judging.passage_html import TAGS, render_markdown
from rag_eval.eval.judging.session import query_marks
from rag_eval.tokenizers import get_tokenizer

#: Attributes the renderer may write, per tag, and the values they may take (None: any text).
ALLOWED: dict[str, dict[str, re.Pattern[str] | None]] = {
    "th": {"class": re.compile(r"left|center|right")},
    "td": {"class": re.compile(r"left|center|right")},
    "ol": {"start": re.compile(r"\d{1,9}")},
    "mark": {"class": re.compile(r"char")},
    "span": {"class": re.compile(r"link|image"), "title": None},
}


class Checked(HTMLParser):
    """Parses rendered HTML as a browser would, failing on any tag or attribute the renderer must not write."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.text: list[str] = []
        self.tags: list[str] = []
        self.marked: list[str] = []
        self.open: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        assert tag in TAGS | {"span", "mark"}, tag
        allowed = ALLOWED.get(tag, {})
        for name, value in attrs:
            assert name in allowed, (tag, name, value)
            pattern = allowed[name]
            assert value is not None and (pattern is None or pattern.fullmatch(value)), (tag, name, value)
        self.tags.append(tag)
        if tag not in ("br", "hr"):
            self.open.append(tag)
        if tag == "mark":
            self.marked.append("")

    def handle_endtag(self, tag: str) -> None:
        assert self.open and self.open.pop() == tag, (tag, self.open)

    def handle_data(self, data: str) -> None:
        self.text.append(data)
        if "mark" in self.open:
            self.marked[-1] += data

    def unknown_decl(self, data: str) -> None:
        raise AssertionError(f"a declaration: {data}")

    def handle_comment(self, data: str) -> None:
        raise AssertionError(f"a comment: {data}")

    def handle_pi(self, data: str) -> None:
        raise AssertionError(f"a processing instruction: {data}")


def checked(markdown: str, question: str = "", spec: str = "bigram") -> Checked:
    tokenizers = [get_tokenizer(spec)]
    rendered = render_markdown(markdown, lambda text: query_marks(text, question, tokenizers))
    parser = Checked()
    parser.feed(rendered)
    parser.close()
    assert parser.open == [], parser.open  # every tag closed
    return parser


HOSTILE = {
    "script": ("<script>alert(1)</script>\n\n<script>\nalert(2)\n</script>", "<script>alert(1)</script>"),
    "img onerror": ('<img src=x onerror="alert(1)">', '<img src=x onerror="alert(1)">'),
    "javascript link": ("[导出](javascript:alert(1)) [x](JaVaScRiPt:alert(1))", "javascript:alert(1)"),
    "autolink": ('<javascript:alert(1)> <https://evil.example/?a=1&b="2">', "javascript:alert(1)"),
    "link with a quote": ('[导出](https://evil.example/x"onmouseover="alert(1))', "导出"),
    "reference link": ("[导出][1]\n\n[1]: https://evil.example 'title\" onclick=\"x'", "导出"),
    "entities": ("&lt;script&gt;alert(1)&lt;/script&gt; &amp;lt;b&amp;gt; &#60;i&#62;", "<script>alert(1)</script>"),
    "image": ('![<img onerror=x>](javascript:alert(1) "t") ![a](data:text/html,<b>)', "<img onerror=x>"),
    "html block": ("<div onclick=alert(1)>\n\n**x**\n\n</div>\n<!-- comment --><?php x ?><![CDATA[y]]>", "<div"),
    "style in a table": ("| a |\n|:-:|\n| <b style='x'>b</b> |", "<b style='x'>b</b>"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_markdown_is_text_never_markup_or_an_address(case: str) -> None:
    markdown, shown = HOSTILE[case]
    parser = checked(markdown)
    assert shown in "".join(parser.text)  # what the passage says is there, as text


def test_a_link_is_its_text_with_its_address_as_a_title() -> None:
    rendered = render_markdown("见 [导出说明](https://example.com/a?b=1&c=<2>) 一节")
    assert rendered == (
        '<p>见 <span class="link" title="https://example.com/a?b=1&amp;c=%3C2%3E">导出说明</span> 一节</p>'
    )


def test_a_pipe_table_of_40_rows_is_a_table() -> None:
    rows = "\n".join(f"| 计划{n} | {n * 10} | [链接](https://x.example/{n}) |" for n in range(40))
    parser = checked(f"| 名称 | 上限 | 说明 |\n|:--|--:|---|\n{rows}\n", "计划")
    assert parser.tags.count("table") == 1 and parser.tags.count("tr") == 41 and parser.tags.count("td") == 120
    assert "|" not in "".join(parser.text) and parser.marked.count("计划") == 40


def test_fenced_code_keeps_its_text() -> None:
    code = 'if (a < b && c > "d") { 导出(); }\n<script>x</script>\n'
    parser = checked(f"```js\n{code}```\n\n    indented <b>\n", "导出")
    assert parser.tags[:2] == ["pre", "code"] and code in "".join(parser.text)
    assert "indented <b>" in "".join(parser.text) and parser.marked == ["导出"]


def test_terms_are_marked_across_emphasis_and_in_every_kind_of_text() -> None:
    """The terms are looked for in the text as it reads: ``**导出**数据`` is 导出数据 to jieba."""
    markdown = "## 导出\n\n**导出**数据，*导*出 `导出` ~~导出~~\n\n- 导出\n- > 导出\n\n![导出](a.png) [导出](b)"
    parser = checked(markdown, "导出数据", spec="jieba")
    assert "".join(parser.marked).count("导出") >= 8
    assert "导出" in parser.marked and "数据" in "".join(parser.marked)
    # nested emphasis around a term: the mark sits inside it, and the tags still nest
    assert re.search(
        r"<strong><mark>导出</mark></strong><mark>数据</mark>",
        render_markdown("**导出**数据", lambda text: query_marks(text, "导出数据", [get_tokenizer("bigram")])),
    )


def test_single_character_matches_are_marked_as_such() -> None:
    rendered = render_markdown("文件的天数", lambda text: query_marks(text, "文件的天数", [get_tokenizer("unigram")]))
    assert '<mark class="char">' in rendered and "<mark>" not in rendered


def test_marks_in_the_plain_text_are_those_of_the_text_as_it_reads() -> None:
    """Offsets are code points of the text as it reads, not of the Markdown: a term after a link target or an
    escaped character is marked where it is."""
    seen: list[str] = []

    def mark(text: str) -> list[tuple[int, int, int]]:
        seen.append(text)
        at = text.index("导出")
        return [(at, at + 2, 2)]

    rendered = render_markdown("[a](https://x.example/很长的地址) \\*&amp; 😀导出", mark)
    assert seen == ["a *& 😀导出\n"]
    assert rendered.endswith("*&amp; 😀<mark>导出</mark></p>")


FRAGMENTS = [
    "导出",
    "数据",
    "<script>",
    "</script>",
    "<img src=x onerror=alert(1)>",
    "[",
    "]",
    "(",
    ")",
    "javascript:",
    "https://e.example/",
    "*",
    "**",
    "_",
    "`",
    "```",
    "~~~",
    "\n",
    "\n\n",
    "| a | b |\n|---|:-:|\n",
    "|",
    "- ",
    "1. ",
    "> ",
    "# ",
    "&amp;",
    "&lt;",
    "&#x3c;",
    "\\",
    "!",
    "<",
    ">",
    '"',
    "'",
    "    ",
    "<!--",
    "-->",
    "---",
    "<https://a.example>",
    "<a href='x'>",
    "style=",
    "![",
    "&",
    "\t",
    "😀",
    "\u200b",
]


@given(st.lists(st.sampled_from(FRAGMENTS), max_size=40).map("".join), st.sampled_from(["导出数据", "script", "a"]))
def test_any_markdown_renders_to_the_allowed_tags_with_its_text_escaped(markdown: str, question: str) -> None:
    parser = checked(markdown, question)
    assert all(parser.marked)  # every mark holds text
