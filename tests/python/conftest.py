import faulthandler
import os
import sys

import pytest

# Every test gets a watchdog: a hang dumps all stacks and kills the run
# instead of blocking CI forever.
WATCHDOG_S = int(os.environ.get("STOKER_TEST_WATCHDOG_S", "240"))


@pytest.fixture(autouse=True)
def _watchdog():
    faulthandler.dump_traceback_later(WATCHDOG_S, exit=True, file=sys.stderr)
    yield
    faulthandler.cancel_dump_traceback_later()
