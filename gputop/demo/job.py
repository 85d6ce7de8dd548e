"""The demo's training job: a small image classifier whose input pipeline cannot keep up with it.

A real ``torch.utils.data.DataLoader`` with worker processes decodes and augments synthetic images
(zlib-compressed pixels, a random crop, a flip, a colour jitter, a rotation, a blur and a resize, all on the CPU,
per sample) for a model of three Linear layers that needs a fraction of that time per batch. So the loop waits
for data most of each step, which is what gputop measures and the advisor reports. Nothing here talks to gputop:
run it alone with ``python -m gputop.demo.job``, or watched with ``gputop demo``.

It trains on the GPU when torch sees one, else on the CPU with one thread, prints a line per epoch, and stops once
it has trained ``--seconds`` (from its first batch), on Ctrl-C (SIGINT) or on SIGTERM, exiting 0.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import time
import warnings
import zlib

# torch warns at import when numpy is missing; the demo does not need numpy.
warnings.filterwarnings("ignore", message="Failed to initialize NumPy")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402

CLASSES = 10
STORED_SIZE = 128
"""Side of the stored images, in pixels (3 channels, 8 bits)."""
CROP = 112
INPUT_SIZE = 32
"""Side of the images the model sees."""
STORED_IMAGES = 256
"""Distinct encoded images; the dataset cycles through them, each sample with its own augmentation."""
BLUR = torch.tensor([1.0, 4.0, 6.0, 4.0, 1.0]) / 16


def synthetic_image(label: int, generator: torch.Generator) -> bytes:
    """An image whose class shows as the frequency of its stripes, under noise; returned encoded (zlib)."""
    y, x = torch.meshgrid(torch.arange(STORED_SIZE), torch.arange(STORED_SIZE), indexing="ij")
    angle, phase = (torch.rand(2, generator=generator) * torch.tensor([math.pi, 2 * math.pi])).tolist()
    frequency = 0.05 + 0.02 * label
    stripes = torch.sin(frequency * (x * math.cos(angle) + y * math.sin(angle)) + phase)
    tint = torch.rand(3, 1, 1, generator=generator) * 0.5 + 0.5
    noise = torch.randn(3, STORED_SIZE, STORED_SIZE, generator=generator) * 0.35
    pixels = ((stripes * 0.4 + 0.5) * tint + noise).clamp(0, 1).mul(255).to(torch.uint8)
    return zlib.compress(bytes(pixels.flatten().tolist()), 6)


class SyntheticImages(Dataset):
    """Encoded images decoded and augmented on every access, as an image dataset's ``__getitem__`` does."""

    def __init__(self, size: int, seed: int = 0) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.size = size
        self.labels = [i % CLASSES for i in range(STORED_IMAGES)]
        self.encoded = [synthetic_image(label, generator) for label in self.labels]

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        stored = index % STORED_IMAGES
        raw = zlib.decompress(self.encoded[stored])
        image = torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(3, STORED_SIZE, STORED_SIZE).float() / 255
        top, left = torch.randint(0, STORED_SIZE - CROP + 1, (2,)).tolist()
        image = image[:, top : top + CROP, left : left + CROP]
        if torch.rand(1).item() < 0.5:
            image = image.flip(2)
        brightness, contrast = (torch.rand(2) * 0.4 + 0.8).tolist()
        mean = image.mean()
        image = ((image - mean) * contrast + mean) * brightness
        turn = (torch.rand(1).item() - 0.5) * math.radians(30)
        rotation = torch.tensor([[[math.cos(turn), -math.sin(turn), 0.0], [math.sin(turn), math.cos(turn), 0.0]]])
        grid = F.affine_grid(rotation, [1, 3, CROP, CROP], align_corners=False)
        image = F.grid_sample(image[None], grid, padding_mode="reflection", align_corners=False)[0]
        kernel = BLUR[:, None] * BLUR[None, :]
        image = F.conv2d(image[None], kernel.expand(3, 1, 5, 5).contiguous(), padding=2, groups=3)
        image = F.interpolate(image, size=(INPUT_SIZE, INPUT_SIZE), mode="bilinear", antialias=True)[0]
        image = (image - 0.5) / 0.25
        return image, self.labels[stored]


def model() -> torch.nn.Module:
    features = 3 * INPUT_SIZE * INPUT_SIZE
    return torch.nn.Sequential(
        torch.nn.Flatten(),
        torch.nn.Linear(features, 256),
        torch.nn.ReLU(),
        torch.nn.Linear(256, 128),
        torch.nn.ReLU(),
        torch.nn.Linear(128, CLASSES),
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m gputop.demo.job", description=__doc__.splitlines()[0] if __doc__ else None
    )
    parser.add_argument(
        "--seconds", type=float, default=1800.0, help="train this long, from the first batch (default 1800)"
    )
    parser.add_argument("--workers", type=int, default=2, help="DataLoader workers (default 2)")
    parser.add_argument("--batch-size", type=int, default=64, help="samples per batch (default 64)")
    parser.add_argument("--epoch-batches", type=int, default=100, help="batches per epoch (default 100)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM stops the job as Ctrl-C does: the loop ends, and the DataLoader shuts its workers down.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    torch.set_num_threads(1)  # the workers need the cores more than the model does
    torch.manual_seed(0)
    net = model().to(device)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    loader = DataLoader(
        SyntheticImages(args.epoch_batches * args.batch_size),
        batch_size=args.batch_size,
        shuffle=True,
        num_workers=args.workers,
        pin_memory=cuda,
        persistent_workers=args.workers > 0,
    )
    where = torch.cuda.get_device_name(device) if cuda else "the CPU"
    print(
        f"gputop demo job (PID {os.getpid()}): {args.workers} DataLoader workers decode and augment "
        f"{args.batch_size}-image batches for a small model on {where}; torch {torch.__version__}",
        flush=True,
    )
    epoch = 0
    # The time limit counts the training, from the first batch: on a loaded machine starting the workers and making
    # the first batches takes seconds, which a short demo would otherwise spend before its first step.
    started: float | None = None
    try:
        while started is None or time.monotonic() - started < args.seconds:
            epoch += 1
            epoch_started = time.monotonic()
            total_loss, correct, seen = 0.0, 0, 0
            for images, labels in loader:
                if started is None:
                    started = time.monotonic()
                elif time.monotonic() - started >= args.seconds:
                    break  # mid-epoch: on a loaded machine an epoch can take minutes
                images = images.to(device, non_blocking=True)
                labels = labels.to(device, non_blocking=True)
                logits = net(images)
                loss = F.cross_entropy(logits, labels)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                total_loss += loss.item() * len(labels)
                correct += (logits.argmax(1) == labels).sum().item()
                seen += len(labels)
            took = time.monotonic() - epoch_started
            if not seen:  # the time ran out before this epoch's first batch
                epoch -= 1
                break
            print(
                f"epoch {epoch}: loss {total_loss / seen:.3f}, accuracy {correct / seen:.0%}, "
                f"{seen / took:.0f} images/s",
                flush=True,
            )
    except KeyboardInterrupt:
        print(f"stopped in epoch {epoch}", flush=True)
        return 0
    print(f"time limit reached ({args.seconds:g} s) after {epoch} epoch{'' if epoch == 1 else 's'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
