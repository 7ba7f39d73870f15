"""Grading submitted solutions: the instructor's side of :mod:`course_lib.exercises`.

``course-grade SUBMISSIONS... --out DIR`` (or ``python -m course_lib.grading``) reads
submission files, runs every code answer again in a sandbox on inputs drawn from the
instructor's grading seed, and writes ``DIR/grades.csv``, ``DIR/results.csv``,
``DIR/summary.csv``, ``DIR/similar.csv``, ``DIR/canvas.csv``, ``DIR/moodle.csv``, a feedback
page per student in ``DIR/feedback/`` and the SQLite gradebook ``DIR/gradebook.sqlite``. Every
valid file is graded; for each student and exercise the newest answer counts. The book's page
"Grading (for instructors)" explains it.

Modules, one concept each:

- :mod:`~course_lib.grading.inputs`: finding and reading submission files;
- :mod:`~course_lib.grading.grader`: grading one submission, statuses and points (a code
  answer is judged by :mod:`course_lib.answers.judging`, as the student's check
  judges it);
- :mod:`~course_lib.grading.sandbox`: the workers that run students' code, in bubblewrap:
  each is the fork server of :mod:`course_lib.answers.runner` (with its companions
  ``_confine.py`` and ``_refuse.py`` beside it), driven through
  :mod:`course_lib.answers.engine`, one fresh process per case;
- :mod:`~course_lib.grading.inprogress`: marks of the answers running, so that a run killed
  by an answer records it on the next run;
- :mod:`~course_lib.grading.text`: text from students and their code made safe to print on a
  terminal, to store (SQLite, HTML) and to write in a CSV cell;
- :mod:`~course_lib.grading.gradebook`: the SQLite gradebook;
- :mod:`~course_lib.grading.batch`: grading everything that is not graded yet;
- :mod:`~course_lib.grading.report`: grades.csv, results.csv, summary.csv and the summary
  printed at the end;
- :mod:`~course_lib.grading.similarity`: code answers identical to another student's;
- :mod:`~course_lib.grading.exports`: the Canvas and Moodle files;
- :mod:`~course_lib.grading.feedback`: the students' feedback pages;
- :mod:`~course_lib.grading.cli`: the command.
"""

from course_lib.grading.batch import Summary, add_files, grade_pending
from course_lib.grading.gradebook import Gradebook, GradebookError
from course_lib.grading.grader import STATUSES, Grade, Grader, Settings
from course_lib.grading.inputs import SubmissionFile, find_submission_files, read_submission_file
from course_lib.grading.report import write_reports
from course_lib.grading.sandbox import Limits, Sandbox, SandboxUnavailable

__all__ = [
    "STATUSES",
    "Grade",
    "Gradebook",
    "GradebookError",
    "Grader",
    "Limits",
    "Sandbox",
    "SandboxUnavailable",
    "Settings",
    "SubmissionFile",
    "Summary",
    "add_files",
    "find_submission_files",
    "grade_pending",
    "read_submission_file",
    "write_reports",
]
