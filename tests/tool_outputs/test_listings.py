"""A listing of paths is written losslessly, each directory once with the names under it, when
that saves enough; otherwise its first entries and a count by directory."""

from __future__ import annotations

from ctxproxy.tool_outputs import Kind, compress, listings

TOOL = "ctxproxy_retrieve"


def package_files() -> str:
    """A ``pip show -f``-like listing: a few header lines, then paths indented under ``Files:``."""
    lines = ["Name: pkg", "Version: 1.2.3", "Files:"]
    lines += [f"  site-packages/pkg/module_{i:03d}.py" for i in range(60)]
    lines += [f"  site-packages/pkg/sub/part_{i:03d}.py" for i in range(30)]
    lines += ["  pkg-1.2.3.dist-info/METADATA", "  pkg-1.2.3.dist-info/RECORD"]
    return "\n".join(lines)


def test_every_name_of_a_listing_stays_findable_under_its_directory() -> None:
    text = package_files()
    out = compress(text, TOOL)
    assert out is not None and out.kind is Kind.LISTING
    lines = out.text.splitlines()
    assert lines[:4] == [
        "95 entries, each path under its directory (3 directories):",
        "Name: pkg",
        "Version: 1.2.3",
        "Files:",
    ]
    assert lines[4].startswith("  site-packages/pkg/: module_000.py, module_001.py, ") and lines[4].endswith(
        ", module_059.py"
    )
    assert (
        lines[5].startswith("  site-packages/pkg/sub/: part_000.py, ")
        and lines[6] == "  pkg-1.2.3.dist-info/: METADATA, RECORD"
    )
    for i in range(60):  # the 60th file as much as the first
        assert f"module_{i:03d}.py" in lines[4]
    assert "nothing elided (92 paths grouped by directory)" in lines[-1]
    assert len(out.text) < 0.7 * len(text)


def test_directories_keep_the_order_they_first_came_in() -> None:
    lines = [f"./src/a/f{i}.py" if i % 2 else f"./src/b/g{i}.py" for i in range(40)]
    shrunk = listings.compress("\n".join(lines))
    assert shrunk is not None
    grouped = shrunk.text.splitlines()[1:]
    assert grouped[0].startswith("./src/b/: g0.py, g2.py") and grouped[1].startswith("./src/a/: f1.py, f3.py")
    assert len(grouped) == 2


def test_a_listing_that_grouping_barely_shortens_keeps_its_first_entries() -> None:
    lines = [f"d{i}/e{i}/x" for i in range(50)] + [f"d{i}/e{i}/y" for i in range(50)]  # 2 short names per dir
    shrunk = listings.compress("\n".join(lines))
    assert shrunk is not None
    assert shrunk.text.startswith("100 entries; the first 25:\nd0/e0/x\n")
    assert shrunk.elided == "75 of 100 entries elided"


def test_a_listing_without_shared_directories_keeps_its_first_entries() -> None:
    lines = [f"dir{i}/only_{i}.py" for i in range(50)]
    shrunk = listings.compress("\n".join(lines))
    assert shrunk is not None and shrunk.text.startswith("50 entries; the first 25:")


def test_a_long_shared_extension_is_written_once_and_compiled_mirrors_are_counted() -> None:
    modules = [f"mod_{i:02d}" for i in range(30)]
    lines = [f"pkg/{m}.py" for m in modules] + ["pkg/native.cpython-311-x86_64-linux-gnu.so"]
    lines += [f"pkg/__pycache__/{m}.cpython-311.pyc" for m in modules]  # one for each .py of pkg/
    lines += [f"other/__pycache__/{m}.cpython-311.pyc" for m in modules[:5]]  # no parent listed: braces
    shrunk = listings.compress("\n".join(lines))
    assert shrunk is not None
    out = shrunk.text.splitlines()
    assert out[1].startswith("pkg/: mod_00.py, ") and out[1].endswith(", native.cpython-311-x86_64-linux-gnu.so")
    assert out[2] == "pkg/__pycache__/: one .cpython-311.pyc for each .py of pkg/ (30)"
    assert out[3] == "other/__pycache__/: {mod_00, mod_01, mod_02, mod_03, mod_04}.cpython-311.pyc"


def test_a_compiled_directory_that_differs_from_its_sources_is_listed_name_by_name() -> None:
    lines = [f"pkg/m{i}.py" for i in range(30)] + [f"pkg/__pycache__/m{i}.cpython-311.pyc" for i in range(1, 30)]
    shrunk = listings.compress("\n".join(lines))
    assert shrunk is not None
    compiled = shrunk.text.splitlines()[2]
    assert compiled.startswith("pkg/__pycache__/: {m1, m2, ") and "m0," not in compiled  # m0 has none: not a mirror
