"""Recording snapshots to a file and reading them back (docs/recording.md).

The snapshot codec's functions are also here for the command line; their home is ``gputop.codec``.
"""

from gputop.codec import decode_snapshot, encode_snapshot, snapshot_from_json, snapshot_json
from gputop.store.recording import SCHEMA_VERSION, Recorder, Recording, RecordingError, RecordingInfo, open_recording

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
