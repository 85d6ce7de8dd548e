"""The snapshot decoder against input from outside: a remote host's ``gputop stream --full`` lines
(``snapshot_from_json``) and a recording's rows (``decode_snapshot``), both written by someone else.

Whatever comes in, what comes out is a ``Snapshot`` whose every value has its declared type (numbers finite and
in range, text printable), or a ``ValueError``, in bounded time and memory: never another exception.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import gc
import json
import math
import time
import tracemalloc
import types
import typing
import zlib
from collections.abc import Mapping
from datetime import timedelta
from types import MappingProxyType

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputop.codec import decoded_bytes, delta_json, snapshot_from_delta, snapshot_from_json, snapshot_json
from gputop.model import Snapshot
from gputop.plausible import KEEPS_REASONS, RANGES, out_of_range
from gputop.sanitize import printable
from gputop.store.rows import decode_snapshot, encode_snapshot
from tests.ui import scenes, training_scenes

pytestmark = pytest.mark.fast  # pure: no subprocess, no terminal, no torch job

MAX_SNAPSHOT_BYTES = 16 * 1024 * 1024
"""The documented bound on one snapshot's JSON (docs/recording.md)."""
MAX_EPOCH = 1e10
MAX_FLOAT = 1e15
MAX_INT = 2**64 - 1

REAL = [
    training_scenes.starved_job(),
    training_scenes.two_jobs(),
    scenes.training_node(lost=[scenes.LOST_GPU_INDEX], focus_pid=scenes.RANK_PIDS[0]),
    scenes.no_driver(),
]
"""Real snapshots, from the dashboard's scenes: GPUs (one lost), processes, training views with probe reports."""
PLAIN = [json.loads(snapshot_json(snap)) for snap in REAL]
ZDICT = snapshot_json(REAL[0])


@functools.cache
def field_hints(cls: type) -> tuple[tuple[str, object], ...]:
    """Each field of the dataclass ``cls`` with the type it declares (read once: every decoded value asks)."""
    hints = typing.get_type_hints(cls)
    return tuple((field.name, hints[field.name]) for field in dataclasses.fields(cls))


def check_well_typed(value: object, hint: object = Snapshot, where: str = "snapshot") -> None:
    """Every value of a decoded snapshot has the type its field declares; numbers are finite and in range, text is
    printable, tuples are tuples and reasons read-only mappings."""
    origin = typing.get_origin(hint)
    if origin is typing.Union or origin is types.UnionType:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if value is None:
            return
        [hint] = args
        origin = typing.get_origin(hint)
    assert value is not None, f"{where} is None but not optional"
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        assert type(value) is hint, f"{where}: {type(value).__name__}, not {hint.__name__}"
        bad = out_of_range(hint, lambda name: getattr(value, name))
        assert not bad, f"{where}: {bad} out of range"
        for name, field_hint in field_hints(hint):
            check_well_typed(getattr(value, name), field_hint, f"{where}.{name}")
    elif origin is tuple:
        assert type(value) is tuple, f"{where}: {type(value).__name__}, not a tuple"
        args = typing.get_args(hint)
        items = [args[0]] * len(value) if len(args) == 2 and args[1] is Ellipsis else list(args)
        assert len(items) == len(value), f"{where}: {len(value)} items, not {len(items)}"
        for k, (item, item_hint) in enumerate(zip(value, items)):
            check_well_typed(item, item_hint, f"{where}[{k}]")
    elif origin is Mapping:
        assert isinstance(value, MappingProxyType), f"{where}: {type(value).__name__}, not read-only"
        for key, reason in value.items():
            assert type(key) is str and type(reason) is str, f"{where}: {key!r}: {reason!r}"
            assert printable(key) == key and printable(reason) == reason, f"{where}: {key!r}: {reason!r}"
    elif origin is typing.Literal:
        assert type(value) is str and value in typing.get_args(hint), f"{where}: {value!r} is not one of {hint!r}"
    elif hint is float:
        assert type(value) in (int, float), f"{where}: {value!r} is not a number"
        assert math.isfinite(value) and abs(value) <= MAX_FLOAT, f"{where}: {value!r}"
        if where.endswith((".time", ".start_time")):
            assert 0 <= value <= MAX_EPOCH, f"{where}: {value!r} is not a plausible time"
    elif hint is int:
        assert type(value) is int and abs(value) <= MAX_INT, f"{where}: {value!r}"
    elif hint is bool:
        assert type(value) is bool, f"{where}: {value!r}"
    elif hint is str:
        assert type(value) is str and printable(value) == value, f"{where}: {value!r}"
        value.encode()  # no lone surrogate: a terminal cannot be sent one
    else:
        raise AssertionError(f"{where}: no check for {hint!r}")


def decoded_or_value_error(text: str | bytes) -> Snapshot | None:
    """``snapshot_from_json(text)``, well typed, or None for a ValueError; any other exception fails."""
    try:
        snap = snapshot_from_json(text)
    except ValueError:
        return None
    check_well_typed(snap)
    return snap


# -- the real snapshots still decode, exactly -------------------------------------------------------------------


@pytest.mark.parametrize("snap", REAL, ids=["starved", "two-jobs", "node", "no-driver"])
def test_real_snapshots_decode_to_themselves_and_are_well_typed(snap: Snapshot) -> None:
    assert snapshot_from_json(snapshot_json(snap)) == snap
    assert decode_snapshot(encode_snapshot(snap, ZDICT), ZDICT) == snap
    check_well_typed(snapshot_from_json(snapshot_json(snap)))


# -- what crashed the hosts view, the replay and the report ------------------------------------------------------


def mutated(path: tuple[object, ...], value: object, base: dict | None = None) -> str:
    tree = copy.deepcopy(PLAIN[0] if base is None else base)
    node = tree
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return json.dumps(tree)


WRONG = {
    "time yesterday": (("time",), "yesterday"),
    "time 1e308": (("time",), 1e308),
    "time NaN": (("time",), math.nan),
    "time infinite": (("time",), math.inf),
    "time negative": (("time",), -5.0),
    "time null": (("time",), None),
    "time true": (("time",), True),
    "a list for a number": (("gpus", 0, "temperature_c"), [58]),
    "an object for a number": (("gpus", 0, "power_w"), {"w": 310}),
    "a number for a string": (("host", "hostname"), 7),
    "a string for an int": (("gpus", 0, "memory_used_bytes"), "lots"),
    "a huge int": (("gpus", 0, "memory_used_bytes"), 10**40),
    "a float for an int": (("gpus", 0, "memory_used_bytes"), 1.5),
    "a huge float": (("host", "cpu_percent"), 1e300),
    "a bool for an int": (("host", "cpu_count"), True),
    "a string for a bool": (("training", 0, "probe", "loaders", 0, "requested", "pin_memory"), "yes"),
    "a number for a list": (("gpus",), 3),
    "a string for a list": (("notices",), "abc"),
    "a list of numbers for reasons": (("gpus", 0, "unavailable"), {"fan_percent": [1, 2]}),
    "a list for reasons": (("gpus", 0, "unavailable"), ["fan_percent"]),
    "a number in a tuple of strings": (("notices",), [1]),
    "a short load average": (("host", "load_average"), [1.0]),
    "an epoch-sized process start": (("host_processes", 0, "start_time"), 1e200),
    "a null GPU index": (("gpus", 0, "index"), None),
    "a list for the host": (("host",), []),
}


@pytest.mark.parametrize("case", WRONG, ids=list(WRONG))
def test_a_value_of_the_wrong_type_or_out_of_range_is_a_value_error(case: str) -> None:
    path, value = WRONG[case]
    text = mutated(path, value)
    with pytest.raises(ValueError):
        snapshot_from_json(text)
    data = zlib.compress(text.encode())
    with pytest.raises(ValueError):
        decode_snapshot(data)


def with_tensor_device(snap: Snapshot, device: str) -> Snapshot:
    """``snap`` with the tensor device of its first training view's probe named ``device``."""
    view = snap.training[0]
    tensors = tuple(dataclasses.replace(t, device=device) for t in view.probe.tensors)
    probe = dataclasses.replace(view.probe, tensors=tensors)
    return dataclasses.replace(snap, training=(dataclasses.replace(view, probe=probe), *snap.training[1:]))


@pytest.mark.parametrize("device", ["cuda:²", "cuda:١", "cuda:𝟘", "cuda:999", "cuda:", "gpu:0", "cuda:0 "])
def test_a_tensor_device_other_than_cpu_or_cuda_and_ascii_digits_is_a_value_error(device: str) -> None:
    """``str.isdigit`` takes ``²``, which ``int`` does not: such a device crashed the training screen of a replay
    and of a remote host."""
    base = REAL[0]
    assert base.training[0].probe.tensors, "the scene has a tensor device to change"
    hostile = with_tensor_device(base, device)
    with pytest.raises(ValueError, match=r"TensorMemory\.device"):
        snapshot_from_json(snapshot_json(hostile))
    with pytest.raises(ValueError, match=r"TensorMemory\.device"):
        snapshot_from_delta(delta_json(hostile, base), base)


def test_the_tensor_devices_gputop_writes_still_decode() -> None:
    base = REAL[0]
    for device in ("cpu", "cuda:0", "cuda:63"):
        snap = with_tensor_device(base, device)
        assert snapshot_from_json(snapshot_json(snap)) == snap
        assert snapshot_from_delta(delta_json(snap, base), base) == snap


def replaced(node: object, path: tuple[object, ...], value: object) -> object:
    """``node`` (a model object, or a tuple of them) with the value at ``path`` (field names and indexes)
    replaced."""
    if not path:
        return value
    key, rest = path[0], path[1:]
    if isinstance(key, int):
        assert isinstance(node, tuple)
        return (*node[:key], replaced(node[key], rest, value), *node[key + 1 :])
    assert isinstance(key, str)
    return dataclasses.replace(node, **{key: replaced(getattr(node, key), rest, value)})  # type: ignore[type-var]


def owner_at(snap: Snapshot, path: tuple[object, ...]) -> object:
    node: object = snap
    for key in path[:-1]:
        node = node[key] if isinstance(key, int) else getattr(node, key)  # type: ignore[index]
    return node


IMPLAUSIBLE = {
    "-50 %": (("gpus", 0, "utilization_gpu_percent"), -50.0),
    "1e14 %": (("gpus", 0, "sm_activity_percent"), 1e14),
    "-1e15 °C": (("gpus", 0, "temperature_c"), -1e15),
    "16 EiB used": (("gpus", 0, "memory_used_bytes"), 2**64 - 1),
    "more used than the total": (("gpus", 0, "memory_used_bytes"), 80 * 2**30 + 1),
    "a negative power": (("gpus", 0, "power_w"), -5.0),
    "P99": (("gpus", 0, "pstate"), 99),
    "a clock of 4294967295 MHz": (("gpus", 0, "clock_sm_mhz"), 2**32 - 1),
    "a process at 150 % of its GPU": (("processes", 0, "sm_percent"), 150.0),
    "a process at -1 % CPU": (("host_processes", 0, "cpu_percent"), -1.0),
    "a negative RSS": (("host_processes", 0, "rss_bytes"), -(2**40)),
    "a worker's negative memory": (("training", 0, "workers", 0, "uss_bytes"), -1),
    "a main thread busy twice over": (("training", 0, "main_thread", "busy_share"), 2.0),
    "a data wait share of 5": (("training", 0, "probe", "loaders", 0, "data_wait_share"), 5.0),
}


@pytest.mark.parametrize("case", IMPLAUSIBLE, ids=list(IMPLAUSIBLE))
def test_a_value_out_of_its_range_is_null_with_the_reason_invalid_value(case: str) -> None:
    """The decoder checked types and not ranges: −50 %, 1e14 %, −1e15 °C and "16.0EiB / 0B" were shown."""
    path, value = IMPLAUSIBLE[case]
    base = REAL[0]
    name = path[-1]
    assert getattr(owner_at(base, path), name) is not None, "the scene has the value to change"
    hostile = replaced(base, path, value)
    whole = snapshot_from_json(snapshot_json(hostile))  # type: ignore[arg-type]
    delta = snapshot_from_delta(delta_json(hostile, base), base)  # type: ignore[arg-type]
    for snap in (whole, delta):
        owner = owner_at(snap, path)
        assert getattr(owner, name) is None
        assert owner.unavailable[name] == "invalid value"  # type: ignore[attr-defined]
        assert (
            snap
            == replaced(  # nothing else changed
                base,
                path[:-1],
                dataclasses.replace(owner_at(base, path), **{name: None}, unavailable=owner.unavailable),
            )
        )
        check_well_typed(snap)


NO_REASON_KEPT = {
    "the host's CPU at -50 %": (("host", "cpu_percent"), -50.0),
    "a core at 300 %": (("host", "cpu_percent_per_core"), (300.0,)),
    "more host memory used than there is": (("host", "memory_used_bytes"), 2**62),
    "the workers at -1 % CPU": (("training", 0, "workers_cpu_percent"), -1.0),
    "negative CUDA memory": (("training", 0, "probe", "cuda", 0, "allocated_bytes"), -(2**30)),
    "a negative tensor size": (("training", 0, "probe", "tensors", 0, "weights_bytes"), -1),
}


@pytest.mark.parametrize("case", NO_REASON_KEPT, ids=list(NO_REASON_KEPT))
def test_a_value_out_of_range_where_no_reason_is_kept_refuses_the_snapshot(case: str) -> None:
    """The host's totals and the probe's counters keep no reasons: no gputop writes them out of range."""
    path, value = NO_REASON_KEPT[case]
    base = REAL[0]
    hostile = replaced(base, path, value)
    with pytest.raises(ValueError, match="out of range"):
        snapshot_from_json(snapshot_json(hostile))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="out of range"):
        snapshot_from_delta(delta_json(hostile, base), base)  # type: ignore[arg-type]


def test_every_field_bounded_where_reasons_are_kept_may_be_null() -> None:
    """A value out of range becomes None there: the field must allow it."""
    for cls, ranges in RANGES.items():
        hints = typing.get_type_hints(cls)
        for name in ranges:
            assert name in hints, f"{cls.__name__}.{name} is no field"
            if cls in KEEPS_REASONS:
                assert type(None) in typing.get_args(hints[name]), f"{cls.__name__}.{name} cannot be None"
    for cls in KEEPS_REASONS:
        assert "unavailable" in typing.get_type_hints(cls)


def hostile_json(**fields: object) -> bytes:
    """A snapshot's JSON with ``fields`` in place of the real snapshot's."""
    return json.dumps({**PLAIN[3], **fields}, ensure_ascii=False).encode()


HEAVY = {
    "real: a starved job": snapshot_json(REAL[0]),
    "real: two jobs": snapshot_json(REAL[1]),
    "real: a node with a lost GPU": snapshot_json(REAL[2]),
    "bare host processes": hostile_json(host_processes=[{"pid": pid} for pid in range(1, 2_001)]),
    "bare training views": hostile_json(training=[{"pid": pid} for pid in range(1, 2_001)]),
    "reasons": hostile_json(
        host_processes=[{"pid": p, "unavailable": {f"k{k}": "v" for k in range(5)}} for p in range(1, 1_001)]
    ),
    "floats": hostile_json(host={**PLAIN[3]["host"], "cpu_percent_per_core": [1.5] * 50_000}),
    "short strings": hostile_json(notices=["ab"] * 50_000),
    "wide strings": hostile_json(notices=["\U0001f600" + "a" * 2**20] * 4),
    "wide by escapes": json.dumps({**PLAIN[3], "notices": ["\U0001f600" + "a" * 2**20] * 4}).encode(),
}
"""Real snapshots, and hostile ones that take the most memory a byte of JSON can: objects of their defaults,
reasons, floats, short strings, strings that Python keeps four bytes a character. The estimate is so much a byte,
a value and an object: thousands of them are enough for a shortfall of a few bytes apiece to outweigh the
slack of the snapshot around them (about 6 KB)."""


@pytest.mark.parametrize("case", HEAVY, ids=list(HEAVY))
def test_the_memory_a_decoded_snapshot_holds_is_at_most_its_estimate(case: str) -> None:
    """A replay counts the snapshots it keeps by this estimate: one above it would let memory grow past the
    cache's bound."""
    text = HEAVY[case]
    snapshot_from_json(text)  # the decoders of each class are made once, at the first decode
    gc.collect()
    tracemalloc.start()
    try:
        snap = snapshot_from_json(text)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert isinstance(snap, Snapshot)
    assert held <= decoded_bytes(text), f"{held} bytes held, {decoded_bytes(text)} estimated"


@pytest.mark.parametrize("case", ["reasons", "floats", "short strings", "wide strings"])
def test_the_memory_a_row_of_changes_adds_to_its_whole_snapshot_is_at_most_its_estimate(case: str) -> None:
    base = REAL[3]
    changed = snapshot_from_json(HEAVY[case])
    delta = delta_json(changed, base)
    snapshot_from_delta(delta, base)
    gc.collect()
    tracemalloc.start()
    try:
        snap = snapshot_from_delta(delta, base)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert snap == changed
    assert held <= decoded_bytes(delta), f"{held} bytes held, {decoded_bytes(delta)} estimated"


@pytest.mark.parametrize("depth", [1_000, 100_000, 1_000_000])
@pytest.mark.parametrize("where", ["top", "field", "reasons"])
def test_deep_nesting_is_a_value_error(depth: int, where: str) -> None:
    deep = "[" * depth + "]" * depth
    if where == "top":
        text = deep
    else:
        path = ("time",) if where == "field" else ("gpus", 0, "unavailable")
        text = mutated(path, "DEEP").replace('"DEEP"', deep)
    started = time.process_time()
    with pytest.raises(ValueError):
        snapshot_from_json(text)
    with pytest.raises(ValueError):
        decode_snapshot(zlib.compress(text.encode()))
    assert time.process_time() - started < 2


def test_control_characters_and_bidi_overrides_from_outside_are_made_visible() -> None:
    evil = "python train.py \x1b]0;pwned\x07\x1b[2J\u202egnp.exe\x9b31m\n"
    tree = copy.deepcopy(PLAIN[0])
    tree["host"]["hostname"] = "node\x1b[31m"
    tree["driver"]["driver_version"] = "550\ud800"  # a lone surrogate, as JSON's "\ud800" escape
    tree["processes"][0]["host"]["command"] = evil
    tree["gpus"][0]["unavailable"] = {"fan\x07": "no\x1b[5mperm"}
    tree["notices"] = ["\x1b]8;;http://evil\x1b\\click\x1b]8;;\x1b\\"]

    for snap in (snapshot_from_json(json.dumps(tree)), decode_snapshot(zlib.compress(json.dumps(tree).encode()))):
        command = snap.processes[0].host.command if snap.processes[0].host else None
        assert command == printable(evil)
        assert "\x1b" not in command and "\u202e" not in command
        assert snap.host.hostname == "node\\x1b[31m"
        assert snap.driver.driver_version == "550\\ud800"
        assert dict(snap.gpus[0].unavailable) == {"fan\\x07": "no\\x1b[5mperm"}
        assert snap.notices == (printable(tree["notices"][0]),)
        check_well_typed(snap)


def test_not_bytes_nor_text_is_a_value_error() -> None:
    for data in (5, 1.5, None, [], {}, "text"):
        with pytest.raises(ValueError):
            decode_snapshot(data)  # type: ignore[arg-type]
    for text in (5, None, [], {}):
        with pytest.raises(ValueError):
            snapshot_from_json(text)  # type: ignore[arg-type]


# -- size: bounded before parsing, and while decompressing -------------------------------------------------------


def peak_mib(call: typing.Callable[[], object]) -> float:
    tracemalloc.start()
    with contextlib.suppress(ValueError):
        call()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return peak / 1024**2


def bomb(size: int, head: bytes = b'{"time":1,"notices":["') -> bytes:
    """A zlib stream of ``size`` bytes of JSON-looking text, a thousandth of that compressed."""
    packer = zlib.compressobj(9)
    parts = [packer.compress(head)]
    chunk = b"A" * (1 << 20)
    for _ in range(size // len(chunk)):
        parts.append(packer.compress(chunk))
    parts.append(packer.flush())
    return b"".join(parts)


def test_a_zlib_bomb_is_a_value_error_without_inflating_it() -> None:
    data = bomb(64 * 1024 * 1024)  # four times the bound: inflated, it would take more than the 40 MiB allowed
    assert len(data) < 128 * 1024
    started = time.process_time()
    with pytest.raises(ValueError, match="16 MiB"):
        decode_snapshot(data)
    assert time.process_time() - started < 1
    assert peak_mib(lambda: decode_snapshot(data)) < 40


def test_text_over_the_bound_is_refused_before_parsing() -> None:
    text = b" " * MAX_SNAPSHOT_BYTES + json.dumps(PLAIN[0]).encode()
    with pytest.raises(ValueError, match="16 MiB"):
        snapshot_from_json(text)
    with pytest.raises(ValueError, match="16 MiB"):
        snapshot_from_json(text.decode())
    just_under = b" " * (MAX_SNAPSHOT_BYTES - 100_000) + json.dumps(PLAIN[0]).encode()
    assert snapshot_from_json(just_under) == REAL[0]


@pytest.mark.parametrize("item", ["[]", "{}", "1e0", '"ab"', '{"a":1}'])
def test_many_small_values_within_the_size_bound_stay_within_memory(item: str) -> None:
    """16 MiB of tiny JSON values would take hundreds of MiB parsed: refused by their count before parsing."""
    items = ",".join([item] * (MAX_SNAPSHOT_BYTES // (len(item) + 1) - 64))
    text = '{"time":1,"notices":[' + items + "]}"
    assert len(text) <= MAX_SNAPSHOT_BYTES
    started = time.process_time()
    assert peak_mib(lambda: snapshot_from_json(text)) < 100
    with pytest.raises(ValueError):
        snapshot_from_json(text)
    assert time.process_time() - started < 4


# -- any bytes in ------------------------------------------------------------------------------------------------

FUZZ = settings(
    max_examples=3 * settings.default.max_examples,  # 300; under -m fast, whose profile tries fewer, 30
    deadline=timedelta(seconds=2),
    suppress_health_check=[HealthCheck.too_slow],
)


@FUZZ
@given(st.binary(max_size=4096))
def test_any_bytes_are_a_snapshot_or_a_value_error(data: bytes) -> None:
    decoded_or_value_error(data)
    for zdict in (b"", ZDICT):
        try:
            snap = decode_snapshot(data, zdict)
        except ValueError:
            continue
        check_well_typed(snap)


@FUZZ
@given(st.text(max_size=2048))
def test_any_text_is_a_snapshot_or_a_value_error(text: str) -> None:
    decoded_or_value_error(text)


@FUZZ
@given(st.binary(max_size=2048))
def test_any_inflated_bytes_are_a_snapshot_or_a_value_error(text: bytes) -> None:
    """Bytes behind a valid zlib stream, with and without the recording's dictionary."""
    for zdict in (b"", ZDICT):
        data = encode_snapshot_bytes(text, zdict)
        try:
            snap = decode_snapshot(data, zdict)
        except ValueError:
            continue
        check_well_typed(snap)


def encode_snapshot_bytes(text: bytes, zdict: bytes) -> bytes:
    packer = zlib.compressobj(6, zdict=zdict) if zdict else zlib.compressobj(6)
    return packer.compress(text) + packer.flush()


JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
)
JSON_VALUES = st.recursive(
    JSON_LEAVES,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=30,
)


@FUZZ
@given(JSON_VALUES)
def test_any_json_value_is_a_snapshot_or_a_value_error(value: object) -> None:
    decoded_or_value_error(json.dumps(value))


# -- real snapshots, mutated -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Deep:
    """Stands for ``depth`` nested arrays, spliced into the JSON text (json.dumps itself would recurse)."""

    depth: int


CONTROL = st.text(
    alphabet=st.sampled_from("\x00\x07\x1b\x9b\u202e\u2066\ud800\udfff\n\t\r[]0;a"), min_size=1, max_size=20
)
HOSTILE = st.one_of(
    JSON_VALUES,
    st.sampled_from([math.nan, math.inf, -math.inf, 1e308, -1e308, 5e-324, 2**63, 2**64, -(2**64), 10**30, 1e15]),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(min_value=-1e20, max_value=1e20),
    CONTROL,
    st.builds(Deep, st.integers(min_value=2, max_value=200_000)),
    st.just("x" * 100_000),
    st.lists(st.just({}), min_size=1, max_size=2000),
)


def all_paths(tree: object) -> list[tuple[object, ...]]:
    """The path of every value in ``tree`` (keys and indexes from the top), the top itself left out."""
    found: list[tuple[object, ...]] = []
    todo: list[tuple[tuple[object, ...], object]] = [((), tree)]
    while todo:
        path, node = todo.pop()
        if path:
            found.append(path)
        if isinstance(node, dict):
            todo.extend(((*path, key), value) for key, value in node.items())
        elif isinstance(node, list):
            todo.extend(((*path, k), value) for k, value in enumerate(node))
    return found


REAL_TEXTS = [snapshot_json(snap) for snap in REAL]
REAL_PATHS = [all_paths(tree) for tree in PLAIN]


def to_text(tree: object) -> str:
    deep: dict[str, int] = {}

    def token(value: object) -> str:
        if not isinstance(value, Deep):
            raise TypeError(f"{value!r} is not JSON")
        name = f"__deep_{len(deep)}__"
        deep[name] = value.depth
        return name

    text = json.dumps(tree, default=token)
    for name, depth in deep.items():
        text = text.replace(f'"{name}"', "[" * depth + "]" * depth)
    return text


@st.composite
def mutated_snapshots(draw: st.DrawFn) -> str:
    """A real snapshot's JSON with one to four of its values (leaves or whole objects and arrays) replaced by
    hostile ones, keys added or removed."""
    which = draw(st.sampled_from(range(len(REAL))))
    tree, paths = json.loads(REAL_TEXTS[which]), REAL_PATHS[which]  # a copy of its own, and its values' paths
    for n in range(draw(st.integers(min_value=1, max_value=4))):
        if n:
            paths = all_paths(tree)
        path = draw(st.sampled_from(paths))
        parent = tree
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "replace", "replace", "drop", "add"]))
        if action == "drop":
            del parent[path[-1]]
        elif action == "add" and isinstance(parent, dict):
            parent[draw(st.text(max_size=12))] = draw(HOSTILE)
        else:
            parent[path[-1]] = draw(HOSTILE)
    return to_text(tree)


@settings(FUZZ, max_examples=6 * settings.default.max_examples)  # 600; under -m fast, 60
@given(mutated_snapshots())
def test_a_mutated_real_snapshot_is_a_snapshot_or_a_value_error(text: str) -> None:
    decoded_or_value_error(text)
    try:
        snap = decode_snapshot(encode_snapshot_bytes(text.encode(), ZDICT), ZDICT)
    except ValueError:
        return
    check_well_typed(snap)
