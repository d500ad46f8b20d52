"""``paged`` (note 004), all of it: the strategy (``strategy``), its options and shared bounds
(``base``), the archive index a checkpoint holds (``entries``), the Contents Page's eviction
and rendering (``contents``), what a Contents Page line is (``lines``), the archive step —
pure (``archive``) and its I/O through the engine's host (``archive_io``) —, recalled pages
restored into the window — pure (``restore``) and its I/O (``restore_io``) — and the block kind
that ties them together for the rest of ctxproxy (``kind``)."""

from ctxproxy.strategies.paged.base import (
    CONTENTS_KIND,
    LINE_MAX_CHARS,
    MAX_LINES_PER_PAGE,
    PagedOptions,
    is_paged_checkpoint,
    turn_number,
)
from ctxproxy.strategies.paged.kind import CONTENTS_PAGE
from ctxproxy.strategies.paged.strategy import (
    CONTENTS_OVERHEAD_TOKENS,
    STRATEGY,
    PagedStrategy,
    PageSpan,
    archived_end,
    contents_growth,
    page_growth,
    split_pages,
    unarchived_pages,
)

__all__ = [
    "CONTENTS_KIND",
    "CONTENTS_OVERHEAD_TOKENS",
    "CONTENTS_PAGE",
    "LINE_MAX_CHARS",
    "MAX_LINES_PER_PAGE",
    "STRATEGY",
    "PageSpan",
    "PagedOptions",
    "PagedStrategy",
    "archived_end",
    "contents_growth",
    "is_paged_checkpoint",
    "page_growth",
    "split_pages",
    "turn_number",
    "unarchived_pages",
]
