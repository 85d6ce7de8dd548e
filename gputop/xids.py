"""NVIDIA's Xid catalogue, for the Xids a training node meets: what each means and what to do, and how bad it is.

Source: NVIDIA, "Analyzing Xid Errors with the Xid Catalog" for Ampere and newer GPUs
(https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html: each Xid's mnemonic, description and
"Resolution Bucket (Immediate Action)": RESTART_APP, RESET_GPU, RESTART_BM, IGNORE, CONTACT_SUPPORT, XID_154 and
workflows), checked row by row against it (tests/unit/test_xids.py holds each row's bucket), with NVIDIA's dynamic
page retirement guide for 48, 63 and 64 (https://docs.nvidia.com/deploy/dynamic-page-retirement/visibility.html).
61 is unused on Ampere and newer; it is kept with the meaning the catalogue for older GPUs gives it
(https://docs.nvidia.com/deploy/xid-errors/archive/index.html). The severity follows the bucket: an Xid whose
immediate action is to restart the application, none (IGNORE) or the one another Xid asks (XID_154) is ``warn``,
held a while after it was seen; one that asks for a GPU reset or a node reboot, or the workflows of 48 (a
double-bit error, cleared by a reset) and 74 (NVLink, cleared by a reset), is ``critical``.
"""

from __future__ import annotations

from gputop.frozen import immutable
from gputop.model import HEALTH_CRITICAL, HEALTH_WARN, HealthState


@immutable
class Xid:
    meaning: str
    action: str
    severity: HealthState


RESTART_APP = "restart the application; if it recurs on this GPU only, drain the GPU and run dcgmi diag"
RESET_GPU = "drain the GPU and reset it (nvidia-smi -r) before it runs work again"
REBOOT = "drain the node and reboot it; if it recurs, have the GPU serviced"

CATALOGUE: dict[int, Xid] = {
    8: Xid("GPU stopped processing (a channel timed out)", RESTART_APP, HEALTH_WARN),
    13: Xid("graphics engine exception: usually the application's own illegal access", RESTART_APP, HEALTH_WARN),
    31: Xid("GPU memory page fault: usually the application's own illegal address", RESTART_APP, HEALTH_WARN),
    43: Xid(
        "GPU stopped processing: the application hit a software fault and was stopped; the GPU stays healthy",
        "nothing to do on the GPU: the application's own error says what went wrong",
        HEALTH_WARN,
    ),
    45: Xid(
        "preemptive cleanup: an application was stopped (Ctrl-C, a kill, a reset, or an earlier error)",
        "act on the Xid it came with, if any; alone it needs nothing",
        HEALTH_WARN,
    ),
    48: Xid("double-bit (uncorrectable) ECC error", RESET_GPU, HEALTH_CRITICAL),
    61: Xid("internal micro-controller breakpoint or warning", RESET_GPU, HEALTH_CRITICAL),
    62: Xid("internal micro-controller halt", RESET_GPU, HEALTH_CRITICAL),
    63: Xid(
        "GPU memory remapping event: a row remapping or page retirement was recorded",
        "nothing to do now: a pending remapping takes effect at the GPU's next reset",
        HEALTH_WARN,
    ),
    64: Xid("GPU memory remapping failure: a row remapping or page retirement failed", RESET_GPU, HEALTH_CRITICAL),
    68: Xid("video decoder (NVDEC0) exception", RESTART_APP, HEALTH_WARN),
    69: Xid("graphics engine class error", RESTART_APP, HEALTH_WARN),
    74: Xid("NVLink error", RESET_GPU, HEALTH_CRITICAL),
    79: Xid("GPU has fallen off the bus", REBOOT, HEALTH_CRITICAL),
    92: Xid("high single-bit ECC error rate", "watch it; have the GPU serviced if it keeps rising", HEALTH_WARN),
    94: Xid("contained ECC error: only the application that touched the memory was stopped", RESTART_APP, HEALTH_WARN),
    95: Xid("uncontained ECC error: every application on the GPU is affected", RESET_GPU, HEALTH_CRITICAL),
    109: Xid("context switch timeout", RESET_GPU, HEALTH_CRITICAL),
    119: Xid("GSP RPC timeout: the GPU's system processor stopped answering", RESET_GPU, HEALTH_CRITICAL),
    120: Xid("GSP error", RESET_GPU, HEALTH_CRITICAL),
    140: Xid("unrecovered ECC error", RESET_GPU, HEALTH_CRITICAL),
    154: Xid(
        "GPU recovery action changed: it sums up what another Xid needs",
        "the kernel log's Xid 154 line names the recovery (none, drain, GPU reset or node reboot): do that",
        HEALTH_WARN,
    ),
}

UNKNOWN_XID = 999
"""What NVML's event gives as the Xid when the driver cannot tell which (nvml.h, ``nvmlEventData_t``)."""


def describe(xid: int) -> Xid:
    """What an Xid means: from the catalogue, else a pointer to it (``warn``: one gputop cannot judge)."""
    known = CATALOGUE.get(xid)
    if known is not None:
        return known
    return Xid(
        "an Xid gputop does not know" if xid != UNKNOWN_XID else "an error the driver could not identify",
        "look it up in NVIDIA's Xid catalogue (docs.nvidia.com/deploy/xid-errors) and the kernel log (dmesg)",
        HEALTH_WARN,
    )
