"""Recording snapshots to a file and reading them back (docs/recording.md); the snapshots' encoding is
``gputop.codec``'s."""

from gputop.store.recording import (
    SCHEMA_VERSION,
    Recorder,
    Recording,
    RecordingError,
    RecordingInfo,
    WeighedSnapshot,
    open_recording,
)

__all__ = [
    "SCHEMA_VERSION",
    "Recorder",
    "Recording",
    "RecordingError",
    "RecordingInfo",
    "WeighedSnapshot",
    "open_recording",
]
