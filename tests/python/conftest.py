import faulthandler
import os
import sys

import pytest

from leaks import Resources

# Every test gets a watchdog: a hang dumps all stacks and kills the run
# instead of blocking CI forever.
WATCHDOG_S = int(os.environ.get("STOKER_TEST_WATCHDOG_S", "240"))


def pytest_configure(config):
    config.addinivalue_line("markers", "leaks_ok(reason): the test keeps something alive on purpose; not checked "
                                       "for leaked fds, threads, children or memfds")


@pytest.fixture(autouse=True)
def _watchdog():
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True, file=sys.stderr)
    yield
    faulthandler.cancel_dump_traceback_later()


@pytest.fixture(autouse=True)
def _no_leaks(request):
    """Every test leaves what it found: no new open fds (memfds included),
    threads, or child processes once it is over (waiting a little for what
    shuts down asynchronously)."""
    if request.node.get_closest_marker("leaks_ok"):
        yield
        return
    before = Resources.now()
    yield
    # The test's function-scoped fixtures are finished by now, but the item
    # still holds their values until pytest's own teardown ends: let go.
    request.node.funcargs.clear()
    leaked = before.leaked_since(within_s=5.0)
    if leaked:
        pytest.fail(f"{request.node.nodeid} leaked: {leaked}", pytrace=False)
