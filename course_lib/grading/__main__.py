"""``python -m course_lib.grading``: the same as the ``course-grade`` command."""

import sys

from course_lib.grading.cli import main

sys.exit(main())
