"""Markup is escaped by construction: text and attribute values always, markup never twice."""

from __future__ import annotations

from ctxproxy.inspector.markup import Html, esc, join, raw, tag

EVIL = "<script>alert('x')</script>"


def test_text_children_and_attribute_values_are_escaped() -> None:
    out = tag("a", EVIL, href=f'/x?q="{EVIL}"', title="a & b")
    assert out == (
        '<a href="/x?q=&quot;&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;&quot;" title="a &amp; b">'
        "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;</a>"
    )
    assert "<script" not in out


def test_markup_is_inserted_once_and_nested_lists_flatten() -> None:
    inner = tag("b", "x<y")
    out = tag("p", inner, [" and ", [tag("i", 1), None, 2.5]])
    assert out == "<p><b>x&lt;y</b> and <i>1</i>2.5</p>"
    assert isinstance(out, Html) and esc(out) is out


def test_attribute_names_and_flags() -> None:
    assert tag("input", type="search", required=True, disabled=False, value=None) == '<input type="search" required>'
    assert (
        tag("td", class_="num", data_tenant="t", aria_label="a")
        == '<td class="num" data-tenant="t" aria-label="a"></td>'
    )


def test_plain_strings_are_never_trusted() -> None:
    assert join(["<b>", raw("<b>")]) == "&lt;b&gt;<b>"
    assert esc("<") == "&lt;" and esc(3) == "3"
