"""``paged``'s block kind: the Contents Page, as the rest of ctxproxy sees it.

Its text is the page as ``contents.render_contents`` wrote it when pages were archived (it carries
its own header); the summary message is named ``contents_page``; the emergency plan leaves it
alone (summarising it would lose the archive's index); it offers the recall tools; a request
that offers them under other names (or not at all) gets the instruction rewritten
(``contents.name_tools``); its plans are executed by ``archive_io.execute_archive``; each
request shows it with its recall statistics as of now and the pages the model recalled restored
after it (``restore_io.show_contents``); and what it holds of an abandoned branch
(``held_since``) is the pages archived from the fork point on: each page's raw messages under its
Store key, its entry's lines when the page cannot be read.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ctxproxy.strategies.base import Block
from ctxproxy.strategies.kinds import TURN_PREFIX, BlockKind, Held
from ctxproxy.strategies.paged.archive_io import execute_archive
from ctxproxy.strategies.paged.base import CONTENTS_KIND
from ctxproxy.strategies.paged.contents import decode_entries, name_tools
from ctxproxy.strategies.paged.restore_io import show_contents

CONTENTS_NAME = "contents_page"


class ContentsPageKind(BlockKind):
    def render(self, blocks: Sequence[Block]) -> str | None:
        """The Contents Page as stored, then the start of a page too large for the window as the
        emergency plan summarised it, if it did."""
        return "\n\n".join(
            block.text.strip() if block.kind == CONTENTS_KIND else TURN_PREFIX.section(block) for block in blocks
        )

    def name_tools(self, text: str, recall: str | None, search: str | None) -> str:
        return name_tools(text, recall, search)

    def held_since(self, block: Block, state: Mapping[str, Any], start: int) -> list[Held]:
        return [
            Held("\n".join([f"Page {e.page}: {e.summary}", *e.lines]).strip(), e.key)
            for e in decode_entries(state)
            if e.end > start
        ]


CONTENTS_PAGE = ContentsPageKind(
    CONTENTS_KIND,
    message_name=CONTENTS_NAME,
    summarisable=False,
    offers_recall=True,
    executor=execute_archive,
    viewer=show_contents,
)
