"""Recording snapshots to a file and reading them back (docs/recording.md)."""

from gputop.store.recording import (
    SCHEMA_VERSION,
    Recorder,
    Recording,
    RecordingError,
    RecordingInfo,
    decode_snapshot,
    encode_snapshot,
    open_recording,
    snapshot_from_json,
    snapshot_json,
)

__all__ = [
    "SCHEMA_VERSION",
    "Recorder",
    "Recording",
    "RecordingError",
    "RecordingInfo",
    "decode_snapshot",
    "encode_snapshot",
    "open_recording",
    "snapshot_from_json",
    "snapshot_json",
]
