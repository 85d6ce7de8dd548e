"""The lossless snapshot codec: a ``Snapshot`` as compact JSON and back, with a strict decoder.

Recordings (``gputop.store.rows``) store snapshots in this form, deflated, whole or as their changes from another;
``gputop stream --full`` writes one per line and the hosts view reads them back (``gputop/remote/stream.py``). The
JSON is the model's dataclass tree, every dataclass an object keyed by field name (docs/recording.md, "Encoding of
snapshots.data").

A snapshot's JSON may come from another machine or another user: the decoder bounds the text before parsing it,
checks the type and range of every value and makes every string printable ("Reading files from someone else").

One module a job: ``encode`` (the current format), ``decode`` (the strict decoder), ``upgrade`` (older formats
read as the current one), ``delta`` (a snapshot as its changes from another), ``bounds`` (what text from someone
else is held to, and what its snapshot may cost).
"""

from gputop.codec.bounds import (
    MAX_FLOAT,
    MAX_INT,
    MAX_JSON_TOKENS,
    MAX_SNAPSHOT_BYTES,
    MAX_TIME,
    decoded_bytes,
    json_tokens,
)
from gputop.codec.decode import snapshot_from_json, snapshot_unwritten
from gputop.codec.delta import delta_json, snapshot_from_delta
from gputop.codec.encode import FORMAT, snapshot_json
from gputop.codec.upgrade import ADDED_LATER, V1_NOT_RECORDED

__all__ = [
    "ADDED_LATER",
    "FORMAT",
    "MAX_FLOAT",
    "MAX_INT",
    "MAX_JSON_TOKENS",
    "MAX_SNAPSHOT_BYTES",
    "MAX_TIME",
    "V1_NOT_RECORDED",
    "decoded_bytes",
    "delta_json",
    "json_tokens",
    "snapshot_from_delta",
    "snapshot_from_json",
    "snapshot_json",
    "snapshot_unwritten",
]
