"""The dashboard's classes extend one another, and Textual's, through public hooks only (docs/architecture.md): a
private method is its class's own, free to change without a subclass silently going wrong."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

import gputop.ui

pytestmark = pytest.mark.fast


def dashboard_classes() -> list[type]:
    modules = [importlib.import_module(m.name) for m in pkgutil.walk_packages(gputop.ui.__path__, "gputop.ui.")]
    return [
        cls
        for module in modules
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if cls.__module__ == module.__name__
    ]


def test_the_walk_finds_the_dashboards_classes() -> None:
    names = {cls.__qualname__ for cls in dashboard_classes()}
    assert {"GputopApp", "DashboardScreen", "HostDashboardScreen", "ReplayDashboardScreen", "LiveFeed"} <= names


def private_methods(cls: type) -> list[str]:
    """The private methods and properties ``cls`` itself defines (``_name``, not ``__name__``)."""
    return [
        name
        for name, value in vars(cls).items()
        if name.startswith("_")
        and not name.startswith("__")
        and (inspect.isfunction(value) or isinstance(value, property))
    ]


def test_no_dashboard_class_overrides_a_private_method_of_a_class_it_extends() -> None:
    overrides = [
        f"{cls.__module__}.{cls.__qualname__}.{name} overrides {ancestor.__module__}.{ancestor.__qualname__}'s"
        for cls in dashboard_classes()
        for name in private_methods(cls)
        for ancestor in [next((a for a in cls.__mro__[1:] if name in vars(a)), None)]
        if ancestor is not None
    ]
    assert overrides == []
