"""What a snapshot's JSON from someone else is held to before and while it is decoded: its size, how many values it
holds, the range of every time and number, the length and form of some texts; and at most how much memory the
snapshot it decodes to holds (``decoded_bytes``)."""

from __future__ import annotations

import json
import re

from gputop.model import (
    CGROUP_PATH_CHARS,
    CODE_SITE,
    CONTAINER_ID_CHARS,
    CONTAINER_NAME_CHARS,
    PCI_BUS_ID_FORM,
    POD_LABEL_CHARS,
    POD_LABEL_FORM,
    POD_NAME_CHARS,
    POD_NAME_FORM,
    SLURM_JOB_ID_CHARS,
    SLURM_TEXT_CHARS,
    SYNC_CALL,
    TENSOR_DEVICE,
    Container,
    Gpu,
    LoaderView,
    Pod,
    SlurmJob,
    StepCost,
    SyncSite,
    TensorMemory,
)

MAX_SNAPSHOT_BYTES = 16 * 1024 * 1024
"""The most one snapshot may be, as JSON and as stored (deflated): 800 times a busy 8-GPU machine's 20 KB. Text
and rows beyond it come from someone else and are refused before they are parsed, read or inflated."""
MAX_JSON_TOKENS = 500_000
"""The most commas, colons and opening brackets one snapshot's JSON may hold: a real snapshot has one every 10
bytes or so (about 25 a process), so this is about 5 MB of one, 20,000 processes. Counted before parsing:
``json.loads`` of 16 MiB of tiny values (``[{"a":1},...]``) would take hundreds of MiB; this many, under 50 MiB."""
MAX_TIME = 1e10
"""Times (``Snapshot.time``, process start times) are from 0 to this many seconds since the epoch (the year 2286):
a time like 1e308 overflows the clock formatting of every view."""
MAX_FLOAT = 1e15
"""The largest magnitude of any other float: percentages, watts, seconds, rates."""
MAX_INT = 2**64 - 1
"""Integers are NVML's unsigned 64-bit counters at most (bytes, clocks, ECC errors)."""
TIME_FIELDS = frozenset({"time", "start_time"})
TEXT_LIMITS: dict[type, dict[str, int]] = {
    Container: {
        "path": CGROUP_PATH_CHARS,
        "id": CONTAINER_ID_CHARS,
        "pod_uid": CONTAINER_NAME_CHARS,
        "name": CONTAINER_NAME_CHARS,
    },
    StepCost: {"precision": 16, "peak_source": 300},
    Pod: {"namespace": POD_LABEL_CHARS, "name": POD_NAME_CHARS, "container": POD_LABEL_CHARS},
    SlurmJob: {
        "id": SLURM_JOB_ID_CHARS,
        "step": SLURM_TEXT_CHARS,
        "name": SLURM_TEXT_CHARS,
        "user": SLURM_TEXT_CHARS,
        "state": SLURM_TEXT_CHARS,
    },
}
"""The longest string each field of these classes may hold, as the collector bounds them: a longer one was not
written by gputop."""
_SITE = re.compile(CODE_SITE)
TEXT_FORMS: dict[type, dict[str, re.Pattern[str]]] = {
    TensorMemory: {"device": re.compile(TENSOR_DEVICE)},
    SyncSite: {"site": _SITE, "call": re.compile(SYNC_CALL)},
    LoaderView: {"created_at": _SITE},
    Gpu: {"pci_bus_id": re.compile(PCI_BUS_ID_FORM)},
    Pod: {
        "namespace": re.compile(POD_LABEL_FORM),
        "name": re.compile(POD_NAME_FORM),
        "container": re.compile(POD_LABEL_FORM),
    },
}
"""The form each field of these classes must have, as the probe reader checks it: ``cuda:²`` would pass a type
check, and then fail ``int`` where the device's ordinal is read; a code site that advice quotes (``train.py:57``)
is a file and a line, nothing else."""
_NOT_TOKENS = bytes(sorted(set(range(256)) - set(b",:[{")))


def brief(value: object) -> str:
    """What a bad value was, in a few words: the value itself may be megabytes, or someone's escape sequences."""
    if isinstance(value, (bool, int, float)) or value is None:
        text = repr(value)
        return text if len(text) <= 24 else f"a {len(text)}-digit number"
    return f"a {type(value).__name__}"


def parse(text: bytes | bytearray) -> object:
    """The JSON value of ``text``, after refusing (``ValueError``) text over ``MAX_SNAPSHOT_BYTES`` or with over
    ``MAX_JSON_TOKENS`` values, before it is parsed."""
    if len(text) > MAX_SNAPSHOT_BYTES:
        raise ValueError(f"over {MAX_SNAPSHOT_BYTES >> 20} MiB: not a snapshot")
    if json_tokens(text) > MAX_JSON_TOKENS:
        raise ValueError(f"over {MAX_JSON_TOKENS} JSON values: not a snapshot")
    try:
        return json.loads(text)
    except RecursionError:  # json.loads recurses once per level of nesting; a snapshot has a few
        raise ValueError("nested too deeply: not a snapshot") from None


def json_tokens(text: bytes | bytearray) -> int:
    """How many commas, colons and opening brackets ``text`` holds: about how many values its JSON has."""
    return len(text.translate(None, _NOT_TOKENS))


TOKEN_BYTES = 64
"""The most memory one JSON value of a snapshot takes once decoded, beyond its characters: a string's header and
its slot in a tuple (57 bytes for ``"ab",``), a float (24) or an int (36) and its slot, a reason's two strings and
its place in the mapping (about 65 a token)."""
OBJECT_BYTES = 512
"""The most one JSON object takes once decoded, beyond its values: a model object and the ones its fields make
by default (``{"pid":1}`` as a training view: 516 bytes, with its default probe report, pin status and main thread;
about 400 as a host process)."""


def decoded_bytes(text: bytes) -> int:
    """At most how much memory the snapshot decoded from the JSON ``text`` (or the changes it makes to a whole
    snapshot) holds: what a cache of decoded snapshots counts. Its characters, four bytes each where a string may
    be wide (one character beyond Latin-1 makes Python store every character of its string in four bytes: a
    16 MiB row of 'a's and one emoji decodes to 64 MiB), else one; ``TOKEN_BYTES`` a value; ``OBJECT_BYTES`` an
    object. Measured with tracemalloc over real snapshots and the hostile ones that hold the most per byte
    (tests/security/test_snapshot_decoder.py), it is never below what a snapshot holds, and 4 to 20 times what a
    real one does: a replay of an 8-GPU box keeps 512 snapshots in 40 MiB of it."""
    wide = not text.isascii() or b"\\u" in text
    objects = text.count(b"{") + 1  # and the snapshot a row of changes makes anew, with the lists it patches
    return len(text) * (4 if wide else 1) + TOKEN_BYTES * json_tokens(text) + OBJECT_BYTES * objects
