"""Memory a kernel takes for itself while it runs and that no tensor shows: the scratch buffers of convolutions.

A convolution kernel copies its operands into the layout it computes in (oneDNN on the CPU reorders NCHW tensors
into blocked ones) or asks for a workspace (cuDNN on the GPU, through PyTorch's caching allocator). Under
``FakeTensorMode`` no kernel runs, so the estimate adds a buffer for the length of the operator: the input in the
forward pass, the input and the output's gradient in the backward pass. Measured against oneDNN on the CPU, this
brings an encoder-decoder of convolutions from 17-19 % under the real peak to within 7 % (docs/memory.md); cuDNN's
workspaces depend on the algorithm it picks, so on a GPU this is an approximation.
"""

from __future__ import annotations

from typing import Any

import torch


def workspace_bytes(func: Any, args: Any) -> int:
    """The scratch bytes operator ``func`` holds while it runs on ``args``; 0 for operators without any."""
    aten = torch.ops.aten
    if func is aten.convolution.default:
        return _nbytes(args[0])
    if func is aten.convolution_backward.default:
        return _nbytes(args[0]) + _nbytes(args[1])
    return 0


def _nbytes(tensor: torch.Tensor) -> int:
    return tensor.numel() * tensor.element_size()
