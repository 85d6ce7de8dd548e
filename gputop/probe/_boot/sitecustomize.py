"""Started by ``gputop run`` through ``PYTHONPATH`` in every Python process of the job: installs the probe.

It then runs the ``sitecustomize`` that this one shadows, if the environment has one. The probe is loaded from
its files as ``gputop_probe``, so the job's interpreter needs no gputop installed. Nothing here may stop the
interpreter from starting.
"""

import importlib.machinery
import importlib.util
import os
import sys


def _chain_to_shadowed() -> None:
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _install_probe() -> None:
    package_dir = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location(
        "gputop_probe", os.path.join(package_dir, "__init__.py"), submodule_search_locations=[package_dir]
    )
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["gputop_probe"] = module
    spec.loader.exec_module(module)
    module.install()


try:
    _install_probe()
except Exception as exc:
    sys.stderr.write(f"gputop: probe not installed: {type(exc).__name__}: {exc}\n")
_chain_to_shadowed()
