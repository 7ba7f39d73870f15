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

# Nothing is downloaded at test time: transformers (the oracle of tests/test_huggingface.py)
# and huggingface_hub work offline, in this process and in the notebook kernels it starts.
os.environ.setdefault("HF_HUB_OFFLINE", "1")

SESSION_HOME = tempfile.mkdtemp(prefix="course-lib-home-")
os.environ["COURSE_LIB_HOME"] = SESSION_HOME
atexit.register(shutil.rmtree, SESSION_HOME, ignore_errors=True)
