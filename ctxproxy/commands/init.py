"""``ctxproxy init [DIR]``: write the starter config the package ships (``ctxproxy/config/starter``).

The files are copied as they are: the upstream and its key stay ``${OPENAI_BASE_URL}`` and
``${OPENAI_API_KEY}`` references, read from the environment each time ctxproxy starts, so no
secret is ever written to disk. Existing files are left alone unless ``force``.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from importlib.resources import files
from pathlib import Path
from typing import TextIO

STARTER_FILES = ("proxy.toml", "tenants/default.toml")
DEFAULT_DIRECTORY = "config"  # where ``ctxproxy serve`` looks without --config


def starter_text(rel: str) -> str:
    """The shipped starter file ``rel`` (one of ``STARTER_FILES``)."""
    return files("ctxproxy.config").joinpath("starter", *rel.split("/")).read_text(encoding="utf-8")


def write_starter(directory: str, force: bool, env: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    root = Path(directory)
    targets = {rel: root / rel for rel in STARTER_FILES}
    existing = [str(path) for path in targets.values() if path.exists() or path.is_symlink()]
    if existing and not force:
        print(f"ctxproxy init: {', '.join(existing)} already exist(s); nothing written (--force overwrites)", file=err)
        return 1
    try:
        for rel, path in targets.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(starter_text(rel), encoding="utf-8")
            print(f"wrote {path}", file=out)
    except OSError as exc:
        print(f"ctxproxy init: cannot write {exc.filename or directory}: {exc.strerror or exc}", file=err)
        return 1
    _explain(directory, env, out)
    return 0


def _explain(directory: str, env: Mapping[str, str], out: TextIO) -> None:
    """What the files will do with this environment, and what to run next. Never a value: a URL
    may hold credentials too."""
    if env.get("OPENAI_BASE_URL"):
        print("upstream: $OPENAI_BASE_URL (set here; read again whenever ctxproxy starts)", file=out)
    else:
        print("upstream: the OpenAI API (OPENAI_BASE_URL is not set; set it for another provider)", file=out)
    if env.get("OPENAI_API_KEY"):
        print("upstream key: $OPENAI_API_KEY (set here), sent in place of each client's key", file=out)
    else:
        print("upstream key: none (OPENAI_API_KEY is not set): each client's own key is passed through", file=out)
    print("store: ./data under the directory ctxproxy serve runs in (CTXPROXY_DATA overrides)", file=out)
    option = "" if directory == DEFAULT_DIRECTORY else f" --config {shlex.quote(directory)}"
    print(f"next: ctxproxy config check{option} && ctxproxy serve{option}", file=out)
