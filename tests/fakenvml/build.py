"""Build the fake ``libnvidia-ml.so.1`` and point pynvml at it.

The library is compiled with gcc against NVIDIA's real ``nvml.h`` (from the ``nvidia-nvml-dev``
wheel, never copied into the repository), once per driver profile, into
``tests/fakenvml/build/<profile>/libnvidia-ml.so.1``. A subprocess finds it through
``LD_LIBRARY_PATH=<that directory>``; in-process tests call :func:`use_in_process`.

Run ``python tests/fakenvml/build.py`` to build every profile and print the directories.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import os
import pathlib
import secrets
import shutil
import subprocess
import sys

PROFILES = ("r430", "r470", "r515", "r535", "r550", "r580", "next")

LIBRARY_NAME = "libnvidia-ml.so.1"
HERE = pathlib.Path(__file__).resolve().parent
SOURCE = HERE / "fakenvml.c"
BUILD_ROOT = HERE / "build"

_PROFILE_MACROS = {
    "r430": "430",
    "r470": "470",
    "r515": "515",
    "r535": "535",
    "r550": "550",
    "r580": "580",
    "next": "999",
}


class BuildError(RuntimeError):
    """The fake library could not be built (no compiler, no header, or a compile error)."""


@functools.lru_cache(maxsize=1)
def find_nvml_header() -> pathlib.Path:
    """Locate ``nvml.h`` inside the installed ``nvidia-nvml-dev`` distribution.

    The path inside the wheel changes between CUDA majors (``nvidia/cu13/include`` today), so it
    is looked up from the distribution's file list rather than hard-coded.

    Cached: scanning the distribution's file list costs more than the rest of a no-op build.

    Returns:
        Absolute path of the header.

    Raises:
        BuildError: The distribution is not installed or ships no ``nvml.h``.
    """
    try:
        files = importlib.metadata.files("nvidia-nvml-dev")
    except importlib.metadata.PackageNotFoundError:
        raise BuildError(
            "nvml.h not found: the 'nvidia-nvml-dev' package is not installed (pip install nvidia-nvml-dev)"
        ) from None
    for entry in files or ():
        if entry.name == "nvml.h":
            path = pathlib.Path(str(entry.locate())).resolve()
            if path.is_file():
                return path
    raise BuildError("nvml.h not found: the installed 'nvidia-nvml-dev' package does not contain it")


def _find_compiler() -> str:
    compiler = os.environ.get("CC", "gcc")
    found = shutil.which(compiler)
    if found is None:
        raise BuildError(f"C compiler not found: '{compiler}' is not on PATH (install gcc or set CC)")
    return found


def _is_fresh(target: pathlib.Path, inputs: tuple[pathlib.Path, ...]) -> bool:
    try:
        built = target.stat().st_mtime_ns
    except FileNotFoundError:
        return False
    return all(built >= path.stat().st_mtime_ns for path in inputs)


def library_path(profile: str = "r550") -> pathlib.Path:
    """Return where the library of ``profile`` is (or would be) built, without building it.

    Args:
        profile: One of :data:`PROFILES`.

    Returns:
        Path of the ``libnvidia-ml.so.1`` file.
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown profile {profile!r}; expected one of {PROFILES}")
    return BUILD_ROOT / profile / LIBRARY_NAME


def build(profile: str = "r550") -> pathlib.Path:
    """Compile the fake library for ``profile`` unless an up-to-date build exists.

    Safe when several processes (e.g. pytest-xdist workers) build at once: each compiles to its
    own temporary file and atomically renames it into place, so a reader never sees a partial
    library.

    Args:
        profile: One of :data:`PROFILES`.

    Returns:
        The directory holding ``libnvidia-ml.so.1``, ready for ``LD_LIBRARY_PATH``.

    Raises:
        ValueError: Unknown profile.
        BuildError: No compiler, no header, or the compile failed.
    """
    target = library_path(profile)
    header = find_nvml_header()
    # build.py itself is an input: it holds the compiler flags.
    if _is_fresh(target, (SOURCE, header, pathlib.Path(__file__).resolve())):
        return target.parent
    compiler = _find_compiler()
    target.parent.mkdir(parents=True, exist_ok=True)
    # Unique per builder but not pre-created: the linker then gives it the usual umask-based mode.
    tmp_name = str(target.parent / f".{LIBRARY_NAME}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    command = [
        compiler,
        "-std=gnu11",
        "-shared",
        "-fPIC",
        "-O2",
        "-Wall",
        "-Werror",
        "-fvisibility=hidden",
        f"-Wl,-soname,{LIBRARY_NAME}",
        "-DNVML_NO_UNVERSIONED_FUNC_DEFS",
        f"-DFAKENVML_PROFILE={_PROFILE_MACROS[profile]}",
        f"-I{header.parent}",
        "-o",
        tmp_name,
        str(SOURCE),
        "-pthread",
    ]
    try:
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise BuildError(f"compiling the fake NVML library ({profile}) failed:\n{result.stderr.strip()}")
        os.replace(tmp_name, target)
    finally:
        if os.path.exists(tmp_name):
            os.unlink(tmp_name)
    return target.parent


def use_in_process(profile: str = "r550") -> ctypes.CDLL:
    """Build if needed, load the fake library and make pynvml use it.

    The library is loaded by absolute path, so each profile is a distinct object and switching
    profiles within one process works. pynvml's cached function pointers and its refcount are
    reset, and the fake itself is brought back to its just-loaded condition (not initialised,
    call counters at zero) in case an earlier test left it initialised.

    Args:
        profile: One of :data:`PROFILES`.

    Returns:
        The loaded library; its ``fakenvmlCallCount`` and ``fakenvmlResetCallCounts`` are typed.
    """
    import pynvml

    lib = ctypes.CDLL(str(build(profile) / LIBRARY_NAME))
    lib.fakenvmlCallCount.argtypes = [ctypes.c_char_p]
    lib.fakenvmlCallCount.restype = ctypes.c_uint
    lib.fakenvmlResetCallCounts.argtypes = []
    lib.fakenvmlResetCallCounts.restype = None
    # A library handle is shared by every CDLL of the same file, so a previous user's nvmlInit
    # is still counted in it; bounded in case an injected error makes shutdown fail forever.
    for _ in range(1000):
        if lib.nvmlShutdown() != 0:
            break
    lib.fakenvmlResetCallCounts()
    with pynvml.libLoadLock:
        pynvml.nvmlLib = lib
        pynvml._nvmlGetFunctionPointer_cache.clear()
        pynvml._nvmlLib_refcount = 0
    return lib


def call_count(lib: ctypes.CDLL, function: str) -> int:
    """Return how many times ``function`` was called in ``lib`` since load or the last reset.

    Args:
        lib: A library returned by :func:`use_in_process`.
        function: An NVML function name, e.g. ``"nvmlDeviceGetFanSpeed"``.

    Returns:
        The call count; 0 for names the fake does not know.
    """
    return int(lib.fakenvmlCallCount(function.encode()))


def main() -> int:
    """Build every profile and print one directory per line.

    Returns:
        The process exit status.
    """
    try:
        for profile in PROFILES:
            print(build(profile))
    except BuildError as exc:
        print(f"fakenvml: error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
