"""gputop: a terminal GPU dashboard that understands the training job it watches."""

__version__ = "0.1.0"
