"""Anthropic's Messages API (``POST /v1/messages``) at ctxproxy's edge.

* ``body``: checking and parsing a request body that a client sent (hostile input).
* ``errors``: a ctxproxy error as Anthropic's error body and as a stream ``error`` event.
* ``sse``: the stream's events, its end (``message_stop``), its errors and its usage.
* ``convert``: a body's ``system`` and ``messages`` as ctxproxy's canonical messages, and back.
* ``count``: an offline estimate of a request's input tokens; ``images`` reads the image
  dimensions it needs.
* ``adapter``: the pipeline's port; ``forward`` and ``relay`` post a body and relay the answer;
  ``betas`` reads the window an ``anthropic-beta`` header asks for.
* ctxproxy's tools for Messages clients: ``tools`` (offered in Anthropic's shape), ``tool_blocks``
  (a round in content blocks), ``tool_rounds`` (the conversation the loop builds), ``tool_stream``
  (a streamed round, filtered), ``tool_loop`` (the Messages dialect of ``ctxproxy.tools.driver``'s
  one loop, JSON and streamed).

Wire format reference: https://docs.claude.com/en/api/messages,
https://docs.claude.com/en/docs/build-with-claude/streaming, https://docs.claude.com/en/api/errors.
"""
