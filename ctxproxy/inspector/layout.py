"""The inspector's page chrome: the document, its style sheet (inline: nothing is loaded from
elsewhere, so it works offline), the header with the logout form, and small shared pieces."""

from __future__ import annotations

from collections.abc import Sequence
from urllib.parse import quote, urlencode

from ctxproxy.inspector.markup import Child, Html, join, raw, tag

ROOT = "/admin/ui"

_STYLE = raw(
    """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;color:#1f2328;background:#f6f8fa}
header{background:#24292f;color:#fff;padding:10px 24px;display:flex;gap:24px;align-items:center}
header a{color:#fff;text-decoration:none;font-weight:600}
header form{margin-left:auto}
main{max-width:1100px;margin:0 auto;padding:16px 24px}
h1{font-size:22px;margin:8px 0 16px}h2{font-size:17px;margin:24px 0 8px}
section.card{background:#fff;border:1px solid #d0d7de;border-radius:6px;padding:12px 16px;margin:12px 0}
table{border-collapse:collapse;width:100%;background:#fff}
th,td{border-bottom:1px solid #d8dee4;padding:6px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600}td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
pre{white-space:pre-wrap;word-break:break-word;background:#f6f8fa;border:1px solid #d8dee4;
border-radius:6px;padding:8px;max-height:360px;overflow:auto;font-size:12px}
.muted{color:#57606a}.error{color:#cf222e;font-weight:600}
button{font:inherit;padding:4px 12px;border-radius:6px;border:1px solid #d0d7de;background:#f6f8fa;cursor:pointer}
button.danger{background:#cf222e;color:#fff;border-color:#a40e26}
input[type=search],input[type=password]{font:inherit;padding:4px 8px;border:1px solid #d0d7de;border-radius:6px}
nav.pages a,nav.pages span{margin-right:8px}
.tag{display:inline-block;background:#ddf4ff;border-radius:10px;padding:0 8px;margin-right:4px;font-size:12px}
svg.chart{max-width:100%;height:auto;background:#fff}
"""
)


def url(*parts: str, **query: str | int) -> str:
    """A path under the inspector, each part quoted; ``query`` without empty values."""
    path = "/".join([ROOT, *(quote(part, safe="") for part in parts)])
    wanted = {k: v for k, v in query.items() if v not in ("", None)}
    return path + ("?" + urlencode(wanted) if wanted else "")


def document(title: str, body: Child, csrf: str | None = None) -> str:
    """A whole page; with ``csrf`` (a signed-in viewer's), the header has a logout form."""
    logout = (
        tag("form", csrf_field(csrf), tag("button", "Log out", type="submit"), method="post", action=url("logout"))
        if csrf is not None
        else None
    )
    header = tag("header", tag("a", "ctxproxy inspector", href=url("")), logout)
    head = tag(
        "head",
        tag("meta", charset="utf-8"),
        tag("meta", name="viewport", content="width=device-width, initial-scale=1"),
        tag("title", f"{title} · ctxproxy"),
        tag("style", _STYLE),
    )
    return "<!doctype html>" + tag("html", head, tag("body", header, tag("main", body)), lang="en")


def csrf_field(csrf: str) -> Html:
    return tag("input", type="hidden", name="csrf", value=csrf)


def card(*children: Child, **attrs: object) -> Html:
    return tag("section", *children, **{"class_": "card", **attrs})


def table(
    headers: Sequence[str], rows: Sequence[Sequence[Child]], numeric: Sequence[int] = (), **attrs: object
) -> Html:
    """A table; the columns ``numeric`` (indexes) are right-aligned."""
    head = tag("tr", [tag("th", h, class_="num" if i in numeric else None) for i, h in enumerate(headers)])
    body = [
        tag("tr", [tag("td", c, class_="num" if i in numeric else None) for i, c in enumerate(row)]) for row in rows
    ]
    return tag("table", tag("thead", head), tag("tbody", body), **attrs)


def search_form(action: str, name: str, value: str, placeholder: str, label: str) -> Html:
    return tag(
        "form",
        tag("input", type="search", name=name, value=value, placeholder=placeholder, aria_label=label),
        " ",
        tag("button", "Search", type="submit"),
        method="get",
        action=action,
        role="search",
    )


def message_page(title: str, text: str, csrf: str | None = None) -> str:
    return document(title, join([tag("h1", title), tag("p", text)]), csrf)


def login_page(error: str | None = None) -> str:
    form = tag(
        "form",
        tag(
            "p",
            tag(
                "label",
                "Admin key ",
                tag(
                    "input", type="password", name="key", autocomplete="current-password", required=True, autofocus=True
                ),
            ),
        ),
        tag("p", tag("button", "Sign in", type="submit")),
        method="post",
        action=url("login"),
    )
    note = tag(
        "p", "The key is [admin] api_key of proxy.toml. HTTP Basic with the key as password works too.", class_="muted"
    )
    return document(
        "Sign in", card(tag("h1", "Sign in"), tag("p", error, class_="error") if error else None, form, note)
    )
