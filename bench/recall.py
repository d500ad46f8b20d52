"""Memory recall on LoCoMo: can ``search_memory`` find the page that answers a question?

    .venv/bin/python bench/recall.py                  # all 10 conversations, ~30 s
    .venv/bin/python bench/recall.py --ablations      # also the search with parts switched off, ~2.5 min
    .venv/bin/python bench/recall.py --index-cost     # only: time-aware memory's cost, side by side, ~1 min
    .venv/bin/python bench/recall.py --only-proxy --inject-top-k 15 --inject-max-tokens 1600
                                                      # only: through ctxproxy, other injection settings, ~3 min

Data: ``--data`` (default ``../shared/data/locomo10.json`` next to the repository; LoCoMo is
CC BY-NC 4.0 and is read at run time, never copied here).

Each conversation becomes chat messages: speaker_a's turns are ``user`` messages, speaker_b's
``assistant``, content ``"{speaker}: {text}"`` plus `` [shares a photo: {caption}]`` when the
turn shares an image; the first message of each session starts with its date line
(``Date: 1:56 pm on 8 May, 2023``, LoCoMo's session date). A page is one interaction, as the
``paged`` strategy cuts them: a user message and what answers it up to the next user message
(mostly two turns; a session that starts with speaker_b adds that turn to the page before).
Every page is archived through the real code path — ``page_doc`` + ``cards_from_messages``,
dated as ``paged`` dates them (``exchange_dates``), written with ``MemoryStore.add`` into a
fresh ``DiskStore`` (one session layer per conversation), one page at a time as the strategy
does — and every QA of categories 1-4 is asked with its question text through
``MemoryStore.search`` (top 10, no LLM anywhere).

Metrics, page level, questions of categories 1-4 (a card hit counts for its page; pages are
ranked by first appearance in the top 10 hits):

* ``R@k``: the share of questions with at least one evidence turn on a top-k page. This is the
  definition behind the data README's figures: plain BM25 computed here reproduces them (0.666
  recall@5 over our pages and 0.677 over the README's turn pairs, against its 0.666; 4-turn
  units, checked once outside this file, gave 0.755 against its 0.758), while the stricter
  reading below gives about 0.60 for the same baseline.
* ``turns@k``: per question, the share of its evidence turns whose page is in the top k,
  averaged over questions (multi-hop questions with evidence in several sessions score low).

Questions whose evidence ids name no turn of the conversation (a handful of malformed ids in
the release) are skipped and counted.

Baselines, computed here with plain BM25 (lower-cased word tokens, small stop-word list, no
stemming, k1 1.5, b 0.75 as rank-bm25's defaults): over the README's units (consecutive turn
pairs within a session) and over our pages.

Conversations 0-4 were used to tune ``SearchParams``; 5-9 are reported apart as held-out.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import re
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench._card_quality import card_quality, contradictions  # noqa: E402
from bench._index_cost import index_cost  # noqa: E402
from bench._locomo import read_release  # noqa: E402
from bench._recall_proxy import Dialogue, Injection, PromptMetrics, prompt_metrics  # noqa: E402
from bench._recall_proxy import Question as ProxyQuestion  # noqa: E402
from ctxproxy.memory.bm25 import BM25Index, BM25Params, search  # noqa: E402
from ctxproxy.memory.cards import cards_from_messages, page_doc  # noqa: E402
from ctxproxy.memory.docs import DEFAULT_SEARCH, SearchParams  # noqa: E402
from ctxproxy.memory.memories import MemoryStore  # noqa: E402
from ctxproxy.memory.scopes import MemoryScope  # noqa: E402
from ctxproxy.store import open_store  # noqa: E402
from ctxproxy.strategies.dates import exchange_dates  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo10.json"
KS = (1, 5, 10)
TOP_K = 10
CATEGORIES = (1, 2, 3, 4)
TUNE = range(0, 5)
HELD_OUT = range(5, 10)
TENANT = "bench"
_SESSION = re.compile(r"^session_(\d+)$")
_DIA_ID = re.compile(r"D\d+:\d+")
# The baseline's tokens: what the README measured with rank-bm25.
_PLAIN_WORD = re.compile(r"[a-z0-9]+")
_PLAIN_STOP = frozenset(
    "a an the and or but if of at by for with about to from in on is are was were be been being it its this that "
    "these those i you he she we they me him her us them my your his our their what which who whom when where why "
    "how do does did have has had not no so as".split()
)


# --- the data -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Question:
    text: str
    category: int
    evidence: tuple[str, ...]  # dialog ids


@dataclass(frozen=True)
class Page:
    number: int  # 1-based, as the paged strategy numbers them
    messages: tuple[dict[str, Any], ...]
    dia_ids: tuple[str, ...]


@dataclass(frozen=True)
class Conversation:
    index: int
    sample_id: str
    pages: tuple[Page, ...]
    sessions: tuple[tuple[tuple[str, str], ...], ...]  # per session: (dia_id, plain text) per turn
    questions: tuple[Question, ...]


def _turn_text(turn: dict[str, Any]) -> str:
    text = str(turn.get("text", "")).strip()
    caption = turn.get("blip_caption")
    return f"{text} [shares a photo: {str(caption).strip()}]" if caption else text


def to_conversation(index: int, sample: dict[str, Any]) -> Conversation:
    conv = sample["conversation"]
    user = conv["speaker_a"]
    numbers = sorted(int(m.group(1)) for key in conv if (m := _SESSION.match(key)))
    sessions = [conv[f"session_{n}"] for n in numbers if conv[f"session_{n}"]]
    pages: list[tuple[list[dict[str, Any]], list[str]]] = []
    dates = [conv.get(f"session_{n}_date_time") for n in numbers if conv[f"session_{n}"]]
    for turns, stated in zip(sessions, dates, strict=True):
        for number, turn in enumerate(turns):
            role = "user" if turn["speaker"] == user else "assistant"
            message = {"role": role, "content": f"{turn['speaker']}: {_turn_text(turn)}"}
            if number == 0 and stated:  # the session's date line, as LoCoMo states it
                message["content"] = f"Date: {stated}\n{message['content']}"
            if role == "user" or not pages:  # the first page also takes what precedes the first user message
                pages.append(([], []))
            pages[-1][0].append(message)
            pages[-1][1].append(turn["dia_id"])
    questions = tuple(
        Question(str(qa["question"]), int(qa["category"]), tuple(_DIA_ID.findall(" ".join(qa.get("evidence") or []))))
        for qa in sample["qa"]
        if qa.get("category") in CATEGORIES
    )
    return Conversation(
        index=index,
        sample_id=str(sample.get("sample_id", index)),
        pages=tuple(Page(i, tuple(msgs), tuple(ids)) for i, (msgs, ids) in enumerate(pages, start=1)),
        sessions=tuple(tuple((t["dia_id"], str(t.get("text", ""))) for t in turns) for turns in sessions),
        questions=questions,
    )


def load(path: Path) -> list[Conversation]:
    """Exits 2 with one line when the data is absent or unreadable (``bench._locomo.read_release``)."""
    return [to_conversation(i, sample) for i, sample in enumerate(read_release(path))]


# --- retrieval ----------------------------------------------------------------------------------


@dataclass
class Prepared:
    """A retriever's view of one conversation: which unit each dialog id is in, and the search."""

    unit_of: dict[str, int]
    units: int
    ranked_units: Callable[[str, int], Awaitable[list[int]]]  # (question, k) -> units, best first
    close: Callable[[], Awaitable[None]] = field(default=lambda: _nothing())


async def _nothing() -> None:
    return None


Retriever = Callable[[Conversation, Path], Awaitable[Prepared]]


def _plain_terms(text: str) -> list[str]:
    return [w for w in _PLAIN_WORD.findall(text.lower()) if w not in _PLAIN_STOP]


def _plain_bm25(units: list[tuple[int, list[str], str]]) -> Callable[[str, int], Awaitable[list[int]]]:
    """``units``: (unit id, dialog ids, text). Plain BM25 with rank-bm25's default parameters."""
    index: BM25Index[int] = BM25Index()
    for unit, _, text in units:
        tf: dict[str, float] = {}
        for term in _plain_terms(text):
            tf[term] = tf.get(term, 0.0) + 1.0
        index.add(unit, tf, recency=float(unit))
    params = BM25Params(k1=1.5, b=0.75)

    async def ranked(question: str, k: int) -> list[int]:
        return [unit for unit, _ in search(_plain_terms(question), [index], params, top_k=k)]

    return ranked


async def readme_units(conv: Conversation, _: Path) -> Prepared:
    """The README's 2-turn units: consecutive turn pairs within each session."""
    units: list[tuple[int, list[str], str]] = []
    for turns in conv.sessions:
        for i in range(0, len(turns), 2):
            pair = turns[i : i + 2]
            units.append((len(units) + 1, [d for d, _ in pair], " ".join(t for _, t in pair)))
    unit_of = {d: unit for unit, ids, _ in units for d in ids}
    return Prepared(unit_of, len(units), _plain_bm25(units))


async def plain_pages(conv: Conversation, _: Path) -> Prepared:
    """Plain BM25 over our pages' turn texts (no names, no captions)."""
    texts = {d: t for turns in conv.sessions for d, t in turns}
    units = [(p.number, list(p.dia_ids), " ".join(texts[d] for d in p.dia_ids)) for p in conv.pages]
    return Prepared({d: p.number for p in conv.pages for d in p.dia_ids}, len(conv.pages), _plain_bm25(units))


def memory_search(params: SearchParams, *, cards: bool = True) -> Retriever:
    """The proxy's own path: pages (and cards) archived with ``MemoryStore.add``, found with ``search``."""

    async def prepare(conv: Conversation, workdir: Path) -> Prepared:
        store = open_store("diskcache", workdir / f"store-{conv.index}")
        memories = MemoryStore(store, params=params)
        scope = MemoryScope(TENANT, f"{TENANT}:h:locomo-{conv.sample_id}")
        source = f"locomo-{conv.sample_id}"
        history = [m for page in conv.pages for m in page.messages]
        ends = list(itertools.accumulate(len(page.messages) for page in conv.pages))
        for page, when in zip(conv.pages, exchange_dates(history, ends), strict=True):
            now = 1_700_000_000.0 + page.number  # pages archived in order: recency follows the conversation
            docs = [page_doc(page.number, page.messages, source, now, when)]
            if cards:
                docs += cards_from_messages(page.messages, source, now, page.number, when)
            await memories.add(scope, docs)

        async def ranked(question: str, k: int) -> list[int]:
            hits = await memories.search(scope, question, k)
            pages: dict[int, None] = {}
            for hit in hits:
                if hit.doc.page is not None:
                    pages.setdefault(hit.doc.page, None)
            return list(pages)[:k]

        return Prepared({d: p.number for p in conv.pages for d in p.dia_ids}, len(conv.pages), ranked, store.close)

    return prepare


@dataclass(frozen=True)
class QuestionRecall:
    conversation: int
    category: int
    any_found: dict[int, bool]  # k -> some evidence turn's page is in the top k (the README's recall)
    share_found: dict[int, float]  # k -> share of the evidence turns whose page is in the top k
    seconds: float  # the search


@dataclass
class ConversationRecall:
    conversation: int
    units: int
    archive_seconds: float
    archived_units: int
    questions: list[QuestionRecall]
    skipped: int  # questions whose evidence ids name no turn


async def retrieval_metrics(
    conversations: Sequence[Conversation], retriever: Retriever, workdir: Path, ks: Sequence[int] = KS
) -> list[ConversationRecall]:
    """Archive each conversation with ``retriever`` and ask its questions: page-level recall of the
    evidence turns per question (see the module docstring); ``summarise`` averages them."""
    out: list[ConversationRecall] = []
    for conv in conversations:
        started = time.perf_counter()
        prepared = await retriever(conv, workdir)
        record = ConversationRecall(conv.index, prepared.units, time.perf_counter() - started, prepared.units, [], 0)
        try:
            for question in conv.questions:
                wanted = [prepared.unit_of[d] for d in question.evidence if d in prepared.unit_of]
                if not wanted:
                    record.skipped += 1
                    continue
                started = time.perf_counter()
                found = await prepared.ranked_units(question.text, max(ks))
                seconds = time.perf_counter() - started
                tops = {k: set(found[:k]) for k in ks}
                record.questions.append(
                    QuestionRecall(
                        conv.index,
                        question.category,
                        {k: any(unit in tops[k] for unit in wanted) for k in ks},
                        {k: sum(unit in tops[k] for unit in wanted) / len(wanted) for k in ks},
                        seconds,
                    )
                )
        finally:
            await prepared.close()
        out.append(record)
    return out


# --- through the whole proxy -------------------------------------------------------------------


def dialogues(conversations: Sequence[Conversation]) -> list[Dialogue]:
    """Each conversation as one history (its pages in order) with its answerable questions."""
    out = []
    for conv in conversations:
        texts = {dia: text for session in conv.sessions for dia, text in session}
        messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a friend in a long chat."}]
        messages += [m for page in conv.pages for m in page.messages]
        asked = [
            ProxyQuestion(q.text, tuple(texts[d] for d in q.evidence if d in texts))
            for q in conv.questions
            if any(d in texts for d in q.evidence)
        ]
        out.append(Dialogue(messages, asked))
    return out


def _proxy_report(metrics: PromptMetrics, window: int, injection: Injection) -> str:
    return "\n".join(
        [
            f"Through ctxproxy (strategy paged, memory on, extractive, {window:,}-token window, "
            f"inject_top_k {injection.top_k}, inject_max_tokens {injection.max_tokens}), "
            "each question as the newest user message after the whole history, no tool call:\n",
            "| questions | evidence turns in the prompt | questions with all evidence in it "
            "| forwarded tokens / full history | ms / request |",
            "|---|---|---|---|---|",
            f"| {metrics.questions:,} | {metrics.evidence_share:.3f} "
            f"| {metrics.all_evidence / max(1, metrics.questions):.3f} "
            f"| {metrics.tokens_fraction:.3f} | {metrics.ms_per_request:.1f} |",
        ]
    )


# --- the report ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    method: str
    split: str
    units: int
    any_found: dict[int, float]
    share_found: dict[int, float]
    questions: int
    ms_per_search: float
    ms_per_page: float


def summarise(method: str, split: str, records: Sequence[ConversationRecall], ks: Sequence[int] = KS) -> Row:
    questions = [q for record in records for q in record.questions]
    n = len(questions) or 1
    archived = sum(record.archived_units for record in records) or 1
    return Row(
        method,
        split,
        sum(record.units for record in records),
        {k: sum(q.any_found[k] for q in questions) / n for k in ks},
        {k: sum(q.share_found[k] for q in questions) / n for k in ks},
        len(questions),
        1000 * statistics.fmean(q.seconds for q in questions) if questions else 0.0,
        1000 * sum(record.archive_seconds for record in records) / archived,
    )


def _row(row: Row) -> str:
    found = " | ".join(f"{row.any_found[k]:.3f}" for k in KS)
    share = " | ".join(f"{row.share_found[k]:.3f}" for k in KS)
    return (
        f"| {row.method} | {row.split} | {row.units:,} | {found} | {share} | {row.questions:,} "
        f"| {row.ms_per_search:.2f} | {row.ms_per_page:.1f} |"
    )


def _header() -> str:
    found = " | ".join(f"R@{k}" for k in KS)
    share = " | ".join(f"turns@{k}" for k in KS)
    return (
        f"| method | conversations | pages | {found} | {share} | questions | ms / search | ms / page archived |\n"
        "|---|---|---|" + "---|" * (2 * len(KS)) + "---|---|---|"
    )


NOTES = """
R@k: share of questions with at least one evidence turn on a top-k page (the data README's recall).
turns@k: share of a question's evidence turns on top-k pages, averaged over questions (stricter).
ms / page archived: page_doc + cards_from_messages + MemoryStore.add into a DiskStore, per page
(the bench's own time for the plain baselines, which build an in-memory index).
""".strip()


def _by_category(records: Sequence[ConversationRecall]) -> str:
    lines = ["| category | questions | R@5 | turns@5 |", "|---|---|---|---|"]
    names = {1: "1 multi-hop", 2: "2 temporal", 3: "3 open-domain / inference", 4: "4 single-hop"}
    for category in CATEGORIES:
        qs = [q for r in records for q in r.questions if q.category == category]
        if qs:
            hit = sum(q.any_found[5] for q in qs) / len(qs)
            share = sum(q.share_found[5] for q in qs) / len(qs)
            lines.append(f"| {names[category]} | {len(qs)} | {hit:.3f} | {share:.3f} |")
    return "\n".join(lines)


async def run(args: argparse.Namespace, conversations: list[Conversation]) -> None:
    if args.only_proxy:
        await _proxy_part(args, conversations)
        return
    splits: list[tuple[str, set[int]]] = [("all", {c.index for c in conversations})]
    if len(conversations) == 10:
        splits += [("0-4 (tuned)", set(TUNE)), ("5-9 (held out)", set(HELD_OUT))]
    methods: list[tuple[str, Retriever]] = [
        ("BM25 plain, README units (turn pairs)", readme_units),
        ("BM25 plain, pages", plain_pages),
        ("ctxproxy search_memory", memory_search(DEFAULT_SEARCH)),
    ]
    if args.ablations:
        methods += [
            ("  without cards", memory_search(DEFAULT_SEARCH, cards=False)),
            ("  without neighbour shares", memory_search(replace(DEFAULT_SEARCH, neighbour_shares=()))),
            ("  without page context", memory_search(replace(DEFAULT_SEARCH, context_weight=0.0))),
            ("  without both", memory_search(replace(DEFAULT_SEARCH, neighbour_shares=(), context_weight=0.0))),
            ("  without wide context", memory_search(replace(DEFAULT_SEARCH, wide_radius=0))),
            ("  with card lift 0.2", memory_search(replace(DEFAULT_SEARCH, card_share=0.2))),
            ("  without time", memory_search(replace(DEFAULT_SEARCH, time_weight=0.0))),
        ]
    print(_header())
    main_records: list[ConversationRecall] = []
    with tempfile.TemporaryDirectory(prefix="ctx-recall-") as tmp:
        for number, (method, retriever) in enumerate(methods):
            workdir = Path(tmp) / str(number)
            workdir.mkdir()
            records = await retrieval_metrics(conversations, retriever, workdir)
            if method == "ctxproxy search_memory":
                main_records = records
            for split, members in splits:
                print(_row(summarise(method, split, [r for r in records if r.conversation in members])), flush=True)
    skipped = sum(r.skipped for r in main_records)
    total = sum(len(c.questions) for c in conversations)
    print(f"\n{NOTES}\n{total:,} questions of categories 1-4, {skipped} skipped (no usable evidence id).\n")
    print("ctxproxy search_memory by category, all conversations:\n")
    print(_by_category(main_records))
    print()
    print(card_quality(conversations).report())
    print(contradictions().report())
    if not args.no_proxy:
        print()
        await _proxy_part(args, conversations)


async def _proxy_part(args: argparse.Namespace, conversations: list[Conversation]) -> None:
    injection = Injection(args.inject_top_k, args.inject_max_tokens)
    metrics = await prompt_metrics(dialogues(conversations), args.window, injection)
    print(_proxy_report(metrics, args.window, injection))


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="LoCoMo's locomo10.json")
    parser.add_argument("--ablations", action="store_true", help="also run the search with parts switched off")
    parser.add_argument("--no-proxy", action="store_true", help="skip the questions through a running ctxproxy")
    parser.add_argument("--window", type=int, default=128_000, help="context window of the proxied model")
    parser.add_argument("--inject-top-k", type=int, default=Injection.top_k, help="the tenant's [memory] inject_top_k")
    parser.add_argument(
        "--inject-max-tokens", type=int, default=Injection.max_tokens, help="the tenant's [memory] inject_max_tokens"
    )
    parser.add_argument("--only-proxy", action="store_true", help="only the questions through a running ctxproxy")
    parser.add_argument(
        "--index-cost",
        action="store_true",
        help="only: what time-aware memory costs to index and search (3 conversations)",
    )
    args = parser.parse_args(argv)
    if args.index_cost:
        print(index_cost(load(Path(args.data))[:3]))
        return
    asyncio.run(run(args, load(Path(args.data))))


if __name__ == "__main__":
    main()
