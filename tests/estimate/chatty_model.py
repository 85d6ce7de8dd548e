"""A model module that prints to stdout as it is imported, from its factory, from C through file descriptor 1, in
its forward pass, and as the process ends: none of it may reach ``gputop estimate --json``'s stdout."""

from __future__ import annotations

import atexit
import os

from torch import nn

print("chatty: imported")
atexit.register(print, "chatty: at exit")


class Chatty(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x: object) -> object:
        print("chatty: forward")
        return self.linear(x)


def model() -> nn.Module:
    print("chatty: building")
    os.write(1, b"chatty: written to fd 1\n")
    return Chatty()
