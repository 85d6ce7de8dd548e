"""Process rows as table cells: the words in each column, with the style role of each part.

Kept apart from the widget so the table's text is tested as plain data. A cell is a tuple of ``(text, role)``
parts; the widget maps roles (``"dim"``, ``"tree"``, ``"worker"``) to theme styles and fits parts to widths.
"""

from __future__ import annotations

from rich.cells import cell_len, set_cell_size

from gputop.formatting import NA, fmt_bytes, fmt_duration, fmt_percent, short_command
from gputop.ui.process_rows import KIND_LABELS, Column, ProcessRow

Part = tuple[str, str]
"""``(text, role)``; the role ``""`` is the plain cell style."""
Cell = tuple[Part, ...]

NOT_ON_GPU = "-"
"""GPU columns of a process that uses no GPU (a parent, a DataLoader worker): not applicable, unlike N/A."""
MEASURING_MARK = "…"
"""A rate in its first window (CPU %, SM %): there is no value yet, which is neither zero nor unreadable."""
DATALOADER_NOTE = "  DataLoader worker"


def _missing(row: ProcessRow, reason_key: str) -> str:
    return MEASURING_MARK if row.unavailable.get(reason_key) == "measuring" else NA


def _gpu_value(row: ProcessRow, value: str | None, reason_key: str) -> str:
    if value is not None:
        return value
    return _missing(row, reason_key) if row.on_gpu else NOT_ON_GPU


def cell_text(row: ProcessRow, key: str) -> str:
    """The words in column ``key`` for ``row`` (the command column without its tree drawing, its program by its
    base name)."""
    if key == "gpu":
        return ",".join(map(str, row.gpus)) or NOT_ON_GPU
    if key == "pid":
        return str(row.pid)
    if key == "mig":
        return row.mig or NOT_ON_GPU
    if key == "container":
        return row.container or (NA if "container" in row.unavailable else NOT_ON_GPU)
    if key == "pod":  # POD/USER at 80 columns: a pod not yet named is N/A; a process in no pod, its user
        return row.pod or (NA if "pod" in row.unavailable else row.user or NA)
    if key == "user":
        return row.user or NA
    if key == "kind":
        return KIND_LABELS.get(row.kind or "", NOT_ON_GPU)
    if key == "gpu_mem":
        memory = None if row.gpu_memory_bytes is None else fmt_bytes(row.gpu_memory_bytes)
        return _gpu_value(row, memory, "gpu_memory_bytes")
    if key == "sm":
        return _gpu_value(row, None if row.sm_percent is None else fmt_percent(row.sm_percent), "sm_percent")
    if key == "cpu":
        return _missing(row, "cpu_percent") if row.cpu_percent is None else fmt_percent(row.cpu_percent)
    if key == "host_mem":
        return fmt_bytes(row.rss_bytes)
    if key == "elapsed":
        return fmt_duration(row.elapsed_s)
    if row.is_worker:
        return row.name or NA
    if row.command:
        return short_command(row.command)
    reason = row.unavailable.get("command")
    return f"({reason})" if reason else NA


def row_cells(row: ProcessRow, columns: tuple[Column, ...]) -> tuple[Cell, ...]:
    """The cells of ``row`` for these columns; placeholders (N/A, -, …) are dimmed so real values stand out."""
    cells: list[Cell] = []
    for column in columns:
        text = cell_text(row, column.key)
        if column.key in ("container", "pod") and row.pod is not None:
            cells.append(_pod_parts(text, row.pod))
            continue
        if column.key != "command":
            cells.append(((text, "dim" if text in (NA, NOT_ON_GPU, MEASURING_MARK) else ""),))
            continue
        parts: list[Part] = [(row.tree_prefix, "tree")] if row.tree_prefix else []
        if row.is_worker:
            parts += [(text, "worker"), (DATALOADER_NOTE, "dim")]
        else:
            parts.append((text, "" if row.command else "dim"))
        cells.append(tuple(parts))
    return tuple(cells)


def _pod_parts(text: str, pod: str) -> Cell:
    """A pod's cell (``namespace/pod/container`` or the pod alone) with the pod's name marked to be cut in its
    middle: what tells a pod from its siblings is at the end of its name (``-worker-3``, a ReplicaSet's
    ``-5f6d8c9b7-x2k4q``), and the container's name after it."""
    start = 0 if text == pod else text.find("/") + 1  # a namespace has no slash
    if not text.startswith(pod, start):
        return ((text, ""),)
    head, tail = text[:start], text[start + len(pod) :]
    return tuple(part for part in ((head, ""), (pod, SQUEEZE), (tail, "")) if part[0])


SQUEEZE = "squeeze"
"""The role of a part that ``fit_parts`` cuts in its middle first; drawn in the cell's plain style."""
SQUEEZE_KEEP = 5
"""The fewest cells a squeezed part keeps (two each side of the ellipsis) before the cell is cut at its end."""


def _squeezed(parts: Cell, width: int) -> Cell:
    """``parts`` with the part marked ``SQUEEZE`` cut in its middle by as much as the cell is too wide (down to
    ``SQUEEZE_KEEP`` cells), and its role made plain."""
    excess = sum(cell_len(text) for text, _ in parts) - width
    out: list[Part] = []
    for text, role in parts:
        if role != SQUEEZE:
            out.append((text, role))
            continue
        size = max(SQUEEZE_KEEP, len(text) - excess) if excess > 0 and text.isascii() else len(text)
        if size < len(text):
            head = (size - 1) // 2
            text = text[:head] + "…" + text[len(text) - (size - 1 - head) :]
        out.append((text, ""))
    return tuple(out)


def fit_parts(parts: Cell, width: int, right: bool = False) -> Cell:
    """``parts`` cut to ``width`` cells (an ellipsis marks the cut) and padded to it, left or right. A part marked
    ``SQUEEZE`` is cut in its middle first. The note ``DataLoader worker`` after a worker's name is left out whole
    where it does not fit, rather than cut to ``…``: the name says as much."""
    if width <= 0:
        return ()
    if any(role == SQUEEZE for _, role in parts):
        parts = _squeezed(parts, width)
    if parts and parts[-1][0] == DATALOADER_NOTE and sum(cell_len(text) for text, _ in parts) > width:
        parts = parts[:-1]
    total = sum(cell_len(text) for text, _ in parts)
    if total <= width:
        pad = (" " * (width - total), "")
        return (pad, *parts) if right else (*parts, pad)
    out: list[Part] = []
    room = width - 1
    for text, role in parts:
        if room <= 0:
            break
        size = cell_len(text)
        if size > room:
            text = set_cell_size(text, room)
            size = room
        out.append((text, role))
        room -= size
    out.append(("…", out[-1][1] if out else ""))
    return tuple(out)
