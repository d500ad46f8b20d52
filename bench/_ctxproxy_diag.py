"""ctxproxy with one piece switched off, for attributing its cost (``overhead.py --diagnose``).

    python bench/_ctxproxy_diag.py nostore serve --config DIR --port P

``nostore``: the per-request session write (``SessionRecorder.observe``, which the recorder turns
into batched store writes of session records, histories and tenant statistics) becomes a no-op;
everything else is the real ``python -m ctxproxy``. The proxy's code is not changed on disk: the
patch lives in this process only. Run with PYTHONPATH pointing at the tree to measure.
"""

from __future__ import annotations

import runpy
import sys


def main() -> None:
    patch, argv = sys.argv[1], sys.argv[2:]
    if patch != "nostore":
        raise SystemExit(f"unknown patch {patch!r}")
    from ctxproxy.session.recorder import SessionRecorder

    if not callable(getattr(SessionRecorder, "observe", None)):
        raise SystemExit("ctxproxy.session.recorder.SessionRecorder.observe not found: update bench/_ctxproxy_diag.py")

    def _no_record(self: SessionRecorder, *args: object, **kwargs: object) -> None:
        return None

    SessionRecorder.observe = _no_record  # type: ignore[method-assign]
    sys.argv = ["ctxproxy", *argv]
    runpy.run_module("ctxproxy", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
