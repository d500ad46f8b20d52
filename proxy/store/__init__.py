"""State that must outlive a request or be shared between replicas."""

from __future__ import annotations

import os

from proxy.store.base import JSONValue, LockTimeout, Store, StoreError, StoreLock, Updater
from proxy.store.disk import DiskStore

BACKENDS = ("diskcache",)


def open_store(backend: str, path: str | os.PathLike[str]) -> Store:
    if backend == "diskcache":
        return DiskStore(path)
    raise ValueError(f"unknown store backend {backend!r}; available: {', '.join(BACKENDS)}")


__all__ = ["BACKENDS", "DiskStore", "JSONValue", "LockTimeout", "Store", "StoreError", "StoreLock", "Updater", "open_store"]
