"""Hypothesis strategies for chat completion bodies of any shape, well-formed or not.

``bodies`` draws a JSON object with every field ctxproxy reads (each a random JSON value or a
list of randomly shaped messages or tools), or any JSON value at all. ``conversations`` draws
well-formed message lists, so that a body can get past parsing and reach what comes after it.
Used by the parser's property tests and by the HTTP fuzz test.
"""

from __future__ import annotations

from hypothesis import strategies as st

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-10, 10)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)

roles = st.sampled_from(["system", "developer", "user", "assistant", "tool", "function", "robot", None, 3])
parts = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image_url", "input_audio", "refusal", 1])},
    optional={"text": json_values, "image_url": st.fixed_dictionaries({"url": json_values}), "refusal": json_values},
)
contents = st.none() | st.text(max_size=30) | st.lists(parts, max_size=3) | json_values
tool_calls = st.lists(
    st.fixed_dictionaries(
        {
            "id": json_values,
            "type": st.just("function"),
            "function": st.fixed_dictionaries({"name": json_values, "arguments": json_values}),
        }
    ),
    max_size=2,
)
messages = st.fixed_dictionaries(
    {"role": roles},
    optional={"content": contents, "name": json_values, "tool_call_id": json_values, "tool_calls": tool_calls},
)
bodies = (
    st.fixed_dictionaries(
        {},
        optional={
            "model": json_values,
            "stream": json_values,
            "user": json_values,
            "messages": st.lists(messages, max_size=5) | json_values,
            "tools": st.lists(st.fixed_dictionaries({"type": json_values}, optional={"function": json_values}))
            | json_values,
            "tool_choice": json_values,
            "n": json_values,
            "max_tokens": json_values,
            "max_completion_tokens": json_values,
            "stream_options": json_values,
            "functions": json_values,
        },
    )
    | json_values
)

texts = st.text(max_size=40)
conversations = st.builds(
    lambda system, turns: system + [m for pair in turns for m in pair][:-1],
    st.lists(st.fixed_dictionaries({"role": st.sampled_from(["system", "developer"]), "content": texts}), max_size=1),
    st.lists(
        st.tuples(
            st.fixed_dictionaries({"role": st.just("user"), "content": texts | st.lists(parts, max_size=2)}),
            st.fixed_dictionaries({"role": st.just("assistant"), "content": texts}),
        ),
        min_size=1,
        max_size=3,
    ),
)
