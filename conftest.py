"""Settings for every pytest run of the repository, whichever paths it is given.

Exercise progress goes to a fresh folder for the test session, never to ``~/.course_lib``:
the notebook kernels that nbval starts inherit it, so every chapter starts with nothing
answered, also when pytest is run on ``chapters/`` alone.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile

import pytest

from tasks import NUMERICS

# Nothing is downloaded at test time: transformers (the oracle of tests/test_huggingface.py)
# and huggingface_hub work offline, in this process and in the notebook kernels it starts.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# The chapters are re-executed with the numerical settings they were stored with; tests, grading
# workers and the other processes they start run with them too (one thread each: pytest-xdist
# runs two of them on the machine's two cores).
os.environ.update(NUMERICS)

SESSION_HOME = tempfile.mkdtemp(prefix="course-lib-home-")
os.environ["COURSE_LIB_HOME"] = SESSION_HOME
atexit.register(shutil.rmtree, SESSION_HOME, ignore_errors=True)


# ------------------------------------------------------------ running on both cores (xdist)
# `tasks.py test` runs pytest-xdist (tasks.PARALLEL). A group of tests runs on one worker, in
# collection order; what a group keeps together:
# - a notebook's cells (nbval runs them in one kernel, one after another);
# - every test of the built book (BOOK_MODULES): the book is built once, and the browser tests
#   share the pages Chromium visited (`browser_visits`);
# - otherwise a test module, whose module-scoped fixtures are then made once.
# The groups are handed out in collection order, the longest first (LONGEST_GROUPS, measured),
# so that the workers end together.
# (pytest-xdist's own --dist loadgroup reads xdist_group marks through a node id that pytest 9
# no longer takes from the attribute it writes, so the groups are made from node ids here.)
BOOK_MODULES = {
    "tests/test_book.py",
    "tests/test_browser.py",
    "tests/test_browser_explorers.py",
    "tests/test_browser_figures.py",
    "tests/test_browser_widgets.py",
}
LONGEST_GROUPS = ["book", "tests/test_student_install.py"]


def group_of(nodeid: str) -> str:
    """The group of a test, from its node id (``path::name[parameters]``)."""
    path = nodeid.split("::", 1)[0]
    return "book" if path in BOOK_MODULES else path


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    # BOOK_MODULES is written out because the scheduler sees only node ids; a module that
    # uses the built book and is missing there would build it again on another worker.
    uses_book = [i for i in items if "book_html" in getattr(i, "fixturenames", ())]
    outside = sorted({i.nodeid.split("::", 1)[0] for i in uses_book} - BOOK_MODULES)
    if outside:
        raise pytest.UsageError(f"conftest.BOOK_MODULES misses {outside}, which use the book")
    rank = {group: place for place, group in enumerate(LONGEST_GROUPS)}
    # a stable sort: the tests of a group keep their order
    items.sort(key=lambda item: rank.get(group_of(item.nodeid), len(rank)))


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, absent with -p no:xdist
def pytest_xdist_make_scheduler(config, log):
    """With ``--dist loadgroup``, pytest-xdist hands out the groups of ``group_of``."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return group_of(nodeid)

    return GroupScheduling(config, log)
