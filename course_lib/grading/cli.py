"""The ``course-grade`` command (also ``python -m course_lib.grading``).

    course-grade SUBMISSIONS... --out DIR [--seed N]       grade files and folders of them
    course-grade regrade --out DIR [--seed N] [STUDENT...]  run the code again
    course-grade override --out DIR STUDENT EXERCISE POINTS --reason TEXT
    course-grade override --out DIR STUDENT EXERCISE --remove [--reason TEXT]

The grading seed is required the first time a gradebook is graded, and remembered in it;
later runs use the remembered seed (giving another one is refused: use ``regrade --seed``).
Exit status: 0 when the run finished (invalid files and failed answers included), 2 when it
could not start (bad arguments, a missing path or sandbox, a seed conflict), 1 otherwise.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import fcntl
import os
import secrets
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

from course_lib.exercises import CodeExercise, UnknownExerciseError, get_exercise, list_exercises
from course_lib.exercises.submission import SubmissionError, validate_student_id
from course_lib.grading.batch import Summary, add_files, grade_pending
from course_lib.grading.gradebook import Gradebook, GradebookError
from course_lib.grading.grader import STATUSES, Settings
from course_lib.grading.inputs import find_submission_files
from course_lib.grading.report import terminal_summary, write_reports
from course_lib.grading.sandbox import Limits, SandboxUnavailable
from course_lib.grading.text import terminal_safe

__all__ = ["main"]

GRADEBOOK = "gradebook.sqlite"
LOCK = ".course-grade.lock"
COMMANDS = ("grade", "regrade", "override")
MAX_SEED = 2**63 - 1


class UsageError(Exception):
    """The command cannot run as asked; the message says why (exit status 2)."""


def _cpu_count() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _positive(kind):
    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not value > 0:
            raise argparse.ArgumentTypeError(f"expected a number above 0, got {text!r}")
        return value

    return parse


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"the seed is a whole number, got {text!r}") from None
    if not 0 <= value <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"the seed is between 0 and {MAX_SEED}, got {value}")
    return value


def _add_output(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help=f"folder of the gradebook ({GRADEBOOK}) and the CSV files (created if missing)",
    )


def _add_running(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--seed",
        type=_seed,
        help="grading seed: the random inputs of code exercises are drawn from it. Required "
        "the first time, then remembered in the gradebook. Keep it from students.",
    )
    parser.add_argument(
        "--jobs",
        type=_positive(int),
        default=_cpu_count(),
        help="submissions graded at once, one worker each (default: the CPU count, %(default)s)",
    )
    parser.add_argument(
        "--timeout",
        type=_positive(float),
        help="wall-clock seconds for all inputs of one code exercise (default: the "
        "exercise's own limit, the one students' checks use: 10 s)",
    )
    parser.add_argument(
        "--submission-timeout",
        type=_positive(float),
        help="wall-clock seconds for all code exercises of one submission (default: the sum "
        "of their own limits, so an answer that passed its check is never cut short)",
    )
    parser.add_argument(
        "--memory",
        type=_positive(int),
        default=Limits.memory_mb,
        metavar="MB",
        help="memory the code of one exercise may allocate (default %(default)s MB)",
    )
    parser.add_argument(
        "--sandbox",
        choices=("bwrap", "none"),
        default="bwrap",
        help="bwrap (default): run code in bubblewrap, which must be installed; none: plain "
        "subprocesses with the same limits but access to your files (trusted code only)",
    )
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def build_parsers() -> dict[str, argparse.ArgumentParser]:
    grade = argparse.ArgumentParser(
        prog="course-grade",
        description="Grade course_lib submission files: run every answer again, in a "
        "sandbox, and write DIR/grades.csv, DIR/results.csv and DIR/gradebook.sqlite. "
        "Other commands: 'course-grade regrade --help', 'course-grade override --help'.",
    )
    grade.add_argument(
        "submissions", nargs="+", metavar="SUBMISSIONS", help="files, and folders of *.json files"
    )
    _add_output(grade)
    _add_running(grade)

    regrade = argparse.ArgumentParser(
        prog="course-grade regrade",
        description="Run the valid submissions again (all, or those of the students "
        "given), e.g. after fixing an exercise; with --seed, all of them with a new seed.",
    )
    regrade.add_argument("students", nargs="*", metavar="STUDENT")
    _add_output(regrade)
    _add_running(regrade)

    override = argparse.ArgumentParser(
        prog="course-grade override",
        description="Set a student's points for an exercise by hand; the override wins over "
        "the graded points until it is removed (--remove). Every change is logged.",
    )
    override.add_argument("student", metavar="STUDENT")
    override.add_argument("exercise", metavar="EXERCISE")
    override.add_argument("points", nargs="?", type=int, metavar="POINTS")
    _add_output(override)
    override.add_argument("--reason", default="", help="why (required to set points)")
    override.add_argument("--remove", action="store_true", help="remove the override")
    return {"grade": grade, "regrade": regrade, "override": override}


@contextlib.contextmanager
def open_gradebook(out: str) -> Iterator[Gradebook]:
    """The gradebook in ``out``, locked against a second ``course-grade`` on the same folder."""
    folder = Path(out)
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--out {out}: exists and is not a folder")
    folder.mkdir(parents=True, exist_ok=True)
    with open(os.open(folder / LOCK, os.O_WRONLY | os.O_CREAT, 0o600), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise UsageError(f"another course-grade is working on {out}; wait for it") from None
        try:
            book = Gradebook(folder / GRADEBOOK)
        except GradebookError as error:
            raise UsageError(str(error)) from None
        try:
            yield book
        finally:
            book.close()


def _public_seeds() -> dict[int, str]:
    return {e.seed: e.id for e in list_exercises() if isinstance(e, CodeExercise)}


def choose_seed(book: Gradebook, given: int | None, *, new_allowed: bool) -> int:
    """The grading seed: ``given``, or the one the gradebook remembers. A new seed is stored;
    one that differs from the stored seed needs ``new_allowed`` (regrade)."""
    stored = book.seed
    if given is None:
        if stored is None:
            raise UsageError(
                "choose a grading seed the first time, e.g. --seed "
                f"{secrets.randbelow(10**9)}: the random inputs of code exercises are drawn "
                "from it, so students cannot know them. The gradebook remembers it."
            )
        return stored
    public = _public_seeds()
    if given in public:
        raise UsageError(
            f"--seed {given} is the public seed of {public[given]!r}: students' own checks use "
            "it, so hard-coded answers would pass. Choose another seed."
        )
    if stored is not None and given != stored and not new_allowed:
        raise UsageError(
            f"{book.path} was graded with the seed {stored}. Run without --seed to go on with "
            f"it, or grade everything again with the new seed: course-grade regrade --out "
            f"{book.path.parent} --seed {given}"
        )
    return given


def _settings(options: argparse.Namespace, seed: int) -> Settings:
    return Settings(
        seed=seed,
        timeout=options.timeout,
        submission_timeout=options.submission_timeout,
        limits=Limits(memory_mb=options.memory),
    )


def say(text: str, file: TextIO | None = None) -> None:
    """Print one line that holds student-controlled text (file names, ids, messages, override
    reasons), which cannot act on the terminal (see
    :func:`~course_lib.grading.text.terminal_safe`). Lines of the grader's own use print."""
    print(terminal_safe(text), file=file if file is not None else sys.stdout)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" + ("" if number == 1 else "s")


def _report_spared(book: Gradebook, out: str, summary: Summary) -> None:
    """Say which answers were not run because an earlier run was killed while they ran."""
    if not summary.spared:
        return
    say(
        f"{_count(len(summary.spared), 'answer')} not run again: an earlier run of course-grade "
        "was killed or stopped while it ran, so it is recorded as an error. If you ended that "
        f"run yourself (kill -9), run it again with: course-grade regrade --out {out} STUDENT"
    )
    for sha, exercise_id in summary.spared:
        say(f"  not run again: {book.document(sha)['student_id']} {exercise_id}")


def _report(book: Gradebook, out: str, summary: Summary, seed: int, sandbox: str) -> None:
    paths = write_reports(book, out)
    invalid = [f for f in summary.files if not f.valid]
    if summary.files:
        print(
            f"Read {_count(len(summary.files), 'file')} ({summary.new_files} new): "
            f"{len(summary.files) - len(invalid)} valid, {len(invalid)} invalid."
        )
    counts = ", ".join(f"{s} {summary.statuses[s]}" for s in STATUSES if summary.statuses[s])
    where = f"{_count(summary.workers, 'worker')} in the sandbox {sandbox}"
    print(
        f"Graded {_count(summary.graded, 'submission')} in {summary.seconds:.1f} s with seed "
        f"{seed} ({where if summary.workers else 'no code to run'}); "
        f"{_count(len(book.students()), 'student')} in the gradebook."
    )
    if counts:
        print(f"Exercise results: {counts}.")
    _report_spared(book, out, summary)
    if summary.unsaved:
        print(f"{_count(len(summary.unsaved), 'submission')} whose results could not be stored:")
        for line in summary.unsaved:
            say(f"  {line.removeprefix('course-grade: ')}")
    for record in invalid[:20]:
        say(f"  invalid: {record.message}")
    if len(invalid) > 20:
        print(f"  ... and {len(invalid) - 20} more invalid files (see {paths[1].name})")
    for line in terminal_summary(book):
        print(line)
    print(_written(paths, book))


def _written(paths: Sequence[Path], book: Gradebook) -> str:
    files = ", ".join(p.name for p in paths[:-1])
    return f"Wrote {files} and {paths[-1]}/ in {paths[0].parent}; the gradebook is {book.path}."


NO_SANDBOX = (
    "course-grade: warning: --sandbox none: students' code runs without bubblewrap and can "
    "read what your account can read; use it for code you trust"
)


def run_grade(options: argparse.Namespace) -> int:
    if options.sandbox == "none":
        print(NO_SANDBOX, file=sys.stderr)
    _, missing = find_submission_files(options.submissions)
    if missing:
        raise UsageError("; ".join(missing))
    with open_gradebook(options.out) as book:
        seed = choose_seed(book, options.seed, new_allowed=False)
        if book.seed is None:
            book.set_meta("seed", str(seed))
        summary, _ = add_files(book, options.submissions)
        grade_pending(
            book,
            _settings(options, seed),
            sandbox=options.sandbox,
            jobs=options.jobs,
            progress=not options.quiet,
            summary=summary,
        )
        _report(book, options.out, summary, seed, options.sandbox)
    return 0


def run_regrade(options: argparse.Namespace) -> int:
    if options.sandbox == "none":
        print(NO_SANDBOX, file=sys.stderr)
    with open_gradebook(options.out) as book:
        seed = choose_seed(book, options.seed, new_allowed=True)
        files = book.valid_submissions()
        known = sorted({row["student_id"] for row in files})
        unknown = [s for s in options.students if s not in known]
        if unknown:
            raise UsageError(_unknown_students(unknown, known))
        chosen = set(options.students or known)
        if seed != book.seed:  # a new seed: everything is graded again
            chosen = set(known)
        book.forget_grades(row["sha256"] for row in files if row["student_id"] in chosen)
        book.set_meta("seed", str(seed))
        summary = grade_pending(
            book,
            _settings(options, seed),
            sandbox=options.sandbox,
            jobs=options.jobs,
            progress=not options.quiet,
        )
        _report(book, options.out, summary, seed, options.sandbox)
    return 0


def _unknown_students(unknown: Sequence[str], known: Sequence[str]) -> str:
    parts = []
    for student in unknown:
        close = difflib.get_close_matches(student, known, n=3)
        hint = f" (did you mean {' or '.join(close)}?)" if close else ""
        parts.append(f"{student!r}{hint}")
    return f"no submission in the gradebook from {', '.join(parts)}"


def run_override(options: argparse.Namespace) -> int:
    try:
        exercise = get_exercise(options.exercise)
        validate_student_id(options.student)
    except (UnknownExerciseError, SubmissionError) as error:
        raise UsageError(str(error).strip("'\"")) from None
    if options.remove == (options.points is not None):
        raise UsageError("give either POINTS or --remove")
    if not options.remove:
        if not 0 <= options.points <= exercise.points:
            raise UsageError(
                f"{exercise.id} is worth {exercise.points} points; POINTS must be between 0 "
                f"and {exercise.points}, got {options.points}"
            )
        if not options.reason.strip():
            raise UsageError("say why with --reason (it is kept in the gradebook and the CSV)")
    with open_gradebook(options.out) as book:
        if options.student not in book.students():
            raise UsageError(_unknown_students([options.student], book.students()))
        if options.remove:
            if book.override(options.student, exercise.id) is None:
                raise UsageError(f"{options.student} has no override for {exercise.id}")
            book.set_override(options.student, exercise.id, None, options.reason.strip())
            say(f"Removed the override of {exercise.id} for {options.student}.")
        else:
            book.set_override(options.student, exercise.id, options.points, options.reason.strip())
            say(
                f"{options.student}: {exercise.id} set to {options.points} of "
                f"{exercise.points} points ({options.reason.strip()})."
            )
        print(_written(write_reports(book, options.out), book))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    command = argv[0] if argv and argv[0] in COMMANDS else "grade"
    if argv and argv[0] in COMMANDS:
        argv = argv[1:]
    parser = build_parsers()[command]
    options = parser.parse_args(argv)
    runner = {"grade": run_grade, "regrade": run_regrade, "override": run_override}[command]
    try:
        return runner(options)
    except (UsageError, SandboxUnavailable) as error:
        say(f"course-grade: error: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("course-grade: interrupted; the submissions graded so far are kept", file=sys.stderr)
        return 130
