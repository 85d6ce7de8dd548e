"""Size of a recording: an hour of synthetic 8-GPU snapshots at 1 s, written through the real Recorder.

No sleeping: 3600 snapshots with advancing times and slightly changing values, made before the clock starts, then
committed every 2 simulated seconds as `gputop record` does; write and read are CPU times.
Each snapshot has 8 H100s, 16 GPU processes (2 per GPU), their host processes and a 64-core host.

usage: python benchmarks/recording_size.py [--seconds 3600] [--interval 1.0]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputop.model import (
    DRIVER_OK,
    UNSUPPORTED,
    DriverInfo,
    Gpu,
    GpuProcess,
    HostInfo,
    HostProcess,
    Snapshot,
    frozen_reasons,
)
from gputop.store import Recorder, open_recording

GIB = 1024**3
CORES = 64


def synthetic(t: float, rng: random.Random) -> Snapshot:
    gpus = tuple(
        Gpu(
            index=i,
            uuid=f"GPU-6a1b2c3d-0000-4000-8000-{i:012d}",
            name="NVIDIA H100 80GB HBM3",
            memory_total_bytes=80 * GIB,
            memory_used_bytes=(20 + 5 * i) * GIB + rng.randrange(0, 64) * 1024**2,
            memory_free_bytes=(60 - 5 * i) * GIB,
            memory_reserved_bytes=512 * 1024**2,
            utilization_gpu_percent=float(rng.randint(80, 100)),
            utilization_memory_percent=float(rng.randint(30, 50)),
            sm_activity_percent=round(rng.uniform(55, 70), 1),
            temperature_c=float(60 + i + rng.randint(0, 2)),
            power_w=round(rng.uniform(480, 560), 3),
            power_limit_w=700.0,
            fan_percent=None,
            pstate=0,
            clock_sm_mhz=rng.choice((1755, 1770, 1785)),
            clock_mem_mhz=2619,
            clock_sm_max_mhz=1980,
            clock_mem_max_mhz=2619,
            pcie_rx_bytes_per_s=rng.randrange(40_000, 50_000) * 1024,
            pcie_tx_bytes_per_s=rng.randrange(1_000, 1_400) * 1024,
            throttle_reasons=("sw_power_cap",),
            ecc_uncorrected_volatile=0,
            unavailable=frozen_reasons({"fan_percent": UNSUPPORTED}),
        )
        for i in range(8)
    )
    pids = [4000 + n for n in range(16)]
    host_processes = tuple(
        HostProcess(
            pid=pid,
            ppid=3999,
            user="alice",
            name="python",
            command=f"python train.py --config big.yaml --local_rank {n}",
            cpu_percent=round(rng.uniform(95, 105), 1),
            rss_bytes=12 * GIB + rng.randrange(0, 1024) * 4096,
            start_time=1_700_000_000.0 + n,
            status="running",
            num_threads=40,
        )
        for n, pid in enumerate(pids)
    )
    # As the sampler makes them: each GPU row refers to the very host process in host_processes.
    processes = tuple(
        GpuProcess(
            pid=host.pid,
            gpu_index=n % 8,
            kind="compute",
            gpu_memory_bytes=6 * GIB + n * 1024**2,
            sm_percent=float(rng.randint(40, 90)),
            memory_bandwidth_percent=float(rng.randint(10, 40)),
            host=host,
        )
        for n, host in enumerate(host_processes)
    )
    return Snapshot(
        time=t,
        host=HostInfo(
            hostname="trainer-7",
            cpu_percent=round(rng.uniform(20, 40), 1),
            cpu_percent_per_core=tuple(round(rng.uniform(0, 100), 1) for _ in range(CORES)),
            cpu_count=CORES,
            usable_cpu_count=CORES,
            load_average=(17.5, 17.2, 16.9),
            memory_total_bytes=1024 * GIB,
            memory_used_bytes=300 * GIB + rng.randrange(0, 1024) * 1024**2,
            memory_available_bytes=700 * GIB,
            swap_total_bytes=0,
            swap_used_bytes=0,
        ),
        driver=DriverInfo(status=DRIVER_OK, driver_version="550.90.07", cuda_version="12.4", nvml_version="12.550"),
        gpus=gpus,
        processes=processes,
        host_processes=host_processes,
        notices=(),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=3600, help="simulated recording length (default 3600)")
    parser.add_argument("--interval", type=float, default=1.0, help="simulated seconds between snapshots")
    args = parser.parse_args()

    rng = random.Random(7)
    clock = [0.0]
    start = 1_700_000_000.0
    count = int(args.seconds / args.interval)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "hour.gputop"
        snaps = [synthetic(start + n * args.interval, rng) for n in range(count)]
        began = time.process_time()
        with Recorder(path, args.interval, hostname="trainer-7", started=start, clock=lambda: clock[0]) as rec:
            for n, snap in enumerate(snaps):
                clock[0] = n * args.interval
                rec.append(snap)
        wrote_s = time.process_time() - began
        size = path.stat().st_size
        began = time.process_time()
        with open_recording(path) as recording:
            read = sum(1 for _ in recording)
        read_s = time.process_time() - began
    per_hour = size * 3600 / (count * args.interval)
    print(f"snapshots: {count} (8 GPUs, 16 GPU processes, {CORES} cores) every {args.interval:g} s")
    print(f"file: {size} bytes, {size / count:.0f} bytes per snapshot")
    print(f"bytes per hour: {per_hour:.0f} ({per_hour / 1024**2:.1f} MiB)")
    print(
        f"write: {wrote_s / count * 1000:.2f} ms CPU per snapshot; "
        f"read back {read}: {read_s / read * 1000:.2f} ms CPU each"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
