"""The advisor's thresholds, each with where it comes from.

"issue 5" marks the defaults the advisor was specified with; the documents named beside a number describe the
mechanism it measures. docs/advisor.md explains each rule with these numbers.
"""

from __future__ import annotations

from gputop.model import Severity, ThrottleReason

GIB = 1024**3
MIB = 1024**2

# -- hysteresis ---------------------------------------------------------------------------------------------------

FIRE_SHARE = 0.8
"""A condition that held for 80 % of a window is raised: one odd tick cannot hold it off (gputop)."""
CLEAR_SHARE = 0.2
"""A raised finding clears once its condition held for 20 % of a window or less; between the two shares nothing
changes, which is what keeps a finding from flickering (gputop)."""

# -- the input pipeline -------------------------------------------------------------------------------------------

DATA_WAIT_INFO = 0.10
"""Share of step time spent waiting for the next batch from which the input pipeline is worth a note (issue 5)."""
DATA_WAIT_WARNING = 0.30
"""... and from which it is the bottleneck (issue 5)."""
DATA_WAIT_CRITICAL = 0.70
"""The loop waits more than twice as long as it computes (gputop)."""
DATA_WAIT_NONE = 0.02
"""Below this the loop does not wait for data in any way that matters (gputop)."""
GPU_FED_FROM_PERCENT = 80.0
"""A GPU busy this share of the time is fed well enough, whatever the loop waits (issue 5)."""
WORKER_MARGIN = 1.25
"""Headroom on a computed worker count: batches vary in cost, and a spare worker costs only memory (gputop;
the DataLoader documentation leaves the number to experiment)."""
WORKER_BUSY_SHARE = 0.5
"""Workers on a CPU, or runnable, in half their readings are CPU-bound; fewer are waiting on I/O (gputop)."""
WORKER_DISK_SHARE = 0.5
"""Workers in disk sleep half the time are waiting on the storage itself, which more workers cannot speed up."""
LOAD_CPU_SHARE = 0.5
"""With ``num_workers=0``: loading that keeps the main thread on the CPU half the time or more is CPU-bound."""
JOB_CPU_SPENT = 0.9
"""A job whose own processes (the training process and its workers) use this share of its usable cores gets no
more workers suggested, even workers that wait on I/O: each batch also costs the CPU (the worker's collation and
pickling, the main process's unpickling), and more workers only take turns on the same cores. The last of the
wait is then the CPU's, and counting it again raised the count at every run (6 → 9 → 14 workers on 2 cores, the
sweep flat from 8 on) (gputop)."""
WORKERS_NOISE = 0.25
"""A worker count computed anew that is within this share (or one worker) of the one already suggested to the same
process replaces it not: the count moves with the window's median wait share, n / (1 − w), and a wait that
wanders by ±3 points around 86 % moves it by ±20 % (9, 10 or 11 workers from one tick to the next). A user is told
one value, and a new one only when the evidence moved beyond that (gputop)."""
PREFETCH_DEFAULT = 2
"""torch's ``prefetch_factor`` where a DataLoader with workers does not set one (torch.utils.data.DataLoader)."""
IO_WORKERS_PER_CORE = 8
"""Sleeping workers may outnumber the cores, but each still costs the main process a queue and a batch to
unpickle: at most this many per usable core (gputop; benchmarks/advice_quality.py)."""
WORKER_MEMORY_SHARE = 0.5
"""New workers may take at most half the host memory that is still available (gputop)."""
HOST_CPU_SATURATED_PERCENT = 90.0
"""The host's CPUs are this busy: workers beyond the cores only take turns (gputop)."""
OTHERS_CPU_CORES = 0.5
"""Other processes holding half a core or more of a saturated host are worth naming beside a job's CPU-bound
workers: less is the noise of daemons and of gputop itself (gputop)."""
CPU_HOLDER_CORES = 0.1
"""A process or user named as holding cores holds a tenth of one at least (gputop)."""
WORKER_IDLE_SHARE = 0.10
"""Workers runnable in fewer than 10 % of their readings are mostly idle (gputop)."""
WORKER_MEMORY_LARGE_BYTES = 1 * GIB
"""Idle workers holding this much memory of their own (USS) between them are worth cutting (gputop)."""
PCIE_RX_SIGNIFICANT_BYTES_PER_S = 1 * GIB
"""Host-to-device traffic from which pageable copies cost real time: they are staged through a pinned buffer by
the driver, at about half the pinned bandwidth ("How to Optimize Data Transfers in CUDA C/C++", NVIDIA)."""
STARTUP_SHARE_INFO = 0.05
"""Share of the time lost to starting workers at each epoch from which ``persistent_workers`` is worth it."""
STARTUP_SHARE_WARNING = 0.15

# -- GPU memory and use -------------------------------------------------------------------------------------------

BATCH_MEMORY_BELOW = 0.5
"""GPU memory used below which a larger batch fits (issue 5)."""
BATCH_GPU_BUSY_BELOW = 70.0
"""GPU busy below which the GPU has room for more work per step (issue 5)."""
BATCH_SM_ACTIVITY_BELOW = 50.0
"""The same, from SM activity where the GPU reports it (issue 5)."""
BATCH_GPU_BUSY_WARNING = 40.0
BATCH_MEMORY_MARGIN = 0.10
"""A suggested batch fits with 10 % of the GPU's memory to spare (issue 5), below the share from which the GPU counts
as nearly full (``MEMORY_FULL``): its peak aims at ``MEMORY_TARGET``. Spared below 100 %, the batch suggested peaked
at 89.8 % of the GPU, where a few hundred MiB more (the allocator's cache, another process) made memory-near-full
ask for a smaller batch at the very value batch-too-small had given (gputop)."""
BATCH_MULTIPLE = 8
"""Suggested batches are multiples of 8, the shapes tensor cores run best (NVIDIA Deep Learning Performance
Guide, "Tensor Core Requirements")."""
BATCH_NOISE = 0.25
"""A batch computed anew that is less than a quarter larger than the one running, or than the one already suggested
to the same process, is not suggested: the memory per sample is read off the allocator's all-time peak, which also
holds what does not grow with the batch (workspaces, the loss, a first step's or an evaluation's peak), so it errs
large by that over the batch, and a run at the suggested batch measures more room than the run before it. Less than
a quarter more is that error, or other processes' memory moving, not room worth restarting a job for; a value that
no longer fits replaces the one told at once, whatever the noise (gputop)."""
GPU_ACTIVE_FROM_PERCENT = 1.0
"""A GPU busy at least this much runs the job's steps; an idle one is ``gpu-idle``'s business."""
MEMORY_FULL = 0.90
"""Peak reserved (or NVML's used) memory over total from which the GPU is nearly full (issue 5)."""
MEMORY_TARGET = 0.80
"""A suggested batch's peak aims at this share of the GPU, larger (batch-too-small) or smaller (memory-near-full):
``MEMORY_FULL`` less ``BATCH_MEMORY_MARGIN``. Both rules aim at one value, so a batch followed in either direction is
one the other rule is silent at, with 10 points of the GPU for what the memory model does not see (gputop)."""
FRAGMENTED_SHARE = 0.30
"""Reserved but unallocated memory, as a share of reserved, that counts as fragmentation (issue 5)."""
CACHE_EMPTIED_SHARE = 0.05
"""Reserved within 5 % of allocated at step boundaries: the cache is being emptied (gputop)."""
WARMUP_STEPS = 20
"""Steps after which a job's memory should be flat: the first steps allocate optimizer state and workspaces."""
HOST_WARMUP_S = 300
"""Without the probe a job's steps are unseen: its memory is judged once it is 5 minutes old, past the imports,
data loading and model building that make memory grow at the start of every job (gputop)."""
LEAK_MIN_RISE_CUDA_BYTES = 16 * MIB
"""Least rise of allocated memory over a window to call it a leak: below that, it is a cache warming up."""
LEAK_MIN_RISE_HOST_BYTES = 32 * MIB
"""The same for the training process's RSS, which Python's and libc's allocators make noisier."""
FULL_WITHIN_S: dict[Severity, float] = {"critical": 10 * 60, "warning": 60 * 60, "info": 6 * 60 * 60}
"""A leak that would fill the remaining memory within 10 min is critical, 1 h a warning, 6 h worth a note."""
WORKER_GROWTH_MIN_BYTES = 64 * MIB
"""Least rise of the workers' summed USS over a window to report it (gputop)."""

# -- the training loop --------------------------------------------------------------------------------------------

MAIN_THREAD_BUSY = 0.90
"""The main thread on a CPU 90 % of the time or more is the limit itself (issue 5)."""
CPU_LOOP_GPU_BUSY_BELOW = 50.0
"""GPU busy below which a busy main thread is starving the GPU (gputop)."""

# -- what the GPU's SMs do (NVML GPM, the metrics DCGM calls profiling metrics) ------------------------------------

LAUNCH_BOUND_GPU_BUSY = 80.0
"""NVML busy from which a kernel runs nearly all the time; with low SM activity, those are small kernels one after
another (gputop)."""
LAUNCH_BOUND_SM_ACTIVITY = 30.0
"""SM activity at or below which a busy GPU is mostly idle SMs. DCGM's profiling metrics documentation: SM activity
below 0.5 "likely indicates ineffective GPU usage"; 0.3 leaves no doubt (gputop)."""
TENSOR_IDLE_SM_ACTIVITY = 50.0
"""SM activity from which the SMs do real work worth moving to the tensor cores (DCGM's profiling metrics
documentation: 0.5, below which GPU usage is likely ineffective for other reasons)."""
TENSOR_IDLE_PERCENT = 5.0
"""Tensor-core activity at or below which the tensor cores are idle: a mixed-precision or TF32 step keeps them busy
a good part of the time, well above this (gputop)."""
FULL_PRECISION = "highest"
"""``torch.get_float32_matmul_precision()`` that keeps float32 matmuls off the tensor cores (PyTorch's default)."""

# -- the GPU itself -----------------------------------------------------------------------------------------------

HARDWARE_SLOWDOWN: tuple[ThrottleReason, ...] = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown")
"""Clock-event reasons that mean the hardware protects itself: overheating or a power brake (NVML,
nvmlClocksEventReasons)."""
THERMAL_SLOWDOWN: tuple[ThrottleReason, ...] = ("sw_thermal_slowdown",)
POWER_CAP: ThrottleReason = "sw_power_cap"
POWER_CAP_CLOCK_SHARE = 0.75
"""At the power cap a busy GPU trims its clocks, which is normal; below 75 % of the maximum SM clock it costs
real speed (gputop)."""
THROTTLE_SHARE = 0.5
"""A reason active in half the samples of a window is throttling, not a blip (gputop)."""

# -- where the step goes (the probe's step anatomy) ----------------------------------------------------------------

HIDDEN_SYNC_PER_STEP = 1.0
"""A place in the code that makes the host wait for the GPU once a step or more: what happens every step costs every
step, where a value read every N steps (the remedy itself) costs 1/N of it (gputop; PyTorch Performance Tuning
Guide, "Avoid unnecessary CPU-GPU synchronization")."""
HIDDEN_SYNC_SHARE = 0.05
"""Syncs that may cost 5 % of the step or more are worth a finding: below that, the GPU idles little whatever the
syncs do (gputop)."""
HIDDEN_SYNC_WARNING = 0.15
"""... and from 15 % they are a bottleneck of their own (gputop)."""
HIDDEN_SYNC_TARGET = 0.01
"""A value read every N steps should cost at most 1 % of the step: the suggested N (gputop)."""
LOG_EVERY_STEPS = (10, 50, 100, 500, 1000)
"""The round step counts a suggested ``log every N steps`` is taken from (gputop)."""
H2D_SHARE = 0.10
"""Host-to-device copies taking 10 % of the step are worth a note, as waiting for data is (``DATA_WAIT_INFO``)."""
H2D_WARNING = 0.30
"""... and 30 % make them the bottleneck (``DATA_WAIT_WARNING``)."""
H2D_PAGEABLE_SHARE = 0.5
"""Copies whose bytes come mostly from pageable memory, or that are mostly made without ``non_blocking``: pageable
copies are staged by the driver through a pinned buffer at about half the bandwidth, and a blocking copy makes the
host wait for it ("How to Optimize Data Transfers in CUDA C/C++", NVIDIA)."""
LOW_MFU = 0.30
"""Model FLOPs utilisation below which a step leaves much of the GPU unused: large models are trained at 21 to 46 %
(PaLM, Chowdhery et al. 2022, Table 3: GPT-3 21.3 %, Megatron-Turing NLG 29.7 %, Gopher 32.5 %, PaLM 46.2 %)."""
LOW_MFU_WARNING = 0.15
"""... and below 15 %, under a third of what the best of those runs reaches (gputop)."""
OTHER_PHASE_SHARE = 0.25
"""The job's own code between the phases (``other``) taking a quarter of the step is launch or Python overhead
worth naming as a cause of low MFU (gputop)."""
SLOW_WARMUP_RATIO = 3.0
"""The first steps at least 3 times the steady step: compiling (``torch.compile``) or autotuning
(``cudnn.benchmark``), not the few percent a cold cache costs (gputop)."""
SLOW_WARMUP_MIN_S = 1.0
"""... and at least a second longer each: shorter warm-ups are not worth a note (gputop)."""
STEP_VARIANCE_RATIO = 1.5
"""A step's 95th percentile 1.5 times its median: one step in 20 takes half as long again, where a steady loop's
steps vary by a few percent (gputop)."""
STEP_VARIANCE_WARNING = 3.0
"""... 3 times: those steps cost the job as much as several ordinary ones each (gputop)."""
STEP_DRIFT = 1.2
"""The window's median step 20 % slower than the first steady window's: the job slows down as it runs (gputop)."""
STEP_DRIFT_WARNING = 1.5
STEP_DRIFT_MIN_RUN_S = 120.0
"""Drift is judged only once the job has trained this long (its steps over its steps a second): the causes it
names (heat, leaks, a growing cache) take minutes, and a first steady window that ends seconds before the latest
one mostly compares the machine's load from one moment to the next (gputop)."""

# -- jobs of several ranks ----------------------------------------------------------------------------------------

STRAGGLER_SLOWER = 0.15
"""A rank that computes this much longer per step (its main thread's time on the CPU) than the median of the
others holds them back (issue 16: "well above the job's median (say more than 15 %)")."""
STRAGGLER_OTHERS_WAIT = 0.10
"""... while the other ranks wait for it (off the CPU outside the data wait) at least this share of each step, and
its extra compute is at least this share of a step (gputop: below that, a slower rank costs the job little, and
a few percent of busy share between ranks that mostly wait is noise)."""
STRAGGLER_HOLD_WINDOWS = 0.5
"""``straggler`` is raised once it held for half a window, not a whole one: what it compares is already a statistic
over time on every rank (the probe's step phases over its own window of steps, or the main threads' medians over
the last window), and a job held back by one rank loses that share of every step until it is named (gputop: a
straggler named within 30 s of a job's start at the default window)."""
IMBALANCE_SPREAD = 0.15
"""Data wait shares this far apart across the ranks of one job (max less min) are an imbalance (gputop)."""
IMBALANCE_RATIO = 2.0
"""... and the most waiting rank waits at least this many times the median of the others (gputop: a spread of 15
points on top of 60 % is noise, not one slow shard)."""
