"""GPU memory as PyTorch's allocators see it, read inside the training process.

Only read once the job has initialised CUDA itself: asking earlier would create a CUDA context (hundreds of MiB
on every visible GPU) in a process that may never use one.
"""

from __future__ import annotations

import sys
from typing import Any

# memory_stats() keys → report keys
DEVICE_KEYS = (
    ("allocated_bytes.all.current", "allocated_bytes"),
    ("reserved_bytes.all.current", "reserved_bytes"),
    ("active_bytes.all.current", "active_bytes"),
    ("inactive_split_bytes.all.current", "inactive_split_bytes"),
    ("allocated_bytes.all.peak", "allocated_peak_bytes"),
    ("reserved_bytes.all.peak", "reserved_peak_bytes"),
    ("num_alloc_retries", "num_alloc_retries"),
    ("num_ooms", "num_ooms"),
    ("num_device_alloc", "num_device_alloc"),
    ("num_device_free", "num_device_free"),
)
HOST_KEYS = (
    ("allocated_bytes.current", "allocated_bytes"),
    ("allocated_bytes.peak", "allocated_peak_bytes"),
    ("active_bytes.current", "active_bytes"),
    ("num_host_alloc", "num_host_alloc"),
    ("num_host_free", "num_host_free"),
)


class CudaReader:
    """Reads allocator statistics; remembers device UUIDs, which never change."""

    def __init__(self) -> None:
        self._uuids: dict[int, str | None] = {}

    def read(self) -> tuple[dict[str, Any] | None, str | None]:
        """``({"devices": [...], "host_pinned": {...}}, None)``, or ``(None, why there is nothing)``."""
        torch = sys.modules.get("torch")
        cuda = getattr(torch, "cuda", None)
        if cuda is None:
            return None, "torch not imported"
        if not cuda.is_initialized():
            return None, "CUDA not initialised in this process"
        current = cuda.current_device()
        devices = []
        for index in range(cuda.device_count()):
            stats = cuda.memory_stats(index)
            if index != current and not stats.get("reserved_bytes.all.peak"):
                continue  # a device this process never allocated on
            entry: dict[str, Any] = {"device": index, "uuid": self._uuid(cuda, index)}
            entry.update((name, stats.get(key)) for key, name in DEVICE_KEYS)
            devices.append(entry)
        host = None
        host_stats = getattr(cuda, "host_memory_stats", None)  # torch 2.5 and later
        if host_stats is not None:
            values = host_stats()
            host = {name: values.get(key) for key, name in HOST_KEYS}
        return {"devices": devices, "host_pinned": host}, None

    def _uuid(self, cuda: Any, index: int) -> str | None:
        if index not in self._uuids:
            uuid = getattr(cuda.get_device_properties(index), "uuid", None)
            self._uuids[index] = None if uuid is None else str(uuid)
        return self._uuids[index]
