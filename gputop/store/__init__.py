"""Recording snapshots to a file and reading them back (docs/recording.md): ``recording`` the SQLite file, ``rows``
the format of its rows; the snapshots' JSON is ``gputop.codec``'s."""

from gputop.store.recording import Recorder, Recording, RecordingError, RecordingInfo, open_recording
from gputop.store.rows import SCHEMA_VERSION, WeighedSnapshot

__all__ = [
    "SCHEMA_VERSION",
    "Recorder",
    "Recording",
    "RecordingError",
    "RecordingInfo",
    "WeighedSnapshot",
    "open_recording",
]
