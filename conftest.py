"""Settings for every pytest run of the repository, whichever paths it is given.

Exercise progress goes to a fresh folder for the test session, never to ``~/.course_lib``:
the notebook kernels that nbval starts inherit it, so every chapter starts with nothing
answered, also when pytest is run on ``chapters/`` alone.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import tempfile
import time

import pytest

from tasks import NUMERICS, STUDENT_KERNEL, student_fingerprint, student_kernels, student_python

# Nothing is downloaded at test time: transformers (the oracle of tests/test_huggingface.py)
# and huggingface_hub work offline, in this process and in the notebook kernels it starts.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

# The chapters are re-executed with the numerical settings they were stored with; tests, grading
# workers and the other processes they start run with them too (one thread each: pytest-xdist
# runs two of them on the machine's two cores).
os.environ.update(NUMERICS)

# The student's environment in which nbval runs the chapters (tasks.student_python): one per
# run, made by the first worker that needs it while the others wait. The folder is chosen here,
# in the process that starts pytest, and so is what the environment is made of (files edited
# during the run change nothing); xdist's workers inherit both. A folder given in
# COURSE_LIB_STUDENT_DIR is kept, and reused while what the environment is made of is unchanged.
if "COURSE_LIB_STUDENT_DIR" not in os.environ:
    os.environ["COURSE_LIB_STUDENT_DIR"] = tempfile.mkdtemp(prefix="course-student-")
    atexit.register(shutil.rmtree, os.environ["COURSE_LIB_STUDENT_DIR"], ignore_errors=True)
os.environ.setdefault("COURSE_LIB_STUDENT_MADE_OF", student_fingerprint())
os.environ["JUPYTER_PATH"] = os.pathsep.join(
    filter(None, [str(student_kernels()), os.environ.get("JUPYTER_PATH")])
)


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before nbval starts a chapter's kernel: the student's environment it runs in."""
    if item.config.getoption("nbval_kernel_name", None) == STUDENT_KERNEL and (
        item.nodeid.split("::", 1)[0].endswith(".ipynb")
    ):
        student_python()  # once per process: later calls return at once


# when the run started, for files a run rewrites (the browser's screenshots): xdist's workers
# inherit the time of the process that starts pytest
os.environ.setdefault("COURSE_LIB_RUN_STARTED", repr(time.time()))

SESSION_HOME = tempfile.mkdtemp(prefix="course-lib-home-")
os.environ["COURSE_LIB_HOME"] = SESSION_HOME
atexit.register(shutil.rmtree, SESSION_HOME, ignore_errors=True)


# ------------------------------------------------------------ running on both cores (xdist)
# `tasks.py test` runs pytest-xdist (tasks.PARALLEL). A group of tests runs on one worker, in
# collection order; what a group keeps together:
# - a notebook's cells (nbval runs them in one kernel, one after another);
# - the tests of one page of the built book (BOOK_MODULES, the page read from the test's
#   parameters): they share what Chromium saw on that page (`browser_visits`), one visit per
#   window size and theme; the book's tests of no one page are the group "book";
# - otherwise a test module, whose module-scoped fixtures are then made once.
# The book is built once per run, by the first worker that needs it (tests/conftest.py).
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
LONGEST_GROUPS = ["book"]
# a page's name opens the parameters of its tests: [chapters/decoder-390x844-dark], [intro]
PAGE_PARAMETERS = re.compile(r"\[((?:chapters/)?[a-z][a-z0-9-]*?)(?:-\d[^\]]*)?\]$")


def group_of(nodeid: str) -> str:
    """The group of a test, from its node id (``path::name[parameters]``)."""
    path = nodeid.split("::", 1)[0]
    if path not in BOOK_MODULES:
        return path
    page = PAGE_PARAMETERS.search(nodeid)
    return f"book:{page.group(1)}" if page else "book"


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    # BOOK_MODULES is written out because the scheduler sees only node ids; the tests of a
    # module that uses the built book and is missing there would not be grouped by page, and
    # would visit the pages again on whichever worker runs that module.
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
