"""Tool output, made smaller and kept retrievable: pure functions, no I/O.

Agents' prompts are mostly tool results. This package decides, for one result's text, what it
is (``detect``: JSON holding arrays of objects, a log or test run, a unified diff, search results
or a file listing, source code, plain text) and writes a shorter text of the same kind
(``compress``): each compressor keeps what an agent asks of its kind (errors, changed lines,
signatures, anomalous rows) and ends with one line saying what was elided and the reference by
which ``ctxproxy_retrieve`` returns the original (``ref_of``). A compressor that cannot parse its
input as its kind leaves it unchanged (returns None), and none cuts inside a JSON string, a diff
hunk header or a line of code: whole rows and whole lines are kept or dropped.

Everything is a pure function of the text: the same result compresses to the same bytes on
every request, which is what keeps a provider's prompt cache hitting. ``mask`` writes the
one-line placeholder of an old result and says which agent turns are masked (in batches);
``select`` answers a retrieval's query; ``plan`` decides, for one request's messages, what is
compressed and what masked (the pipeline's ``tool_outputs`` step does the I/O).
"""

from ctxproxy.tool_outputs.compress import Compressed, compress, ref_of
from ctxproxy.tool_outputs.detect import Kind, detect
from ctxproxy.tool_outputs.mask import masked_turns, placeholder
from ctxproxy.tool_outputs.select import select

__all__ = ["Compressed", "Kind", "compress", "detect", "masked_turns", "placeholder", "ref_of", "select"]
