"""The snapshot data model: what every consumer of gputop reads.

Pure data. Nothing here does I/O or imports pynvml, psutil, textual or torch, so the dashboard, the outputs,
the recorder and the advisor can all be tested with plain values.

A value that could not be read is ``None`` and its field name maps to a reason in the owner's ``unavailable``
mapping (for example ``{"fan_percent": "unsupported"}``). Zero always means a measured zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import field
from types import MappingProxyType
from typing import Final, Literal, get_args

from gputop.frozen import immutable

# Reasons a value is missing. Shown to users, so they are short and plain.
UNSUPPORTED = "unsupported"
NO_PERMISSION = "no permission"
NOT_IN_DRIVER = "not in this driver"
PROCESS_EXITED = "process exited"
NOT_VISIBLE = "not in this PID namespace"
ACCESS_DENIED = "access denied"
ZOMBIE = "zombie"
MEASURING = "measuring"
INVALID = "invalid value from the driver"
INVALID_VALUE = "invalid value"
"""A value a recording or a remote host gave out of the range it can take (``gputop.plausible``)."""
NOT_REPORTED = "not reported by the driver"
"""A value the call answered but marked not available (NVML_VALUE_NOT_AVAILABLE), e.g. a process's memory on WDDM."""
NOT_IN_MIG_MODE = "not available in MIG mode"
"""NVML answers no utilization (GPU, memory controller, per process) on a GPU partitioned with MIG, nor on its
instances: SM and tensor activity come from GPM per instance instead, on Hopper and newer."""
MIG_MEMORY_ROOT_ONLY = "root only in MIG mode"
"""What ``no permission`` on a MIG GPU's memory means: NVML gives the aggregate over the instances to a privileged
caller only (NVML API reference, ``nvmlDeviceGetMemoryInfo``); each instance's own memory is read."""

# The states and kinds below are Literal types, so a misspelt one is a type error; the strings are what the JSON
# documents, recordings and remote snapshots hold.

DriverStatus = Literal["ok", "unavailable"]
DRIVER_OK: Final = "ok"
DRIVER_UNAVAILABLE: Final = "unavailable"

GpuState = Literal["ok", "lost", "error"]
"""``lost``: the GPU fell off the bus or needs a reset; ``error``: it could not be opened."""
GPU_OK: Final = "ok"
GPU_LOST_STATE: Final = "lost"
GPU_ERROR: Final = "error"

ProcessKind = Literal["compute", "graphics", "compute+graphics"]
COMPUTE: Final = "compute"
GRAPHICS: Final = "graphics"
COMPUTE_GRAPHICS: Final = "compute+graphics"

MigMode = Literal["enabled", "disabled"]
"""Whether a GPU is partitioned into MIG instances (``nvmlDeviceGetMigMode``)."""
MIG_ENABLED: Final = "enabled"
MIG_DISABLED: Final = "disabled"

ThrottleReason = Literal[
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "display_clock_setting",
]
"""NVML's clock-event (throttle) reasons, as gputop names them."""
THROTTLE_REASONS: tuple[ThrottleReason, ...] = get_args(ThrottleReason)

_EMPTY: Mapping[str, str] = MappingProxyType({})


def frozen_reasons(reasons: Mapping[str, str] | None) -> Mapping[str, str]:
    """Return a read-only copy of a field-to-reason mapping (shared empty one when there is nothing)."""
    return MappingProxyType(dict(reasons)) if reasons else _EMPTY


@immutable
class CpuUse:
    """CPU used over the last process-table scan (100 = one core): of one process (``pid``, ``name``, its
    ``user``), or of all of one user's processes together (``pid`` None)."""

    cpu_percent: float
    user: str | None = None
    pid: int | None = None
    name: str | None = None


@immutable
class CpuTakers:
    """Who used the host's CPUs between the last two process-table scans (the slow tick, every 2 s): the
    processes that used the most, most first, and the users whose processes did, each counted whole. Only
    processes this user may see in ``/proc`` are counted (``hidepid`` hides the others')."""

    processes: tuple[CpuUse, ...] = ()
    users: tuple[CpuUse, ...] = ()


@immutable
class HostInfo:
    """The machine the monitor runs on."""

    hostname: str
    cpu_percent: float | None
    cpu_percent_per_core: tuple[float, ...]
    cpu_count: int
    usable_cpu_count: int
    load_average: tuple[float, float, float] | None
    memory_total_bytes: int
    memory_used_bytes: int
    memory_available_bytes: int
    swap_total_bytes: int
    swap_used_bytes: int
    cpu_takers: CpuTakers | None = None
    """Who used the CPUs; None before a second process-table scan, and in snapshots recorded before gputop
    kept it."""


@immutable
class DriverInfo:
    """Whether NVML answered, and which driver, CUDA and NVML versions it reported."""

    status: DriverStatus
    reason: str | None = None
    driver_version: str | None = None
    cuda_version: str | None = None
    nvml_version: str | None = None

    @property
    def ok(self) -> bool:
        return self.status == DRIVER_OK


@immutable
class MigInstance:
    """One MIG device of a GPU in MIG mode: a compute instance inside a GPU instance, with its share of the GPU.

    ``index`` is its slot under the parent GPU (``nvmlDeviceGetMigDeviceHandleByIndex``), the ``MIG Dev`` of
    nvidia-smi; ``gpu_instance_id`` and ``compute_instance_id`` are what NVML's process lists name it by.
    ``profile`` is the instance's profile as nvidia-smi writes it (``3g.40gb``). ``sm_activity_percent`` and
    ``tensor_activity_percent`` come from GPM for this GPU instance (Hopper and newer): NVML has no utilization
    in MIG mode.
    """

    index: int
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    profile: str | None = None
    uuid: str | None = None
    multiprocessor_count: int | None = None
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    sm_activity_percent: float | None = None
    tensor_activity_percent: float | None = None
    unavailable: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    @property
    def memory_used_fraction(self) -> float | None:
        if not self.memory_total_bytes or self.memory_used_bytes is None:
            return None
        return self.memory_used_bytes / self.memory_total_bytes

    @property
    def label(self) -> str:
        """How the dashboard names it in a process row: its profile and GPU instance id, ``3g.40gb#1``."""
        gi = "?" if self.gpu_instance_id is None else str(self.gpu_instance_id)
        return f"{self.profile or 'MIG'}#{gi}"


GPM_PROFILE_FIELDS = (
    "sm_occupancy_percent",
    "tensor_activity_percent",
    "dram_bandwidth_percent",
    "fp64_activity_percent",
    "fp32_activity_percent",
    "fp16_activity_percent",
    "gpm_pcie_tx_bytes_per_s",
    "gpm_pcie_rx_bytes_per_s",
    "nvlink_tx_bytes_per_s",
    "nvlink_rx_bytes_per_s",
)
"""The ``Gpu`` fields GPM's profiling metrics fill, besides ``sm_activity_percent``: in the order of the JSON
document, and all added after recordings were first made."""


HealthState = Literal["ok", "warn", "critical"]
"""A GPU's health (``gputop.health``): ``warn`` asks for attention (a reset when convenient, an application's own
fault, pages or rows waiting for a reset), ``critical`` for the GPU to be drained and reset or serviced."""
HEALTH_OK: Final = "ok"
HEALTH_WARN: Final = "warn"
HEALTH_CRITICAL: Final = "critical"

ViolationPolicy = Literal["power", "thermal", "sync_boost", "board_limit", "low_utilization", "reliability"]
"""NVML's perf policies 0-5 (``nvmlDeviceGetViolationStatus``): what held the clocks below application clocks."""


@immutable
class XidCount:
    """How many times one Xid (an error the driver reported, NVIDIA's Xid catalogue) came from a GPU while gputop
    watched, and when the last one came (seconds since the epoch)."""

    xid: int
    count: int
    last_time: float


@immutable
class GpuHealth:
    """One GPU's health readings and the state judged from them (``gputop.health``). Counters the GPU or driver
    does not have are None with the reason in ``unavailable`` (remapped rows exist on Ampere and later data-centre
    GPUs, retired pages on GPUs that retire pages), never 0."""

    state: HealthState = HEALTH_OK
    causes: tuple[str, ...] = ()
    """Why the state is not ok, worst first, each a sentence naming what was seen and what to do."""
    xids: tuple[XidCount, ...] = ()
    """Xids seen since gputop started watching the GPU's events, in the order they first came."""
    remapped_rows_correctable: int | None = None
    remapped_rows_uncorrectable: int | None = None
    remapped_rows_pending: bool | None = None
    """A row remapping waits for the GPU's reset to take effect."""
    remapped_rows_failed: bool | None = None
    """A row could not be remapped: the GPU needs servicing."""
    retired_pages_single_bit: int | None = None
    retired_pages_double_bit: int | None = None
    retired_pages_pending: bool | None = None
    """A page waits for the driver's reload (or a reboot) to be retired."""
    pcie_replays: int | None = None
    """PCIe replays since the driver was loaded (``nvmlDeviceGetPcieReplayCounter``)."""
    pcie_replays_per_min: float | None = None
    """The replay counter's rate over the last interval."""
    violation_s: tuple[tuple[ViolationPolicy, float], ...] = ()
    """Seconds the clocks were held below application clocks, per perf policy, since the driver was loaded."""
    unavailable: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    @property
    def last_xid(self) -> XidCount | None:
        return max(self.xids, key=lambda x: x.last_time) if self.xids else None


@immutable
class Gpu:
    """One GPU at one moment.

    ``utilization_gpu_percent`` is NVML's ``utilization.gpu``: the share of the sample period in which any kernel
    ran, not how many SMs were busy. ``sm_activity_percent`` is the real SM activity from NVML GPM, where the GPU
    offers it (Hopper and newer); the fields after ``mig`` are GPM's other profiling metrics, read in the same
    request (DCGM's SM occupancy, tensor, DRAM, FP pipe, PCIe and NVLink metrics).
    """

    index: int
    uuid: str | None
    name: str | None
    state: GpuState = GPU_OK
    reason: str | None = None
    memory_total_bytes: int | None = None
    memory_used_bytes: int | None = None
    memory_free_bytes: int | None = None
    memory_reserved_bytes: int | None = None
    utilization_gpu_percent: float | None = None
    utilization_memory_percent: float | None = None
    sm_activity_percent: float | None = None
    temperature_c: float | None = None
    power_w: float | None = None
    power_limit_w: float | None = None
    fan_percent: float | None = None
    pstate: int | None = None
    clock_sm_mhz: int | None = None
    clock_mem_mhz: int | None = None
    clock_sm_max_mhz: int | None = None
    clock_mem_max_mhz: int | None = None
    pcie_rx_bytes_per_s: int | None = None
    pcie_tx_bytes_per_s: int | None = None
    throttle_reasons: tuple[ThrottleReason, ...] | None = None
    ecc_uncorrected_volatile: int | None = None
    ecc_enabled: bool | None = None
    pcie_link_gen: int | None = None
    pcie_link_width: int | None = None
    pcie_link_gen_max: int | None = None
    pcie_link_width_max: int | None = None
    unavailable: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    mig_mode: MigMode | None = None
    """``enabled`` when the GPU is partitioned into MIG instances; None (with a reason) where it has no MIG."""
    mig_pending_mode: MigMode | None = None
    """The MIG mode after the next GPU reset, when it differs from ``mig_mode`` a change is waiting."""
    mig: tuple[MigInstance, ...] = ()
    """Its MIG instances by slot; empty when MIG is off."""
    sm_occupancy_percent: float | None = None
    """GPM: resident warps against the SMs' theoretical maximum (DCGM's SM occupancy)."""
    tensor_activity_percent: float | None = None
    """GPM: the share of time the SMs ran any tensor-core instruction."""
    dram_bandwidth_percent: float | None = None
    """GPM: DRAM bandwidth used against its theoretical maximum."""
    fp64_activity_percent: float | None = None
    fp32_activity_percent: float | None = None
    fp16_activity_percent: float | None = None
    """GPM: the share of time the SMs ran non-tensor FP64, FP32, FP16 math."""
    gpm_pcie_tx_bytes_per_s: int | None = None
    gpm_pcie_rx_bytes_per_s: int | None = None
    """GPM: PCIe traffic from (TX) and to (RX) the GPU, averaged between two ticks."""
    nvlink_tx_bytes_per_s: int | None = None
    nvlink_rx_bytes_per_s: int | None = None
    """GPM: NVLink traffic over all links, written (TX) and read (RX)."""
    energy_j: float | None = None
    """NVML's total energy counter (``nvmlDeviceGetTotalEnergyConsumption``, Volta and newer): joules since the
    driver was loaded. A counter, not a reading: energy over an interval is the difference of two of them."""
    health: GpuHealth | None = None
    """Xid errors, remapped rows, retired pages, PCIe replays and time under each clock limit, with the state
    judged from them; None where the GPU could not be read, or in a recording made before gputop judged health."""
    pci_bus_id: str | None = None
    """Where the GPU sits on the PCI bus, as nvidia-smi, NVML's ``busId`` and dcgm-exporter's ``pci_bus_id`` label
    write it: ``00000000:07:00.0`` (domain, bus, device, function in upper-case hex). Fixed while the driver runs."""

    @property
    def memory_used_fraction(self) -> float | None:
        if not self.memory_total_bytes or self.memory_used_bytes is None:
            return None
        return self.memory_used_bytes / self.memory_total_bytes

    def memory_reason(self, full: bool = False) -> str:
        """Why ``memory_used_bytes`` is None; in ``full`` with what it means where that is known
        (``no permission: root only in MIG mode``)."""
        reason = self.unavailable.get("memory_used_bytes") or "no reason given"
        if full and reason == NO_PERMISSION and self.mig_mode == MIG_ENABLED:
            return f"{reason}: {MIG_MEMORY_ROOT_ONLY}"
        return reason

    def mig_instance(self, gpu_instance_id: int | None, compute_instance_id: int | None) -> MigInstance | None:
        """The instance with these ids, if the GPU has it."""
        for instance in self.mig:
            if instance.gpu_instance_id == gpu_instance_id and instance.compute_instance_id == compute_instance_id:
                return instance
        return None


ContainerRuntime = Literal["docker", "kubernetes", "podman", "lxc", "slurm", "container", "systemd", "cgroup"]
"""What a process's cgroup says it runs in. ``container`` is a container whose runtime the path does not name (an
id under ``/ecs/...``, say); ``systemd`` a service or scope of the host's systemd; ``cgroup`` any other cgroup of
its own, shown by its path."""
CONTAINER_RUNTIMES: tuple[ContainerRuntime, ...] = get_args(ContainerRuntime)
NOT_CONTAINED: tuple[ContainerRuntime, ...] = ("systemd", "cgroup")
"""Runtimes that are the host's own grouping rather than a container or a batch job."""
CGROUP_NAMESPACE = "cgroup namespace: the path is relative to the container"
"""The reason for no container where gputop runs in a cgroup namespace of its own and the process's cgroup is that
namespace's root: the process shares gputop's container, which the path cannot name."""
MALFORMED_CGROUP = "malformed /proc/PID/cgroup"
PCI_BUS_ID_FORM = r"[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.[0-7]"
"""A PCI bus id as NVML's ``busId`` (``NVML_DEVICE_PCI_BUS_ID_FMT``) writes it; anything else is no reading."""
CONTAINER_ID_CHARS = 64
"""The longest container id kept: the 64 hex digits Docker, containerd, CRI-O and Podman use."""
CONTAINER_NAME_CHARS = 256
"""The longest name (systemd unit, LXC container, Slurm job) and pod UID kept."""
CGROUP_PATH_CHARS = 1024
"""The longest cgroup path kept; a user may nest their own cgroups deeper, nothing real is that long."""


@immutable
class Container:
    """Where a process runs, from its ``/proc/PID/cgroup``: a container, a Kubernetes pod, a Slurm job, a systemd
    unit.

    ``id`` is the container's full id (64 hex digits for Docker, containerd, CRI-O, Podman), ``pod_uid`` the
    Kubernetes pod's UID, ``name`` the systemd unit, the LXC container or the Slurm job id, ``path`` the cgroup path
    they were read from. Each is None where the path does not say.
    """

    runtime: ContainerRuntime
    path: str
    id: str | None = None
    pod_uid: str | None = None
    name: str | None = None

    @property
    def short_id(self) -> str | None:
        """The first 12 digits of the id, as ``docker ps`` shows it."""
        return None if self.id is None else self.id[:12]

    @property
    def contained(self) -> bool:
        """Whether this is a container or a batch job, not just the host's own grouping."""
        return self.runtime not in NOT_CONTAINED

    @property
    def label(self) -> str:
        """A few words for a table cell or a metric label: ``docker a1b2c3d4e5f6``, ``k8s 7f3a9c/c0ffee12``,
        ``slurm job 123``, ``systemd sshd.service``."""
        if self.runtime == "kubernetes":
            pod = (self.pod_uid or "?")[:6]
            return f"k8s {pod}/{self.id[:8]}" if self.id else f"k8s pod {pod}"
        if self.runtime == "slurm":
            return f"slurm job {self.name}"
        if self.runtime in ("lxc", "systemd"):
            return f"{self.runtime} {self.name}"
        if self.runtime == "cgroup":
            return f"cgroup {self.path}"
        return f"{self.runtime} {self.short_id}"


POD_NAME_CHARS = 253
"""The longest pod name Kubernetes allows (a DNS subdomain, RFC 1123)."""
POD_LABEL_CHARS = 63
"""The longest namespace and container name Kubernetes allows (a DNS label, RFC 1123)."""
POD_LABEL_FORM = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
"""A namespace's or container's name, as Kubernetes checks it (a DNS label: ``IsDNS1123Label``)."""
POD_NAME_FORM = rf"{POD_LABEL_FORM}(?:\.{POD_LABEL_FORM})*"
"""A pod's name, as Kubernetes checks it (a DNS subdomain: ``IsDNS1123Subdomain``)."""
PodOrigin = Literal["apiserver", "logs"]
"""Where a pod's names were read: the API server's pod list for this node, or the kubelet's log directories
(``/var/log/pods``, ``/var/log/containers``)."""
POD_ORIGINS: tuple[PodOrigin, ...] = get_args(PodOrigin)
POD_ORIGIN_WORDS: dict[PodOrigin, str] = {"apiserver": "API server", "logs": "kubelet's log directories"}


@immutable
class Pod:
    """The Kubernetes pod, and the container in it, that a process runs in, by name: what the node's API server or
    kubelet says of the pod UID and container id the process's cgroup names (``Container.pod_uid``, ``id``).

    The names are chosen by whoever created the pod: they are held to Kubernetes' own rules (lowercase DNS labels
    and subdomains) where read, and name nothing more than that claim. ``container`` is None where the source
    does not say which of the pod's containers the process runs in.
    """

    namespace: str
    name: str
    container: str | None = None
    source: PodOrigin = "apiserver"

    @property
    def label(self) -> str:
        """``namespace/pod/container``, or ``namespace/pod`` where the container is not known."""
        return "/".join(part for part in (self.namespace, self.name, self.container) if part is not None)


SLURM_JOB_ID_CHARS = 32
"""The longest Slurm job id kept: a job id is a 32-bit number, an array task ``<job>_<task>``, a het job's
``<job>+<offset>``."""
SLURM_TEXT_CHARS = 256
"""The longest job name, user name, step name or state kept (Slurm itself allows job names of any length)."""
SLURM_MAX_GPUS = 1024
"""The most GPU indices kept for one job on one node: far more than any node has."""


@immutable
class SlurmJob:
    """The Slurm job a process runs in: ``id`` and ``step`` (``0``, ``batch``, ``extern``, ``interactive``) from its
    cgroup; the job's ``name``, ``user``, ``state`` and the node's GPU indices it holds (``gpus``, from the
    ``IDX`` of ``scontrol -d``'s ``GRES``) from Slurm, each None with its reason in ``unavailable`` where Slurm
    did not say (no ``scontrol`` here, the controller not answering, a job with no GPUs)."""

    id: str
    step: str | None = None
    name: str | None = None
    user: str | None = None
    state: str | None = None
    gpus: tuple[int, ...] | None = None
    unavailable: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    @property
    def label(self) -> str:
        """A few words for a table cell: ``slurm 123 train``, or ``slurm job 123`` while its name is not known."""
        return f"slurm {self.id} {self.name}" if self.name else f"slurm job {self.id}"


@immutable
class HostProcess:
    """A host process that gputop watches: a GPU process, one of its ancestors or descendants, or the focus.

    DataLoader workers are descendants of the training process named ``pt_data_worker``. A PID that this PID
    namespace cannot see, or that gputop may not read, has ``visible`` false or its values ``None``, each with its
    reason in ``unavailable``.
    """

    pid: int
    ppid: int | None = None
    visible: bool = True
    user: str | None = None
    name: str | None = None
    command: str | None = None
    cpu_percent: float | None = None
    rss_bytes: int | None = None
    start_time: float | None = None
    status: str | None = None
    num_threads: int | None = None
    unavailable: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    container: Container | None = None
    """The container, pod, Slurm job or systemd unit it runs in; None with no reason for a process in the root
    cgroup (or ``init.scope``), None with its reason in ``unavailable`` when the cgroup could not be read."""
    pod: Pod | None = None
    """The Kubernetes pod and container by name, for a process whose cgroup names a pod (``container.pod_uid``);
    None with its reason in ``unavailable`` (key ``pod``) where no source on the node told them, None with no
    reason for a process in no pod."""
    slurm: SlurmJob | None = None
    """The Slurm job it runs in (its cgroup names one): the job and step from the cgroup, the job's name, user and
    GPUs from ``scontrol``; None for a process in no Slurm job."""


@immutable
class GpuProcess:
    """A process that holds a context on one GPU: what NVML says of it there, and its host process.

    A process on two GPUs appears twice, once per GPU, as in nvidia-smi. ``unavailable`` holds the reasons for the
    GPU-side values; the host side's are in ``host.unavailable``. ``host`` is the same ``HostProcess`` as in the
    snapshot's ``host_processes``, where its parents, children and threads are too; it is ``None`` only in NVML's
    own reading, before the sampler joins the host side.
    """

    pid: int
    gpu_index: int
    kind: ProcessKind
    gpu_memory_bytes: int | None = None
    sm_percent: float | None = None
    memory_bandwidth_percent: float | None = None
    host: HostProcess | None = None
    unavailable: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    mig_index: int | None = None
    """The slot of the MIG instance it runs on (``MigInstance.index``); None off MIG."""
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
    """NVML's ids of its MIG instance, from the process list; None off MIG."""

    @property
    def visible(self) -> bool:
        """Whether this PID namespace sees the process (NVML reports host PIDs); true while the host side is not
        known."""
        return self.host is None or self.host.visible


@immutable
class Snapshot:
    """Everything gputop knows at one tick. Immutable: consumers share it freely across threads."""

    time: float
    host: HostInfo
    driver: DriverInfo
    gpus: tuple[Gpu, ...] = ()
    processes: tuple[GpuProcess, ...] = ()
    host_processes: tuple[HostProcess, ...] = ()
    focus_pid: int | None = None
    notices: tuple[str, ...] = ()
    training: tuple[TrainingView, ...] = ()

    def host_process(self, pid: int) -> HostProcess | None:
        """The host side of a watched PID, if the snapshot has it."""
        for proc in self.host_processes:
            if proc.pid == pid:
                return proc
        return None

    def training_view(self, pid: int) -> TrainingView | None:
        """The training view of a PID, if the snapshot has one."""
        for view in self.training:
            if view.pid == pid:
                return view
        return None


# -- the training view ------------------------------------------------------------------------------------------

Role = Literal["training", "torchrun agent"]
ROLE_TRAINING: Final = "training"
ROLE_TORCHRUN_AGENT: Final = "torchrun agent"

PinState = Literal["on", "off", "unknown"]
PIN_ON: Final = "on"
PIN_OFF: Final = "off"
PIN_UNKNOWN: Final = "unknown"

PinSource = Literal["threads", "probe"]
PIN_FROM_THREADS: Final = "threads"
PIN_FROM_PROBE: Final = "probe"

MainActivity = Literal["waiting", "running", "mixed"]
MAIN_WAITING: Final = "waiting"
MAIN_RUNNING: Final = "running"
MAIN_MIXED: Final = "mixed"

ProbeStatus = Literal["ok", "none", "stale", "malformed", "foreign owner"]
PROBE_OK: Final = "ok"
PROBE_NONE: Final = "none"
PROBE_STALE: Final = "stale"
PROBE_MALFORMED: Final = "malformed"
PROBE_FOREIGN: Final = "foreign owner"
PROBE_AWAITED: Final = (
    "awaiting the probe's first report (gputop run started this process; the probe writes once a DataLoader "
    "runs or an optimizer steps)"
)
"""Why a process that ``gputop run`` started, with the probe on, has no report yet: the probe writes its first
once the job makes its first DataLoader iterator or steps an optimizer, seconds after the start (imports, the
dataset, the model)."""
PROBE_LAUNCHER: Final = "torchrun's agent: it starts the ranks and trains nothing; each rank reports"
"""Why torchrun's agent, which ``gputop run`` started with the probe on, has no report and will not have one."""


@immutable
class Worker:
    """A DataLoader worker: a process named ``pt_data_worker`` below a training process.

    ``host`` is the worker's own process: its parent (the training process, or the fork server with the
    forkserver start method), status, CPU and RSS, with their reasons in ``host.unavailable``. It is the same
    ``HostProcess`` as in the snapshot's ``host_processes``. ``worker_id`` is its index in the DataLoader, known
    only from the probe. ``uss_bytes`` is the memory only this worker holds (its RSS counts pages it shares with
    the training process after a fork). ``unavailable`` holds the reasons for these worker values.
    """

    host: HostProcess
    worker_id: int | None = None
    uss_bytes: int | None = None
    age_s: float | None = None
    unavailable: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    @property
    def pid(self) -> int:
        return self.host.pid


@immutable
class PinMemoryStatus:
    """Whether the job pins batches in page-locked memory: ``on``, ``off`` or ``unknown``, and why gputop thinks so.

    From outside, pinning shows as a thread named ``pt_data_pin`` in the training process, which exists only
    while a DataLoader with workers pins; ``source`` is ``threads`` for that, ``probe`` for the probe's report.
    """

    state: PinState = PIN_UNKNOWN
    evidence: str = ""
    source: PinSource | None = None
    thread_ids: tuple[int, ...] = ()


@immutable
class MainThread:
    """What the training process's main thread is doing.

    ``cpu_percent`` covers the last tick, ``busy_share`` (0-1) the last few ticks; ``activity`` reads them as
    ``waiting`` (mostly asleep, e.g. in poll or a futex on the DataLoader's queue), ``running`` or ``mixed``.
    ``wait_channel`` is the kernel function it sleeps in at this tick (``/proc/PID/wchan``).
    """

    status: str | None = None
    wait_channel: str | None = None
    cpu_percent: float | None = None
    busy_share: float | None = None
    activity: MainActivity | None = None
    unavailable: Mapping[str, str] = field(default_factory=lambda: _EMPTY)


@immutable
class LoaderConfig:
    """A DataLoader's settings, either as the job asked for them or as the iterator really runs them."""

    batch_size: int | None = None
    num_workers: int | None = None
    pin_memory: bool | None = None
    pin_memory_device: str | None = None
    prefetch_factor: int | None = None
    persistent_workers: bool | None = None
    start_method: str | None = None
    drop_last: bool | None = None
    timeout_s: float | None = None


LOADER_CONFIG_FIELDS = (
    "batch_size",
    "num_workers",
    "pin_memory",
    "pin_memory_device",
    "prefetch_factor",
    "persistent_workers",
    "start_method",
    "drop_last",
    "timeout_s",
)


@immutable
class LoaderView:
    """One DataLoader of the job, as the probe reports it.

    Timing covers the last ``window_s`` seconds: ``data_wait_share`` is the share of that time the training loop
    spent blocked on ``next(iterator)``; ``samples_per_s`` is ``steps_per_s`` times the batch size.
    ``waiting_now_s`` is how long the loop has been blocked on the current batch, ``None`` when it is not.
    ``pass_start_s`` is how long the latest pass (epoch) took from the start of its iterator to its first batch:
    with ``persistent_workers=False`` that includes starting every worker. ``pass_start_wait_share`` is the part
    of ``data_wait_share`` the loop spent waiting for the first batch of a pass.
    """

    loader_id: int
    requested: LoaderConfig = field(default_factory=LoaderConfig)
    effective: LoaderConfig = field(default_factory=LoaderConfig)
    worker_pids: tuple[int, ...] = ()
    passes: int = 0
    batches: int = 0
    window_s: float | None = None
    window_batches: int = 0
    data_wait_share: float | None = None
    steps_per_s: float | None = None
    samples_per_s: float | None = None
    waiting_now_s: float | None = None
    last_batch_age_s: float | None = None
    pass_start_s: float | None = None
    pass_start_wait_share: float | None = None
    unavailable: Mapping[str, str] = field(default_factory=lambda: _EMPTY)
    created_at: str | None = None
    """Where the job's code built this DataLoader: ``train.py:41`` (the file as the job names it, its line), so
    that advice can name the line to change."""
    worker_batch_s: float | None = None
    """Seconds one worker spends on one batch over the window (from when it has the batch's indices and is free, to
    the batch back in the loop's process): what each worker delivers, whatever the loop waits. None without
    workers, before a batch was timed, or from a probe that does not time them."""
    worker_batch_p95_s: float | None = None
    """The time under which 95 % of the window's batches were made by a worker (to a quarter-octave): the slow
    batches a deeper queue (``prefetch_factor``) must cover. None under 20 batches timed in the window."""

    @property
    def overridden(self) -> tuple[str, ...]:
        """Settings that are not in effect as requested (``pin_memory`` on a machine without an accelerator)."""
        return tuple(
            name
            for name in LOADER_CONFIG_FIELDS
            if getattr(self.requested, name) is not None
            and getattr(self.effective, name) is not None
            and getattr(self.requested, name) != getattr(self.effective, name)
        )


@immutable
class CudaMemory:
    """One CUDA device as PyTorch's caching allocator sees it (``torch.cuda.memory_stats``).

    ``device`` is the job's CUDA ordinal (after ``CUDA_VISIBLE_DEVICES``); ``gpu_index`` the NVML index it maps
    to by UUID, and ``nvml_process_bytes`` what NVML reports this process holds there (reserved plus the CUDA
    context and libraries).
    """

    device: int
    uuid: str | None = None
    gpu_index: int | None = None
    allocated_bytes: int | None = None
    reserved_bytes: int | None = None
    active_bytes: int | None = None
    inactive_split_bytes: int | None = None
    allocated_peak_bytes: int | None = None
    reserved_peak_bytes: int | None = None
    num_alloc_retries: int | None = None
    num_ooms: int | None = None
    num_device_alloc: int | None = None
    num_device_free: int | None = None
    nvml_process_bytes: int | None = None


@immutable
class PinnedHostMemory:
    """Page-locked host memory held by PyTorch's pinned allocator (``torch.cuda.host_memory_stats``)."""

    allocated_bytes: int | None = None
    allocated_peak_bytes: int | None = None
    active_bytes: int | None = None
    num_host_alloc: int | None = None
    num_host_free: int | None = None


@immutable
class Launch:
    """How a launcher started a process, from its environment (``/proc/PID/environ``, readable for one's own
    processes) or its probe's report: torchrun's and ``torch.distributed``'s variables, each None where unset.

    ``run_id`` is ``TORCHELASTIC_RUN_ID``; with ``master_addr`` and ``master_port`` it names the job on every host
    it runs on. ``group_rank`` is the node's rank among the job's nodes."""

    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    local_world_size: int | None = None
    group_rank: int | None = None
    run_id: str | None = None
    master_addr: str | None = None
    master_port: int | None = None

    @property
    def distributed(self) -> bool:
        """Whether the process is one rank of several."""
        return self.rank is not None and (self.world_size or 0) > 1


TENSOR_DEVICE = r"cpu|cuda:[0-9]{1,2}"
"""What ``TensorMemory.device`` may be: ``cpu``, or ``cuda:`` and the job's CUDA ordinal in one or two ASCII digits
(the probe counts at most 64 devices). ``str.isdigit`` and a bare ``\\d`` also take ``²`` and other scripts' digits,
which ``int`` then refuses: the probe reader and the snapshot decoder both hold a device to this pattern."""


@immutable
class TensorMemory:
    """Where one device's tensors hold memory, as the probe found them through the optimizers the job steps: the
    parameters (weights) and their gradients, right after a step, and the optimizers' state.

    ``device`` is ``cpu`` or ``cuda:N`` (the job's CUDA ordinal). ``allocated_after_step_bytes`` is what the CUDA
    caching allocator had allocated at that moment (None on the CPU): what persists from one step to the next.
    """

    device: str
    parameters: int | None = None
    weights_bytes: int | None = None
    gradients_bytes: int | None = None
    optimizer_bytes: int | None = None
    weight_dtypes: tuple[tuple[str, int], ...] = ()
    """``(dtype, bytes)`` of the weights, largest first: fp32 master weights beside bf16 copies show here."""
    allocated_after_step_bytes: int | None = None

    @property
    def cuda_index(self) -> int | None:
        """The CUDA ordinal of a ``cuda:N`` device, None for the CPU."""
        kind, _, index = self.device.partition(":")
        return int(index) if kind == "cuda" and index.isascii() and index.isdigit() and len(index) <= 2 else None


Phase = Literal["data", "h2d", "forward", "backward", "optimizer", "collective", "other"]
"""The parts of a training step the probe times: waiting for the next batch (``data``), host-to-device copies
(``h2d``), the forward and backward passes, the optimizer step, waits in ``torch.distributed`` collectives
(``collective``), and the rest (``other``: the job's own code between them)."""
PHASES: tuple[Phase, ...] = get_args(Phase)
StepBoundary = Literal["DataLoader", "optimizer step"]
"""How the probe finds a step: the request for the next DataLoader batch, or (a loop without a DataLoader) the end
of an optimizer step."""
StepClock = Literal["host", "cuda"]
"""Which clock timed the phases: the host's, or the GPU's through CUDA events."""
FlopsSource = Literal["counted", "estimate"]
"""Where ``flops_per_step`` comes from: torch's FLOP counter over one live step, or ``gputop estimate``."""


CODE_SITE = r"[^\s:][^:]{0,254}:[1-9][0-9]{0,6}"
"""What a place in the job's code (``SyncSite.site``, ``LoaderView.created_at``) may be: a file as the job names it
(no colon in it, at most 255 characters) and a line number, ``train.py:57``. The probe reader and the snapshot
decoder both hold a site to this pattern, so that advice can quote it whole."""
SYNC_CALL = r"[A-Za-z_][A-Za-z0-9_.]{0,39}"
"""What ``SyncSite.call`` may be: the name of what waited (``item``, ``cpu``, ``Tensor.nonzero``)."""


@immutable
class SyncSite:
    """One place in the job's code where the host waited for the GPU: ``site`` is ``train.py:57``, ``call`` what
    waited (``item``, ``cpu``, ``nonzero``, ``synchronize``, ...), ``per_step`` how often a step, on average."""

    site: str
    call: str
    per_step: float


@immutable
class StepAnatomy:
    """Where a training step's time goes, measured by the probe inside the job over its last ``window_s``.

    ``phases_s`` holds the mean seconds a step spends in each phase, in ``PHASES`` order (phases never seen are
    left out); they add up to the mean step. ``step_s`` and ``step_p95_s`` are the median and 95th percentile of
    the window's steps; ``warmup_step_s`` the median of the job's first steps, which the window leaves out;
    ``drift`` the window's median over the first steady window's (1.0: no change). Syncs are counted on
    ``sync_sampled_steps`` sampled steps. ``unavailable`` names why a None field is None (``syncs``: no CUDA).
    """

    boundary: StepBoundary
    clock: StepClock
    steps: int = 0
    window_s: float | None = None
    window_steps: int = 0
    step_s: float | None = None
    step_p95_s: float | None = None
    warmup_step_s: float | None = None
    drift: float | None = None
    steps_per_s: float | None = None
    samples_per_s: float | None = None
    phases_s: tuple[tuple[Phase, float], ...] = ()
    h2d_bytes_per_step: int | None = None
    h2d_pageable_share: float | None = None
    """The share of the bytes copied to the GPU whose source was pageable (not pinned) memory."""
    h2d_blocking_share: float | None = None
    """The share of those copies made without ``non_blocking=True``."""
    syncs_per_step: float | None = None
    sync_sites: tuple[SyncSite, ...] = ()
    sync_sampled_steps: int = 0
    flops_per_step: float | None = None
    flops_source: FlopsSource | None = None
    unavailable: Mapping[str, str] = field(default_factory=lambda: _EMPTY)

    def phase_s(self, phase: Phase) -> float | None:
        """The mean seconds a step spends in ``phase``; None when the probe did not see it."""
        for name, seconds in self.phases_s:
            if name == phase:
                return seconds
        return None

    @property
    def phase_total_s(self) -> float:
        return sum(seconds for _, seconds in self.phases_s)


@immutable
class StepCost:
    """What the monitor adds to a job's step anatomy from outside it: energy from NVML's energy counter over the
    GPUs the process uses, and achieved FLOP/s and MFU against the GPU model's peak for the precision in use.

    ``peak_source`` names the datasheet the peak comes from. ``unavailable`` names why a None field is None (an
    unknown GPU model, no energy counter, a GPU shared with another job)."""

    energy_per_step_j: float | None = None
    energy_per_sample_j: float | None = None
    power_w: float | None = None
    achieved_tflops: float | None = None
    peak_tflops: float | None = None
    peak_source: str | None = None
    precision: str | None = None
    mfu: float | None = None
    unavailable: Mapping[str, str] = field(default_factory=lambda: _EMPTY)


@immutable
class ProbeReport:
    """What the in-process probe last reported, or why there is nothing to trust.

    ``status`` is ``ok``, ``none`` (no report for this process), ``stale`` (not rewritten lately: the process may
    be frozen), ``malformed`` or ``foreign owner``; only an ``ok`` report carries data. ``failures`` counts the
    probe's own errors, which it swallows rather than raise into the training loop.
    """

    status: ProbeStatus = PROBE_NONE
    reason: str | None = None
    age_s: float | None = None
    rank: int | None = None
    local_rank: int | None = None
    world_size: int | None = None
    torch_version: str | None = None
    loaders: tuple[LoaderView, ...] = ()
    cuda: tuple[CudaMemory, ...] = ()
    pinned_host: PinnedHostMemory | None = None
    cuda_reason: str | None = None
    failures: int = 0
    last_failure: str | None = None
    autocast: bool | None = None
    """Whether the training thread runs under CUDA autocast: seen at its last DataLoader batch boundary or inside
    the outermost module call of a timed forward (a loop that enters autocast only around its forward shows
    there)."""
    float32_matmul_precision: str | None = None
    """``torch.get_float32_matmul_precision()``: ``highest`` keeps float32 matmuls off the tensor cores (no TF32)."""
    parameter_dtypes: tuple[str, ...] | None = None
    """The dtypes of the parameters of the optimizers stepped (``float32``, ``bfloat16``); None before a step."""
    tensors: tuple[TensorMemory, ...] = ()
    """Weights, gradients and optimizer state per device; empty before the first optimizer step."""
    optimizers: tuple[str, ...] = ()
    """The class names of the optimizers the job steps (``AdamW``)."""
    tensors_age_s: float | None = None
    """How long ago the probe last counted ``tensors`` (at most every few seconds, right after a step)."""
    launch: Launch | None = None
    """The launcher's variables as the process itself sees them."""
    step: StepAnatomy | None = None
    """Where the job's steps spend their time; None before the probe has timed a step."""
    step_reason: str | None = None
    """Why ``step`` is None in a report that is otherwise good: its step part was malformed (the rest of the report
    is still used). None where the probe has not timed a step yet."""

    @property
    def ok(self) -> bool:
        return self.status == PROBE_OK

    @property
    def active_loader(self) -> LoaderView | None:
        """The DataLoader the job iterates now: the one whose last batch is the most recent."""
        if not self.loaders:
            return None
        return min(self.loaders, key=lambda v: float("inf") if v.last_batch_age_s is None else v.last_batch_age_s)


Evidence = Literal["probe report", "DataLoader workers", "launcher rank", "torch threads"]
"""Why gputop takes a process for a training process: a report of its probe, DataLoader workers of its own, a
rank given by a launcher (torchrun's ``RANK``, a ``pt_elastic`` parent), or threads torch named (``pt_main_thread``,
``pt_autograd_N``: a backward pass has run on a GPU). A GPU process with none of them is only a holder of GPU
memory to the advisor: it gets the GPU's findings, not a training job's."""
EVIDENCE_PROBE: Final = "probe report"
EVIDENCE_WORKERS: Final = "DataLoader workers"
EVIDENCE_RANK: Final = "launcher rank"
EVIDENCE_TORCH_THREADS: Final = "torch threads"
TORCH_MAIN_THREAD: Final = "pt_main_thread"
"""The name torch gives the main thread of a process that starts DataLoader workers (and so the process's name)."""


def evidence_of(probe_status: str | None, workers: bool, rank: bool, torch_threads: bool) -> tuple[Evidence, ...]:
    """The training evidence these facts show, in their one order: a probe report (fresh or stale), DataLoader
    workers, a launcher rank, threads torch named."""
    found: list[Evidence] = []
    if probe_status in ("ok", "stale"):
        found.append(EVIDENCE_PROBE)
    if workers:
        found.append(EVIDENCE_WORKERS)
    if rank:
        found.append(EVIDENCE_RANK)
    if torch_threads:
        found.append(EVIDENCE_TORCH_THREADS)
    return tuple(found)


@immutable
class TrainingView:
    """A training process and its input pipeline: what /proc shows from outside, plus the probe's report.

    ``ranks`` are training processes started below this one (the ranks under a torchrun agent).
    ``workers_cpu_percent`` is the workers' summed CPU % (100 = one core) against ``usable_cpu_count``, the
    training process's affinity mask. ``workers_replaced`` counts the times its whole worker set was replaced
    by new processes, which happens every epoch with ``persistent_workers=False``.
    """

    pid: int
    role: Role = ROLE_TRAINING
    name: str | None = None
    ranks: tuple[int, ...] = ()
    workers: tuple[Worker, ...] = ()
    worker_start_method: str | None = None
    workers_cpu_percent: float | None = None
    usable_cpu_count: int | None = None
    workers_replaced: int = 0
    pin_memory: PinMemoryStatus = field(default_factory=PinMemoryStatus)
    main_thread: MainThread = field(default_factory=MainThread)
    probe: ProbeReport = field(default_factory=ProbeReport)
    launch: Launch | None = None
    """The launcher's rank, world size and job identity; None for a process started without one."""
    evidence: tuple[Evidence, ...] = ()
    """Why this is a training process; empty for a GPU process that shows none (the advisor then gives it only
    GPU-level findings)."""
    cost: StepCost | None = None
    """Energy per step and MFU, where the probe reports step times."""

    @property
    def trains(self) -> bool:
        """Whether the process shows any training evidence."""
        return bool(self.evidence)

    @property
    def loader(self) -> LoaderView | None:
        """The DataLoader the job iterates now, from the probe."""
        return self.probe.active_loader


def job_views(views: Sequence[TrainingView], pid: int) -> tuple[TrainingView, ...]:
    """The view of ``pid`` and those of the training processes below it (its ranks), leaving other jobs out."""
    by_pid = {v.pid: v for v in views}
    if pid not in by_pid:
        return ()
    found, todo = [], [pid]
    while todo:
        view = by_pid.get(todo.pop(0))
        if view is not None and view not in found:
            found.append(view)
            todo.extend(view.ranks)
    return tuple(found)


# -- the advisor's findings -------------------------------------------------------------------------------------

Severity = Literal["info", "warning", "critical"]
INFO: Final = "info"
WARNING: Final = "warning"
CRITICAL: Final = "critical"
SEVERITIES: tuple[Severity, ...] = get_args(Severity)
"""From the least to the most urgent."""

AdviceSource = Literal["probe", "external", "both"]
SOURCE_PROBE: Final = "probe"
SOURCE_EXTERNAL: Final = "external"
SOURCE_BOTH: Final = "both"


NO_PROCESS: Final = 0
"""``Advice.pid`` of a finding about a GPU that no process is on (no process has PID 0)."""


@immutable
class Advice:
    """One finding of the advisor about a training process (or a job, or a GPU): what is wrong, the numbers behind
    it, the change.

    ``id`` names the rule (``data-starved``, ...: docs/advisor.md). ``title`` is one short line; ``detail`` gives
    the measurements in words; ``action`` says what to change and why. ``evidence`` holds the same measurements as
    values, with units in their names; ``suggest`` the settings to change and their computed values
    (``{"num_workers": 8}``), empty when the rule can only name a direction. Evidence values are plain JSON
    values (numbers, strings, booleans, None, tuples of them). ``source`` says what the finding
    rests on: ``probe`` (the job's own report), ``external`` (NVML and /proc) or ``both``. ``since`` is the time
    of the snapshot in which it fired.
    """

    id: str
    severity: Severity
    title: str
    detail: str
    action: str
    pid: int
    since: float
    source: AdviceSource = SOURCE_EXTERNAL
    evidence: Mapping[str, object] = field(default_factory=lambda: _EMPTY)
    suggest: Mapping[str, float | int | str | bool] = field(default_factory=lambda: _EMPTY)
    job: str | None = None
    """The job (``gputop.jobs``) a finding about a job, or merged over its ranks, belongs to."""
    pids: tuple[int, ...] = ()
    """Every process the finding holds for, ``pid`` first, when there are several: the ranks of a job for a
    finding that holds on each, the processes on one GPU for a GPU's finding. Empty: ``pid`` alone."""

    @property
    def subject(self) -> str:
        """Whom the finding is about: ``PID 4242``, ``PIDs 4242, 4243``, or ``GPU 3`` for a GPU's finding with no
        process on the GPU."""
        if self.pid == NO_PROCESS:
            return f"GPU {self.evidence.get('gpu_index', '?')}"
        return f"PID {self.pid}" if not self.pids else "PIDs " + ", ".join(map(str, self.pids))

    @property
    def concerns(self) -> tuple[int, ...]:
        """The processes the finding is about: ``pids``, or ``pid`` alone."""
        return self.pids or (self.pid,)

    @property
    def severity_rank(self) -> int:
        """0 for ``info`` up to 2 for ``critical``: sort by it, most urgent first, with ``-advice.severity_rank``."""
        return SEVERITIES.index(self.severity)

    @property
    def suggest_text(self) -> str:
        """The suggested settings as a user writes them: ``num_workers=8, pin_memory=True``."""
        return ", ".join(f"{name}={value}" for name, value in self.suggest.items())
