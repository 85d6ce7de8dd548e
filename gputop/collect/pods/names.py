"""What a pod source's answer is held to: Kubernetes' own rules for names, UIDs and container ids, and how many
pods one answer may hold.

A pod's namespace, name and container names are chosen by whoever created it, and the answer that carries them
comes over a socket or from directory names: a name that Kubernetes itself would refuse (control characters,
capitals, over its length) was not written by Kubernetes, and the pod that carries it is left out, its UID kept
so that a process in it is told why."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import field

from gputop.frozen import immutable
from gputop.model import POD_LABEL_CHARS, POD_LABEL_FORM, POD_NAME_CHARS, POD_NAME_FORM

MAX_PODS = 2000
"""The most pods one answer is read for: a node runs 110 by default and at most a few hundred (the kubelet's
``maxPods``); the rest of a longer answer is left unread."""
MAX_CONTAINERS = 64
"""The most containers of one pod read (init, sidecar and ephemeral ones included)."""

_DNS_LABEL = re.compile(POD_LABEL_FORM)
_DNS_SUBDOMAIN = re.compile(POD_NAME_FORM)
_UID = re.compile(r"[0-9a-f][0-9a-f-]{7,63}")
"""A UUID from the API server, or the 32 hex digits of a static pod's config hash (its mirror pod's UID)."""
_CONTAINER_ID = re.compile(r"(?:[a-z0-9-]{1,32}://)?([0-9a-f]{64})")
"""``containerd://<id>``, ``cri-o://<id>``, ``docker://<id>`` in a pod's status, or the bare id in a log name."""


@immutable
class ListedPod:
    """One pod of a source's answer: its names, and its containers' names by container id where it says."""

    namespace: str
    name: str
    containers: Mapping[str, str] = field(default_factory=dict)
    """Container name by full container id (64 hex digits)."""
    only_container: str | None = None
    """The pod's one container's name, where it has just one: then a process in the pod runs in it whatever its
    id."""


@immutable
class PodListing:
    """A source's answer: the pods by UID, and the UIDs of those left out for a name Kubernetes would refuse."""

    pods: Mapping[str, ListedPod]
    refused: frozenset[str] = frozenset()


def namespace_ok(text: object) -> bool:
    return type(text) is str and len(text) <= POD_LABEL_CHARS and _DNS_LABEL.fullmatch(text) is not None


def pod_name_ok(text: object) -> bool:
    return type(text) is str and len(text) <= POD_NAME_CHARS and _DNS_SUBDOMAIN.fullmatch(text) is not None


def container_name_ok(text: object) -> bool:
    return namespace_ok(text)


def uid_of(text: object) -> str | None:
    """The pod UID ``text`` is, in the cgroup's spelling (lowercase, with dashes), or None if it is none."""
    if type(text) is not str:
        return None
    uid = text.lower()
    return uid if _UID.fullmatch(uid) else None


def container_id_of(text: object) -> str | None:
    """The 64 hex digits of a container id as a pod's status or a log file names it, or None."""
    if type(text) is not str:
        return None
    found = _CONTAINER_ID.fullmatch(text)
    return None if found is None else found.group(1)
