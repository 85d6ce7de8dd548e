"""The one exception the estimate raises."""

from __future__ import annotations


class EstimateError(Exception):
    """The estimate could not be made: the message says what failed and where, in one line."""
