"""OpenAI's Responses API (``POST /v1/responses``) at ctxproxy's edge.

* ``body``: checking and parsing a request body that a client sent (hostile input); ``items``:
  what each input item is to ctxproxy and whether it can be modelled.
* ``canonical``: a body's ``instructions`` and ``input`` as ctxproxy's canonical messages;
  ``render``: the forwarded messages back into the client's body, its own items where unchanged.
* ``stream``: the stream's events, its framing, its end, its errors and its usage.
* ``adapter``: the pipeline's port; ``forward`` posts a body and relays the answer;
  ``completion`` asks the upstream for a text of ctxproxy's own (LLM summaries).

Wire format reference: https://platform.openai.com/docs/api-reference/responses, the ``openai``
SDK's ``types/responses`` (``ResponseInputItemParam``, ``ResponseStreamEvent``).
"""

from ctxproxy.wire.openai_responses.adapter import OpenAIResponses

OPENAI_RESPONSES = OpenAIResponses()

__all__ = ["OPENAI_RESPONSES", "OpenAIResponses"]
