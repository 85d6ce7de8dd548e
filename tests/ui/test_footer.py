"""The key footer, rebuilt whenever a screen's bindings change, keeps no widget of an earlier build alive."""

from __future__ import annotations

import gc
from collections.abc import Callable

from textual.widgets._footer import FooterKey

from gputop.ui.app import GputopApp
from gputop.ui.widgets.footer import WATCHERS, Footer
from tests.ui import scenes

MakeApp = Callable[..., GputopApp]


async def test_rebuilding_the_footer_leaves_no_old_keys_behind(make_app: MakeApp) -> None:
    app = make_app([scenes.training_node()])
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        footer = app.screen.query_one(Footer)
        for _ in range(12):  # as a change of the keys shown does
            footer.call_later(footer.recompose)
            await pilot.pause()
        shown = {id(key) for key in footer.query(FooterKey)}
        watching = [node for node, _ in getattr(footer, WATCHERS)["compact"]]
        assert shown
        assert {id(node) for node in watching} <= shown
        gc.collect()
        # type(), not isinstance: isinstance asks each object its __class__, and one of torch's warns when asked
        alive = [o for o in gc.get_objects() if type(o) is FooterKey]
        assert len(alive) <= 2 * len(shown), "keys of earlier builds are still referenced"
