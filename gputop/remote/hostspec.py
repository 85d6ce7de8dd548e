"""Which hosts to watch: ``--host`` arguments and the hosts file (docs/hosts.md).

One host per line, ``#`` starts a comment, words split as a shell would (quotes keep spaces together)::

    gpu-node-01
    alice@gpu-node-02   command=~/venv/bin/gputop
    local

The first word is the ssh destination (anything ``ssh`` accepts, resolved by the user's ssh config), or ``local``
for this machine sampled in-process without ssh. Then ``key=value`` settings; the only one is ``command``, the
gputop to run on that host (a path, ``gputop`` by default). A ``--host`` argument takes the text of one such line.

The file is the user's, but it is read as input all the same: only a regular file of at most
``MAX_HOSTS_FILE_BYTES``, lines of at most ``MAX_LINE_CHARS``, at most ``MAX_HOSTS`` hosts in all, so a wrong
path (``/dev/zero``, a FIFO) or a runaway file is a one-line error, never a hang or a memory error.
"""

from __future__ import annotations

import os
import shlex
import stat
from collections.abc import Iterable
from typing import TYPE_CHECKING

from gputop.frozen import immutable

if TYPE_CHECKING:
    from pathlib import Path

LOCAL = "local"
"""The host name that means this machine, sampled in-process (``localhost`` is an ssh destination like any other)."""
DEFAULT_COMMAND = "gputop"
SETTINGS = ("command",)
MAX_HOSTS_FILE_BYTES = 1024 * 1024
MAX_LINE_CHARS = 4096
MAX_HOSTS = 256
"""Each host is an ssh process, a thread and a section on screen: far past any dashboard one can read."""
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


class HostsError(ValueError):
    """A host that cannot be used as given: the message is one line, fit to show to the user."""


@immutable
class HostSpec:
    """One host to watch: its ssh destination (also its name on screen) and the gputop to run there."""

    name: str
    command: str = DEFAULT_COMMAND

    @property
    def local(self) -> bool:
        return self.name == LOCAL


def _check_name(name: str) -> None:
    if name.startswith("-"):
        raise HostsError(f"{name!r} is not a host name (it would be read as an ssh option)")
    if not name.isprintable():
        raise HostsError(f"{name!r} is not a host name")


def parse_host(text: str) -> HostSpec:
    """One host from the text of one line (a ``--host`` argument, or a hosts file line without its number).

    Raises ``HostsError`` with a message that names what is wrong.
    """
    if len(text) > MAX_LINE_CHARS:
        raise HostsError(f"longer than {MAX_LINE_CHARS} characters")
    try:
        words = shlex.split(text, comments=True)
    except ValueError as exc:  # an unclosed quote
        raise HostsError(f"cannot split {text.strip()!r}: {exc}") from None
    if not words:
        raise HostsError("no host name")
    name, settings = words[0], words[1:]
    _check_name(name)
    values: dict[str, str] = {}
    for word in settings:
        key, equals, value = word.partition("=")
        if not equals:
            raise HostsError(f"{word!r} is not a setting: write key=value ({', '.join(SETTINGS)})")
        if key not in SETTINGS:
            raise HostsError(f"unknown setting {key!r} (known: {', '.join(SETTINGS)})")
        if key in values:
            raise HostsError(f"{key} is given twice")
        if not value.strip():
            raise HostsError(f"{key}= needs a value")
        if not value.isprintable():
            raise HostsError(f"{key}= must be printable text")
        values[key] = value
    if name == LOCAL and "command" in values:
        raise HostsError("local is sampled by this gputop itself: command= does not apply to it")
    return HostSpec(name, values.get("command", DEFAULT_COMMAND))


def parse_hosts_text(text: str, source: str) -> list[HostSpec]:
    """Every host of a hosts file's text; errors name ``source`` and the line: ``hosts.txt:3: ...``."""
    hosts: list[HostSpec] = []
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            if len(line) > MAX_LINE_CHARS:  # before anything looks at it, comments too
                raise HostsError(f"longer than {MAX_LINE_CHARS} characters")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if len(hosts) == MAX_HOSTS:
                raise HostsError(f"more than {MAX_HOSTS} hosts")
            hosts.append(parse_host(line))
        except HostsError as exc:
            raise HostsError(f"{source}:{number}: {exc}") from None
    return hosts


def read_hosts_file(path: str | Path) -> list[HostSpec]:
    """The hosts listed in the file at ``path``; ``HostsError`` if it cannot be read or a line is wrong."""
    try:
        text = _read_small_file(path).decode("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise HostsError(f"cannot read the hosts file {path}: {reason}") from None
    hosts = parse_hosts_text(text, str(path))
    if not hosts:
        raise HostsError(f"the hosts file {path} lists no host")
    return hosts


def _read_small_file(path: str | Path) -> bytes:
    """The bytes of a regular file of at most ``MAX_HOSTS_FILE_BYTES``; ``OSError`` (with a ``strerror`` for the
    message) for anything else. Opened without blocking, so a FIFO nobody writes to is refused, not waited on."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "a special file")
            raise OSError(0, f"not a regular file ({kind})")
        chunks: list[bytes] = []
        size = 0
        while size <= MAX_HOSTS_FILE_BYTES:  # the limit and one byte more tell a file too big, however it grows
            chunk = os.read(fd, MAX_HOSTS_FILE_BYTES + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > MAX_HOSTS_FILE_BYTES:
        raise OSError(0, f"bigger than {MAX_HOSTS_FILE_BYTES // (1024 * 1024)} MiB")
    return data


def host_list(arguments: Iterable[str], hosts_file: str | None) -> list[HostSpec]:
    """The ``--host`` arguments in order, then the hosts file's lines; a host given twice is an error."""
    hosts = []
    for text in arguments:
        try:
            hosts.append(parse_host(text))
        except HostsError as exc:
            raise HostsError(f"--host {text!r}: {exc}") from None
    if hosts_file is not None:
        hosts.extend(read_hosts_file(hosts_file))
    if len(hosts) > MAX_HOSTS:
        raise HostsError(f"more than {MAX_HOSTS} hosts")
    seen: set[str] = set()
    for host in hosts:
        if host.name in seen:
            raise HostsError(f"host {host.name} is listed twice")
        seen.add(host.name)
    return hosts
