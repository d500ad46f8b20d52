"""Wire adapters: what each client-facing protocol looks like on the wire.

Each protocol ctxproxy speaks to clients has its own subpackage: ``openai_chat`` (OpenAI's chat
completions), ``anthropic`` (Anthropic's Messages API), ``openai_responses`` (OpenAI's Responses
API) and ``gemini`` (Google's Gemini ``generateContent``). A served protocol implements the
pipeline's port (``ctxproxy.pipeline.wire.WireAdapter``): it parses and checks the client's body,
writes the forwarded conversation back into it, offers ctxproxy's tools in its shape, forwards it
(answering ctxproxy's tool calls itself) and relays the answer in its protocol.
Everything that depends on which protocol a request speaks lives in its subpackage; nothing
outside it branches on the protocol's name. ``json_body`` holds the first steps every protocol's
body parsing shares (a JSON object, field types, a ``messages`` list), so they fail with the
same words; ``item_loop`` what every round of a proxy-tool loop shares where a protocol's rounds
send its items back (Messages, Responses, Gemini), each giving only its path, key header and
where its headers and query come from.
"""
