"""Google's Gemini API (``models/{model}:generateContent`` and ``:streamGenerateContent``) at
ctxproxy's edge.

* ``fields``: a field under its camelCase or snake_case name, as clients send either.
* ``body``: checking and parsing a request body that a client sent (hostile input).
* ``canonical``: a body's ``systemInstruction`` and ``contents`` as ctxproxy's canonical messages;
  ``render``: the forwarded messages back into the client's body, its own contents where unchanged.
* ``stream``: the stream's events, its end, its errors and its usage; ``errors``: Google's error
  object.
* ``forward``: the path, the key (never in a URL) and posting a body; ``adapter``: the pipeline's
  port; ``completion`` asks the upstream for a text of ctxproxy's own (LLM summaries).

Wire format reference: https://ai.google.dev/api/generate-content, the ``google-genai`` SDK's
``types`` (``Content``, ``Part``, ``GenerateContentResponse``).
"""
