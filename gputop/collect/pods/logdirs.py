"""Pods from the kubelet's log directories, where no API can be asked: ``/var/log/pods/<namespace>_<pod>_<uid>/
<container>/`` names each pod by UID with its containers, and ``/var/log/containers/<pod>_<namespace>_<container>-
<container id>.log`` names the container a container id is.

Kubernetes names cannot hold ``_`` (lowercase letters, digits, ``-`` and ``.``), so each name splits one way.
The layout is the kubelet's own (``kuberuntime``'s ``BuildPodLogsDirectory`` and ``BuildContainerLogsDirectory``),
the same on every container runtime; it needs read access to ``/var/log`` only, no credentials."""

from __future__ import annotations

import os
from itertools import islice

from gputop.collect.pods.names import (
    MAX_CONTAINERS,
    MAX_PODS,
    ListedPod,
    PodListing,
    container_id_of,
    container_name_ok,
    namespace_ok,
    pod_name_ok,
    uid_of,
)
from gputop.collect.pods.source import PodSourceError
from gputop.frozen import immutable

MAX_LOG_LINKS = MAX_PODS * 8
"""The most entries of ``/var/log/containers`` read: one per container, restarts included."""


@immutable
class LogDirectories:
    """The kubelet's two log directories (``/var/log/pods``, ``/var/log/containers``)."""

    pods_dir: str = "/var/log/pods"
    containers_dir: str = "/var/log/containers"

    name = "/var/log/pods"

    def listing(self) -> PodListing:
        """The pods that have a log directory, or ``PodSourceError`` where the directory cannot be read."""
        try:
            entries = _names(self.pods_dir, MAX_PODS)
        except OSError as exc:
            raise PodSourceError(f"{self.pods_dir}: {exc.strerror or type(exc).__name__}") from None
        try:
            links = _names(self.containers_dir, MAX_LOG_LINKS)
        except OSError:
            links = []  # container names by id only; the pods are still told
        ids = _container_ids(links)
        pods: dict[str, ListedPod] = {}
        refused: set[str] = set()
        for entry in entries:
            parts = entry.split("_")
            uid = uid_of(parts[-1]) if len(parts) == 3 else None
            if uid is None:
                continue
            namespace, name = parts[0], parts[1]
            if not (namespace_ok(namespace) and pod_name_ok(name)):
                refused.add(uid)
                continue
            try:
                containers = [
                    c for c in _names(os.path.join(self.pods_dir, entry), MAX_CONTAINERS) if container_name_ok(c)
                ]
            except OSError:
                containers = []
            by_id = {cid: c for cid, c in ids.get((name, namespace), {}).items() if c in containers}
            only = containers[0] if len(containers) == 1 else None
            pods[uid] = ListedPod(namespace, name, by_id, only)
        return PodListing(pods, frozenset(refused))


def _names(directory: str, limit: int) -> list[str]:
    with os.scandir(directory) as entries:
        return [entry.name for entry in islice(entries, limit)]


def _container_ids(links: list[str]) -> dict[tuple[str, str], dict[str, str]]:
    """Each ``(pod, namespace)``'s container names by container id, from ``<pod>_<namespace>_<container>-<id>.log``
    names (a restarted container has one per id)."""
    found: dict[tuple[str, str], dict[str, str]] = {}
    for link in links:
        parts = link.removesuffix(".log").split("_")
        if len(parts) != 3 or len(parts[2]) < 66 or parts[2][-65] != "-":
            continue
        cid = container_id_of(parts[2][-64:])
        if cid is not None:
            found.setdefault((parts[0], parts[1]), {})[cid] = parts[2][:-65]
    return found
