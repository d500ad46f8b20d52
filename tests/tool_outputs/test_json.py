"""JSON with arrays of objects at any depth: an outline of its members, each array with rows
spread across it in proportion to its size; a retrieval finds rows wherever they are."""

from __future__ import annotations

import json

from ctxproxy.tool_outputs import Kind, compress, detect, json_tree, select

TOOL = "ctxproxy_retrieve"


def conversation(sessions: int = 3, turns: int = 40) -> dict[str, object]:
    out: dict[str, object] = {"speaker_a": "Ann", "speaker_b": "Bo"}
    for s in range(1, sessions + 1):
        out[f"session_{s}_date_time"] = f"{s}:00 pm on {s} May, 2023"
        out[f"session_{s}"] = [
            {"speaker": "Ann" if t % 2 else "Bo", "dia_id": f"D{s}:{t}", "text": f"utterance {t} of session {s}, " * 3}
            for t in range(turns)
        ]
    return out


def test_nested_arrays_of_objects_each_keep_rows_spread_across_them() -> None:
    text = json.dumps(conversation(), indent=1)
    assert detect(text) is Kind.JSON_ROWS
    out = compress(text, TOOL)
    assert out is not None and out.kind is Kind.JSON_ROWS
    lines = out.text.splitlines()
    assert lines[:4] == [
        "JSON object, as its outline:",
        '"speaker_a": "Ann"',
        '"speaker_b": "Bo"',
        '"session_1_date_time": "1:00 pm on 1 May, 2023"',
    ]
    assert lines[4] == '"session_1": array of 40 objects'
    assert lines[5] == "  Fields: speaker (str), dia_id (str), text (str)"
    assert '"session_2": array of 40 objects' in lines and lines.count("  Fields: as above") == 2
    rows = [json.loads(line.split("] ", 1)[1]) for line in lines if line.startswith("    [")]
    for s in (1, 2, 3):  # every session keeps its first, last and rows between
        ids = [int(r["dia_id"].split(":")[1]) for r in rows if r["dia_id"].startswith(f"D{s}:")]
        assert ids[0] == 0 and ids[-1] == 39 and 4 <= len(ids) <= 10
    assert "rows of 120 elided in 3 arrays of objects" in lines[-1]
    assert len(out.text) < 0.35 * len(text)
    assert compress(text, TOOL) == out  # the same bytes every time


def test_rows_are_spread_evenly_within_a_share_of_the_array() -> None:
    items = [{"id": i, "name": f"item number {i:04d}", "ok": True} for i in range(500)]
    shrunk = json_tree.compress(json.dumps(items))
    assert shrunk is not None
    ids = [json.loads(line.split("] ", 1)[1])["id"] for line in shrunk.text.splitlines() if line.startswith("  [")]
    assert ids[0] == 0 and ids[-1] == 499 and 60 <= len(ids) <= 100  # about a fifth of the rows' size
    gaps = {b - a for a, b in zip(ids, ids[1:], strict=False)}
    assert max(gaps) - min(gaps) <= 1  # evenly spread, no stretch skipped


def test_json_without_an_array_of_objects_or_not_json_is_not_this_kind() -> None:
    plain = json.dumps({"numbers": list(range(400)), "name": "x"})
    assert detect(plain) is not Kind.JSON_ROWS and json_tree.compress(plain) is None
    assert json_tree.compress('{"a": [{"b": 1}, {"b": 2}, {"b": 3}') is None  # cut short: not JSON


def test_a_retrieval_finds_rows_in_nested_arrays_with_their_path() -> None:
    text = json.dumps(conversation(), indent=1)
    out = select(text, "D2:17")
    assert out.startswith("1 of 120 rows match 'D2:17'")
    assert out.splitlines()[1].startswith('session_2[17] {"speaker":"Ann","dia_id":"D2:17"')


def test_deep_nesting_is_not_searched_past_a_depth() -> None:
    rows = [{"a": i} for i in range(5)]
    deep: object = rows
    for _ in range(json_tree.MAX_DEPTH):
        deep = {"k": deep}
    assert json_tree.has_rows(deep) and not json_tree.has_rows({"k": deep})
    hostile = "[" * 1000 + json.dumps(rows) + "]" * 1000  # orjson parses it; no RecursionError
    assert detect(hostile) is not Kind.JSON_ROWS and compress(hostile, TOOL) is None
