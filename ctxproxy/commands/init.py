"""``ctxproxy init [DIR] [--upstream openai|anthropic|gemini]``: write the starter config the
package ships (``ctxproxy/config/starter``).

The files are copied as they are: the upstream and its key stay ``${VAR}`` references
(``OPENAI_BASE_URL`` / ``OPENAI_API_KEY``, ``ANTHROPIC_UPSTREAM_URL`` / ``ANTHROPIC_API_KEY``, or
``GEMINI_UPSTREAM_URL`` / ``GEMINI_API_KEY``),
read from the environment each time ctxproxy starts, so no secret is ever written to disk.
``--upstream`` picks the tenant file; ``proxy.toml`` is the same for both. Existing files are left
alone unless ``force``.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import TextIO

STARTER_FILES = ("proxy.toml", "tenants/default.toml")  # what init writes, under DIR
DEFAULT_DIRECTORY = "config"  # where ``ctxproxy serve`` looks without --config


@dataclass(frozen=True)
class StarterUpstream:
    """One ``--upstream`` choice: where its files come from and the variables they read."""

    shipped: Mapping[str, str]  # STARTER_FILES entry → its file under starter/
    url_variable: str
    default_api: str  # said when url_variable is unset
    key_variable: str
    key_header: str  # where a client's own key travels when it is passed through
    clients: str  # the base URLs its clients take


STARTER_UPSTREAMS: Mapping[str, StarterUpstream] = {
    "openai": StarterUpstream(
        {"proxy.toml": "proxy.toml", "tenants/default.toml": "tenants/default.toml"},
        "OPENAI_BASE_URL",
        "the OpenAI API",
        "OPENAI_API_KEY",
        "Authorization",
        "OpenAI clients at http://127.0.0.1:8080/v1",
    ),
    "anthropic": StarterUpstream(
        {"proxy.toml": "proxy.toml", "tenants/default.toml": "anthropic/default.toml"},
        "ANTHROPIC_UPSTREAM_URL",
        "Anthropic's API",
        "ANTHROPIC_API_KEY",
        "x-api-key",
        "Anthropic SDKs and Claude Code at http://127.0.0.1:8080 (no /v1: they add it)",
    ),
    "gemini": StarterUpstream(
        {"proxy.toml": "proxy.toml", "tenants/default.toml": "gemini/default.toml"},
        "GEMINI_UPSTREAM_URL",
        "Google's Gemini API",
        "GEMINI_API_KEY",
        "x-goog-api-key",
        "Gemini clients (google-genai, Gemini CLI) at http://127.0.0.1:8080 (no version: they add it)",
    ),
}


def starter_text(rel: str, upstream: str = "openai") -> str:
    """The shipped starter file that ``init --upstream upstream`` writes as ``rel`` (one of ``STARTER_FILES``)."""
    shipped = STARTER_UPSTREAMS[upstream].shipped[rel]
    return files("ctxproxy.config").joinpath("starter", *shipped.split("/")).read_text(encoding="utf-8")


def write_starter(
    directory: str, force: bool, env: Mapping[str, str], out: TextIO, err: TextIO, upstream: str = "openai"
) -> int:
    root = Path(directory)
    targets = {rel: root / rel for rel in STARTER_FILES}
    existing = [str(path) for path in targets.values() if path.exists() or path.is_symlink()]
    if existing and not force:
        print(f"ctxproxy init: {', '.join(existing)} already exist(s); nothing written (--force overwrites)", file=err)
        return 1
    try:
        for rel, path in targets.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(starter_text(rel, upstream), encoding="utf-8")
            print(f"wrote {path}", file=out)
    except OSError as exc:
        print(f"ctxproxy init: cannot write {exc.filename or directory}: {exc.strerror or exc}", file=err)
        return 1
    _explain(directory, STARTER_UPSTREAMS[upstream], env, out)
    return 0


def _explain(directory: str, upstream: StarterUpstream, env: Mapping[str, str], out: TextIO) -> None:
    """What the files will do with this environment, and what to run next. Never a value: a URL
    may hold credentials too."""
    url, key = upstream.url_variable, upstream.key_variable
    if env.get(url):
        print(f"upstream: ${url} (set here; read again whenever ctxproxy starts)", file=out)
    else:
        print(f"upstream: {upstream.default_api} ({url} is not set; set it for another provider)", file=out)
    if env.get(key):
        print(f"upstream key: ${key} (set here), sent in place of each client's key", file=out)
    else:
        passed = f"each client's own {upstream.key_header} is passed through"
        print(f"upstream key: none ({key} is not set): {passed}", file=out)
    print("store: ./data under the directory ctxproxy serve runs in (CTXPROXY_DATA overrides)", file=out)
    print(f"clients: {upstream.clients}", file=out)
    option = "" if directory == DEFAULT_DIRECTORY else f" --config {shlex.quote(directory)}"
    print(f"next: ctxproxy config check{option} && ctxproxy serve{option}", file=out)
