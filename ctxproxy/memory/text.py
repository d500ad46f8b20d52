"""Search terms of a text: what BM25 counts. Pure and deterministic.

``terms`` lower-cases, splits into word tokens (runs of Unicode letters and digits; inner
apostrophes kept together, so ``don't`` is one token and ``Caroline's`` is ``caroline``), drops
a small English stop-word list and one-letter words, and stems the rest with ``stem``.

CJK text has no spaces between words, and a word segmenter would need a dictionary per
language. So every run of Han, Hiragana, Katakana or Hangul characters yields all its 2-, 3-
and 4-character n-grams instead (a one-character run yields itself): the query "GPU 选型"
finds "我们讨论了GPU选型的问题" because both contain the bigram "选型". Longer shared n-grams
count again, so a longer exact match ranks higher without any segmentation.

``stem`` is the Snowball (Porter 2) English stemmer from PyStemmer, after two small tables: common
irregular verbs and plurals ("bought" → "buy", "went" → "go", "children" → "child"), which no
suffix rule can reach, and the chat variants below. It conflates "painting", "paintings" and
"painted", "frustrated" and "frustration", "clothes" and "clothing"; words of three letters or
fewer, and words that are not plain ASCII letters, are left as they are. Its output need not be
a word; it only has to be the same for the forms a user and a memory would use for one idea. On
LoCoMo stemming is worth about four points of recall@5 (``bench/recall.py``); Snowball gained
0.4 over the light suffix stripper it replaced, most of it on the held-out conversations.

Before stemming, a small table maps informal, clipped and British forms of everyday words to
one form ("kids" → "child", "mom" → "mother", "fave" → "favorite", "puppy" → "dog"): a chat
says "my kids" where a question says "her children". Only forms that are hardly ever another
word are in it; number words are not ("one" is as often a pronoun, and mapping them lost recall).
A few words the suffix rules would fold into a commoner, different word ("likely" into "like", "news" into
"new") are left whole.
"""

from __future__ import annotations

import re
import threading
from typing import Final

import Stemmer

__all__ = ["STOP_WORDS", "cjk_ngrams", "irregular_form", "stem", "terms", "words"]

# Han (incl. extension A and compatibility), Hiragana, Katakana (incl. phonetic extensions),
# Hangul syllables and jamo.
_CJK_CLASS: Final = (
    "\u1100-\u11ff\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
)
_CJK_RUN: Final = re.compile(f"([{_CJK_CLASS}]+)")
# Letters and digits, with apostrophes inside a word ("don't", "o'clock").
_WORD: Final = re.compile(r"[^\W_]+(?:['’][^\W_]+)*")
_NGRAM_SIZES: Final = (2, 3, 4)

STOP_WORDS: Final = frozenset(
    """
    a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves
    i'm i've i'd i'll you're you've you'd you'll he's she's it's we're we've we'd we'll they're
    they've they'd they'll that's there's what's let's isn't aren't wasn't weren't hasn't haven't
    hadn't doesn't don't didn't won't wouldn't can't couldn't shouldn't also yes yeah oh ok okay
    """.split()
)


# Irregular past forms and plurals a conversation uses all the time ("I bought it in Paris" must
# answer "where did she buy it"). Forms that are as often other words are left out (rose, wound,
# lay, born, bore); "saw" and "left" stay, the verbs being far commoner in conversation.
_IRREGULAR: Final = dict(
    pair.split(":")
    for pair in """
    arose:arise awoke:awake beaten:beat became:become began:begin begun:begin bent:bend bit:bite bitten:bite
    bled:bleed blew:blow blown:blow broke:break broken:break bred:breed brought:bring built:build burnt:burn
    bought:buy caught:catch chose:choose chosen:choose came:come crept:creep dealt:deal dug:dig done:do drew:draw
    drawn:draw dreamt:dream drank:drink drunk:drink drove:drive driven:drive ate:eat eaten:eat fell:fall fallen:fall
    fed:feed felt:feel fought:fight found:find fled:flee flew:fly flown:fly forbade:forbid forgot:forget
    forgotten:forget forgave:forgive forgiven:forgive froze:freeze frozen:freeze got:get gotten:get gave:give
    given:give went:go gone:go grew:grow grown:grow hung:hang heard:hear hid:hide hidden:hide held:hold kept:keep
    knelt:kneel knew:know known:know led:lead leant:lean leapt:leap learnt:learn left:leave lent:lend lit:light
    lost:lose made:make meant:mean met:meet paid:pay rode:ride ridden:ride rang:ring rung:ring ran:run said:say
    saw:see seen:see sought:seek sold:sell sent:send shook:shake shaken:shake shone:shine shot:shoot shown:show
    sang:sing sung:sing sank:sink sunk:sink sat:sit slept:sleep slid:slide spoke:speak spoken:speak sped:speed
    spent:spend spun:spin stood:stand stole:steal stolen:steal stuck:stick stung:sting struck:strike swore:swear
    sworn:swear swept:sweep swam:swim swum:swim swung:swing took:take taken:take taught:teach tore:tear torn:tear
    told:tell thought:think threw:throw thrown:throw understood:understand woke:wake woken:wake wore:wear worn:wear
    wept:weep won:win wrote:write written:write children:child men:man women:woman people:person feet:foot
    teeth:tooth mice:mouse geese:goose
    """.split()
)


def irregular_form(word: str) -> bool:
    """An irregular past form or plural of the table above ("bought", "went", "children")."""
    return word.lower() in _IRREGULAR


# Informal, clipped and British forms a chat uses for an everyday word (see the module docstring).
_VARIANTS: Final = dict(
    pair.split(":")
    for pair in """
    kid:child kids:child kiddo:child kiddos:child mom:mother mum:mother mommy:mother mummy:mother
    dad:father daddy:father hubby:husband bday:birthday fav:favorite fave:favorite favourite:favorite
    favourites:favorite grandma:grandmother granny:grandmother grandpa:grandfather bro:brother sis:sister
    pup:dog puppy:dog puppies:dog doggy:dog doggo:dog kitty:cat kitten:cat kittens:cat film:movie films:movie
    colour:color colours:color neighbour:neighbor neighbours:neighbor
    """.split()
)

# Words the suffix rules would fold into a different, far commoner word: "likely" is not "like",
# "lovely" not "love", "news" not "new".
_UNSTEMMED: Final = frozenset({"likely", "unlikely", "lovely", "news"})


class _PerThread(threading.local):
    """An English Snowball stemmer for each thread: a PyStemmer object (which caches the words it
    stemmed) must not be used by two threads at once."""

    def __init__(self) -> None:
        self.stemmer = Stemmer.Stemmer("english")


_STEMMERS: Final = _PerThread()


def stem(word: str) -> str:
    """The conflation key of one lower-case word (see the module docstring)."""
    word = _VARIANTS.get(word, word)
    if word in _UNSTEMMED:
        return word
    word = _IRREGULAR.get(word, word)
    if len(word) <= 3 or not word.isalpha() or not word.isascii():
        return word
    return str(_STEMMERS.stemmer.stemWord(word))


def cjk_ngrams(run: str) -> list[str]:
    """All 2-, 3- and 4-character n-grams of a CJK run, shortest first; a 1-character run is itself."""
    if len(run) == 1:
        return [run]
    return [run[i : i + n] for n in _NGRAM_SIZES for i in range(len(run) - n + 1)]


def words(text: str) -> list[str]:
    """The lower-cased word tokens of the non-CJK parts of ``text``, before stop words and stemming."""
    found: list[str] = []
    for i, part in enumerate(_CJK_RUN.split(text)):
        if i % 2 == 0 and part:
            found += _WORD.findall(part.lower())
    return found


def terms(text: str) -> list[str]:
    """The search terms of ``text``, in order of appearance (repeats kept: BM25 counts them)."""
    out: list[str] = []
    for i, part in enumerate(_CJK_RUN.split(text)):
        if i % 2:
            out += cjk_ngrams(part)
            continue
        for token in _WORD.findall(part.lower()):
            token = token.replace("’", "'")
            if token in STOP_WORDS:
                continue
            if token.endswith("'s"):
                token = token[:-2]
            token = token.replace("'", "")
            if len(token) < 2 and not token.isdigit():
                continue
            out.append(stem(token))
    return out
