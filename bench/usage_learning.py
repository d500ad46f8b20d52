"""What learning from an answer's ``usage.prompt_tokens`` costs a request (``WindowLearning.usage``)
when the record is held and the sample moves it only a little (the same body resent), in the
thread's CPU: the median of 7 runs of 5,000 calls, in µs a call.

    .venv/bin/python bench/usage_learning.py                    # this tree
    .venv/bin/python bench/usage_learning.py --base-src DIR     # and DIR's code, alternately

bench/steps.py cannot time it: its upstream reports no usage. The Store is a diskcache one in a
temporary directory (a held record is not read from it).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(os.environ.get("CTXPROXY_USAGE_SRC") or Path(__file__).resolve().parent.parent)
sys.path[:0] = [str(ROOT)]

from ctxproxy.cache import ByteLRU  # noqa: E402
from ctxproxy.compaction.learned import Sample  # noqa: E402
from ctxproxy.compaction.learning import WindowLearning  # noqa: E402
from ctxproxy.config.models import TenantConfig, UpstreamConfig  # noqa: E402
from ctxproxy.store import DiskStore  # noqa: E402

CALLS = 5000


async def measure() -> list[float]:
    with tempfile.TemporaryDirectory() as data:
        store = DiskStore(Path(data) / "store")
        learning = WindowLearning(store, ByteLRU(1 << 20))
        tenant = TenantConfig(name="t", upstream=UpstreamConfig(base_url="http://upstream.test/v1"))
        for _ in range(50):  # the record learned and held
            await learning.usage(tenant, "gpt-4o", 128000, Sample(5000, 5500))
        runs = []
        for _ in range(7):
            start = time.thread_time_ns()
            for _ in range(CALLS):
                await learning.usage(tenant, "gpt-4o", 128000, Sample(5000, 5500))
            runs.append((time.thread_time_ns() - start) / CALLS / 1000)
        await store.close()
        return runs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-src", default="", help="also run DIR's code, alternately")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if os.environ.get("CTXPROXY_USAGE_CHILD"):
        runs = asyncio.run(measure())
        print(f"{ROOT}: usage {statistics.median(runs):.2f} µs a call (runs {', '.join(f'{r:.2f}' for r in runs)})")
        return
    trees = [str(ROOT)] + ([args.base_src] if args.base_src else [])
    for _ in range(args.rounds if args.base_src else 1):
        for tree in trees:
            env = {**os.environ, "CTXPROXY_USAGE_SRC": tree, "CTXPROXY_USAGE_CHILD": "1"}
            subprocess.run([sys.executable, __file__], env=env, check=True, cwd=tree)


if __name__ == "__main__":
    main()
