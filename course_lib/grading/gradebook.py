"""The gradebook: one SQLite file (``gradebook.sqlite``) holding everything grading decided.

Tables (see the instructors' guide for queries):

- ``meta``: the gradebook's format version and the grading seed.
- ``exercises``: the course's exercises when last graded (id, chapter, kind, title, points,
  position in the course).
- ``students``: every student id seen, in a valid file or named by an invalid one.
- ``submissions``: every file read, keyed by the SHA-256 of its bytes: its student, when it
  was written (``created_utc``), ``valid`` or ``invalid`` with a message, and for valid
  files the whole document (so regrading needs no files). ``submission_files`` lists where
  each was read.
- ``gradings``: which submissions are graded (every valid one is), with which seed, when.
- ``results``: one row per exercise of a graded submission: status (``ok``, ``fail``,
  ``timeout``, ``error``, ``invalid``), points, message, the checks, printed output.
- ``overrides``: points an instructor set by hand for a student and an exercise, with the
  reason; ``override_log`` keeps every change.
- ``in_progress``: the code answer each run of the grader is running (submission, exercise,
  run), committed before it runs and removed when its results are saved or the run ends;
  a mark left by a run that is gone names the answer that was running when it was killed
  (:mod:`course_lib.grading.inprogress`).

Views (dropped and created again whenever a gradebook is opened, so an older gradebook gets
the current rules):

- ``submission_flags``: every valid file with its flag: ``future`` when its ``created_utc`` is
  more than ``FUTURE_MINUTES`` later than the moment the gradebook first read it (``added_utc``)
  or is not a date SQLite can read (files read now always have one), else ``NULL``. A file's
  flag depends on that file alone, never on the student's other files, so no file can get
  another one flagged.
- ``answers``: every answer (a result) of every valid file, ranked per student and exercise:
  unflagged files before flagged ones, then the newest ``created_utc``, then the larger SHA-256.
  So a file's time only ever ranks it against the student's own other files, and an older time
  only ever loses: a file dated in the past (say 2000-01-01) loses to every newer file of the
  student, and one dated in the future is flagged and loses to every unflagged file.
- ``counted_answers``: the answer that counts for each student and exercise (rank 1): the file
  it came from, its flag, and how many of the student's answers it ``superseded``.
- ``counted_submissions``: the files from which at least one counted answer comes.
- ``final_grades``: a row per student and exercise: the counted answer's file, status and
  graded points, the override and the points that count (the override when there is one).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import course_lib
from course_lib.exercises import Exercise
from course_lib.grading.grader import Grade
from course_lib.grading.inputs import SubmissionFile
from course_lib.grading.text import (
    CHECK_MESSAGE_LIMIT,
    MESSAGE_LIMIT,
    NAME_LIMIT,
    OUTPUT_LIMIT,
    storable,
)

__all__ = ["FORMAT_VERSION", "Gradebook", "GradebookError"]

FORMAT_VERSION = 2
FUTURE_MINUTES = 10  # a file written this long after the gradebook first read it: 'future'
MAX_CHECKS = 200  # checks kept per result; more are summed up in one last entry
PATH_LIMIT = 4096  # characters kept of a file's path

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS exercises (
    id TEXT PRIMARY KEY,
    chapter TEXT NOT NULL,
    kind TEXT NOT NULL,
    title TEXT NOT NULL,
    points INTEGER NOT NULL,
    position INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS students (
    student_id TEXT PRIMARY KEY,
    first_seen_utc TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS submissions (
    sha256 TEXT PRIMARY KEY,
    student_id TEXT REFERENCES students (student_id),
    created_utc TEXT,
    status TEXT NOT NULL CHECK (status IN ('valid', 'invalid')),
    message TEXT NOT NULL,
    size INTEGER NOT NULL,
    content TEXT,
    added_utc TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS submission_files (
    sha256 TEXT NOT NULL REFERENCES submissions (sha256),
    path TEXT NOT NULL,
    seen_utc TEXT NOT NULL,
    PRIMARY KEY (sha256, path)
);
CREATE TABLE IF NOT EXISTS gradings (
    sha256 TEXT PRIMARY KEY REFERENCES submissions (sha256),
    seed INTEGER NOT NULL,
    graded_utc TEXT NOT NULL,
    course_lib_version TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS results (
    sha256 TEXT NOT NULL REFERENCES submissions (sha256),
    exercise_id TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('ok', 'fail', 'timeout', 'error', 'invalid')),
    points INTEGER NOT NULL,
    max_points INTEGER NOT NULL,
    message TEXT NOT NULL,
    checks TEXT NOT NULL,
    output TEXT NOT NULL,
    seconds REAL NOT NULL,
    PRIMARY KEY (sha256, exercise_id)
);
CREATE TABLE IF NOT EXISTS overrides (
    student_id TEXT NOT NULL,
    exercise_id TEXT NOT NULL,
    points INTEGER NOT NULL,
    reason TEXT NOT NULL,
    set_utc TEXT NOT NULL,
    PRIMARY KEY (student_id, exercise_id)
);
CREATE TABLE IF NOT EXISTS override_log (
    id INTEGER PRIMARY KEY,
    student_id TEXT NOT NULL,
    exercise_id TEXT NOT NULL,
    points INTEGER,
    reason TEXT NOT NULL,
    set_utc TEXT NOT NULL
);
"""


# Views are dropped and created again on every open, so that a gradebook of an older format
# gets the rules of this one (the tables keep their data).
VIEWS = f"""
DROP VIEW IF EXISTS final_grades;
DROP VIEW IF EXISTS counted_submissions;
DROP VIEW IF EXISTS counted_answers;
DROP VIEW IF EXISTS answers;
DROP VIEW IF EXISTS submission_flags;
CREATE VIEW submission_flags AS
SELECT sha256, student_id, created_utc, added_utc,
       COUNT(*) OVER (PARTITION BY student_id) AS files,
       CASE
           WHEN julianday(created_utc) <= julianday(added_utc) + {FUTURE_MINUTES} / 1440.0
               THEN NULL
           ELSE 'future'  -- later, or not a date at all (julianday NULL): never unflagged
       END AS flag
FROM submissions
WHERE status = 'valid';
CREATE VIEW answers AS
SELECT f.student_id, r.exercise_id, f.sha256, f.created_utc, f.flag,
       ROW_NUMBER() OVER (
           PARTITION BY f.student_id, r.exercise_id
           ORDER BY f.flag IS NOT NULL, f.created_utc DESC, f.sha256 DESC
       ) AS rank,
       COUNT(*) OVER (PARTITION BY f.student_id, r.exercise_id) AS answers
FROM results AS r
JOIN submission_flags AS f USING (sha256);
CREATE VIEW counted_answers AS
SELECT student_id, exercise_id, sha256, created_utc, flag, answers - 1 AS superseded
FROM answers
WHERE rank = 1;
CREATE VIEW counted_submissions AS
SELECT DISTINCT student_id, sha256, created_utc FROM counted_answers;
CREATE VIEW final_grades AS
SELECT s.student_id,
       e.id AS exercise_id,
       e.position,
       e.points AS max_points,
       c.sha256,
       c.created_utc,
       c.flag,
       c.superseded,
       r.status,
       r.points AS graded_points,
       o.points AS override_points,
       o.reason AS override_reason,
       COALESCE(o.points, r.points) AS points,
       r.message,
       r.checks
FROM students AS s
CROSS JOIN exercises AS e
LEFT JOIN counted_answers AS c ON c.student_id = s.student_id AND c.exercise_id = e.id
LEFT JOIN results AS r ON r.sha256 = c.sha256 AND r.exercise_id = e.id
LEFT JOIN overrides AS o ON o.student_id = s.student_id AND o.exercise_id = e.id;
"""


# The marks of code in progress (course_lib.grading.inprogress): a table of their own, created
# in any gradebook format, apart from SCHEMA and its views.
IN_PROGRESS_SCHEMA = """
CREATE TABLE IF NOT EXISTS in_progress (
    sha256 TEXT NOT NULL REFERENCES submissions (sha256),
    run TEXT NOT NULL,
    exercise_id TEXT NOT NULL,
    started_utc TEXT NOT NULL,
    PRIMARY KEY (sha256, run)
);
"""


class GradebookError(RuntimeError):
    """The gradebook cannot be used as asked; the message says why."""


def owner_only(path: Path) -> None:
    """Create ``path`` empty, readable and writable by its owner only (0600), or make an
    existing file of ours so (another user's file keeps its mode). SQLite gives its journal
    and WAL files the database file's mode."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    try:
        if os.fstat(fd).st_uid == os.geteuid():
            os.fchmod(fd, 0o600)
    finally:
        os.close(fd)


def utc_now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Gradebook:
    """An open gradebook file; create it with ``Gradebook(path)``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            owner_only(self.path)
            self.db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
            self.db.row_factory = sqlite3.Row
            self.db.execute("PRAGMA foreign_keys = ON")
            version = self.db.execute("PRAGMA user_version").fetchone()[0]
        except sqlite3.DatabaseError as error:
            raise GradebookError(f"{self.path} is not a gradebook ({error})") from None
        except OSError as error:
            raise GradebookError(f"{self.path} cannot be opened ({error.strerror})") from None
        if version > FORMAT_VERSION:
            raise GradebookError(
                f"{self.path} was written by a newer course_lib (gradebook format {version}); "
                f"this one reads format {FORMAT_VERSION}"
            )
        try:
            self.db.executescript(
                f"BEGIN IMMEDIATE;\n{SCHEMA}\n{VIEWS}\n"
                f"PRAGMA user_version = {FORMAT_VERSION};\nCOMMIT;"
            )
        except sqlite3.DatabaseError as error:
            raise GradebookError(f"{self.path} cannot be used as a gradebook ({error})") from None
        self.db.executescript(IN_PROGRESS_SCHEMA)  # kept apart from SCHEMA: see its comment

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Gradebook:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def transaction(self):
        """``with book.transaction(): ...`` commits at the end, or rolls back on an error."""
        return _Transaction(self.db)

    # ----------------------------------------------------------------- meta

    def get_meta(self, key: str) -> str | None:
        row = self.db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else row[0]

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction():
            self.db.execute(
                "INSERT INTO meta (key, value) VALUES (?, ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (key, value),
            )

    @property
    def seed(self) -> int | None:
        value = self.get_meta("seed")
        return None if value is None else int(value)

    def set_exercises(self, exercises: Sequence[Exercise]) -> None:
        """Record the course's exercises (the CSV has a column for each, in this order)."""
        with self.transaction():
            self.db.execute("DELETE FROM exercises")
            self.db.executemany(
                "INSERT INTO exercises (id, chapter, kind, title, points, position) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                [(e.id, e.chapter, e.kind, e.title, e.points, i) for i, e in enumerate(exercises)],
            )

    def exercises(self) -> list[sqlite3.Row]:
        return self.db.execute("SELECT * FROM exercises ORDER BY position").fetchall()

    # ----------------------------------------------------------------- submissions

    def add_file(self, record: SubmissionFile) -> bool:
        """Record a file read; ``True`` if its content was new to the gradebook. Its path and
        message are stored :func:`~course_lib.grading.text.storable` (a file name that is not
        UTF-8 holds surrogates; a message can quote the file)."""
        now = utc_now()
        with self.transaction():
            if record.student_id is not None:
                self.db.execute(
                    "INSERT OR IGNORE INTO students (student_id, first_seen_utc) VALUES (?, ?)",
                    (storable(record.student_id, NAME_LIMIT), now),
                )
            cursor = self.db.execute(
                "INSERT OR IGNORE INTO submissions (sha256, student_id, created_utc, status, "
                "message, size, content, added_utc) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    record.sha256,
                    None if record.student_id is None else storable(record.student_id, NAME_LIMIT),
                    record.created_utc,
                    "valid" if record.valid else "invalid",
                    storable(record.message, MESSAGE_LIMIT),
                    record.size,
                    record.content,
                    now,
                ),
            )
            self.db.execute(
                "INSERT OR IGNORE INTO submission_files (sha256, path, seen_utc) VALUES (?, ?, ?)",
                (record.sha256, storable(record.path, PATH_LIMIT), now),
            )
        return cursor.rowcount == 1

    def valid_submissions(self, students: Iterable[str] | None = None) -> list[sqlite3.Row]:
        """Every valid file (student_id, sha256, created_utc), of ``students`` if given; each
        is graded, and its answers count where no better answer of the student does."""
        rows = self.db.execute(
            "SELECT student_id, sha256, created_utc FROM submissions WHERE status = 'valid' "
            "ORDER BY student_id, created_utc, sha256"
        ).fetchall()
        if students is None:
            return rows
        chosen = set(students)
        return [row for row in rows if row["student_id"] in chosen]

    def counted(self) -> list[sqlite3.Row]:
        """The files whose answers count, for each student (student_id, sha256,
        created_utc)."""
        return self.db.execute(
            "SELECT * FROM counted_submissions ORDER BY student_id, created_utc, sha256"
        ).fetchall()

    def answers(self) -> list[sqlite3.Row]:
        """Every answer of every valid file: student_id, exercise_id, sha256, created_utc,
        flag, ``rank`` (1: the answer that counts) and how many ``answers`` the student gave
        to that exercise."""
        return self.db.execute(
            "SELECT * FROM answers ORDER BY student_id, exercise_id, rank"
        ).fetchall()

    def flags(self) -> list[sqlite3.Row]:
        """Every valid file with its ``flag`` (``None`` or ``'future'``) and the number of
        valid ``files`` of its student."""
        return self.db.execute(
            "SELECT * FROM submission_flags ORDER BY student_id, created_utc, sha256"
        ).fetchall()

    def document(self, sha256: str) -> dict[str, Any]:
        row = self.db.execute(
            "SELECT content FROM submissions WHERE sha256 = ?", (sha256,)
        ).fetchone()
        return json.loads(row[0])

    def file_of(self, sha256: str) -> tuple[str | None, str | None]:
        """The student of a submission and a path it was read from (the first by name)."""
        row = self.db.execute(
            "SELECT s.student_id, MIN(f.path) FROM submissions s "
            "LEFT JOIN submission_files f USING (sha256) WHERE s.sha256 = ?",
            (sha256,),
        ).fetchone()
        return (None, None) if row is None else (row[0], row[1])

    def is_graded(self, sha256: str, seed: int) -> bool:
        row = self.db.execute(
            "SELECT 1 FROM gradings WHERE sha256 = ? AND seed = ?", (sha256, seed)
        ).fetchone()
        return row is not None

    def save_grades(self, sha256: str, grades: Iterable[Grade], seed: int) -> None:
        """Replace the results of a submission with ``grades``, marking it graded (and no
        longer in progress).

        Every text a grade holds came from an answer (messages, check messages, printed
        output, type names) and is stored :func:`~course_lib.grading.text.storable`: escaped
        where SQLite, a CSV file, an HTML page or a terminal would choke on it or obey it, and
        cut to ``MESSAGE_LIMIT``, ``CHECK_MESSAGE_LIMIT`` and ``OUTPUT_LIMIT`` characters
        (at most ``MAX_CHECKS`` checks). A grade that still cannot be stored raises, and
        nothing of the submission is changed."""
        rows = [stored_grade(sha256, g) for g in grades]
        with self.transaction():
            self.db.execute("DELETE FROM in_progress WHERE sha256 = ?", (sha256,))
            self.db.execute("DELETE FROM results WHERE sha256 = ?", (sha256,))
            self.db.executemany(
                "INSERT INTO results (sha256, exercise_id, status, points, max_points, message, "
                "checks, output, seconds) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            self.db.execute(
                "INSERT INTO gradings (sha256, seed, graded_utc, course_lib_version) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (sha256) DO UPDATE SET seed = excluded.seed, "
                "graded_utc = excluded.graded_utc, "
                "course_lib_version = excluded.course_lib_version",
                (sha256, seed, utc_now(), course_lib.__version__),
            )

    def graded_submissions(self) -> set[str]:
        return {r[0] for r in self.db.execute("SELECT sha256 FROM gradings")}

    def forget_grades(self, sha256s: Iterable[str]) -> int:
        """Mark submissions as not graded (their results go at the next grading)."""
        shas = list(sha256s)
        with self.transaction():
            self.db.executemany("DELETE FROM gradings WHERE sha256 = ?", [(s,) for s in shas])
        return len(shas)

    def invalid_files(self) -> list[sqlite3.Row]:
        return self.db.execute(
            "SELECT s.sha256, s.student_id, s.message, MIN(f.path) AS path FROM submissions s "
            "JOIN submission_files f USING (sha256) WHERE s.status = 'invalid' "
            "GROUP BY s.sha256 ORDER BY path"
        ).fetchall()

    # ----------------------------------------------------------------- code in progress

    def mark_running(self, sha256: str, exercise_id: str, run: str) -> None:
        """Record (committed) that run ``run`` is about to run ``exercise_id`` of a
        submission; it replaces the run's earlier mark for that submission."""
        with self.transaction():
            self.db.execute(
                "INSERT INTO in_progress (sha256, run, exercise_id, started_utc) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (sha256, run) DO UPDATE SET "
                "exercise_id = excluded.exercise_id, started_utc = excluded.started_utc",
                (sha256, run, exercise_id, utc_now()),
            )

    def running_marks(self) -> list[sqlite3.Row]:
        """Every mark of code in progress (sha256, run, exercise_id, started_utc)."""
        return self.db.execute("SELECT * FROM in_progress ORDER BY started_utc").fetchall()

    def clear_running(self, run: str) -> None:
        """Remove the marks of run ``run``."""
        with self.transaction():
            self.db.execute("DELETE FROM in_progress WHERE run = ?", (run,))

    # ----------------------------------------------------------------- overrides

    def students(self) -> list[str]:
        return [
            r[0] for r in self.db.execute("SELECT student_id FROM students ORDER BY student_id")
        ]

    def set_override(
        self, student_id: str, exercise_id: str, points: int | None, reason: str
    ) -> None:
        """Set (or with ``points=None`` remove) the points of a student for an exercise."""
        now = utc_now()
        with self.transaction():
            if points is None:
                self.db.execute(
                    "DELETE FROM overrides WHERE student_id = ? AND exercise_id = ?",
                    (student_id, exercise_id),
                )
            else:
                self.db.execute(
                    "INSERT INTO overrides (student_id, exercise_id, points, reason, set_utc) "
                    "VALUES (?, ?, ?, ?, ?) ON CONFLICT (student_id, exercise_id) DO UPDATE "
                    "SET points = excluded.points, reason = excluded.reason, "
                    "set_utc = excluded.set_utc",
                    (student_id, exercise_id, points, storable(reason, MESSAGE_LIMIT), now),
                )
            self.db.execute(
                "INSERT INTO override_log (student_id, exercise_id, points, reason, set_utc) "
                "VALUES (?, ?, ?, ?, ?)",
                (student_id, exercise_id, points, storable(reason, MESSAGE_LIMIT), now),
            )

    def override(self, student_id: str, exercise_id: str) -> sqlite3.Row | None:
        return self.db.execute(
            "SELECT * FROM overrides WHERE student_id = ? AND exercise_id = ?",
            (student_id, exercise_id),
        ).fetchone()

    # ----------------------------------------------------------------- reports

    def final_grades(self) -> list[sqlite3.Row]:
        return self.db.execute(
            "SELECT * FROM final_grades ORDER BY student_id, position"
        ).fetchall()

    def student_files(self) -> dict[str, list[sqlite3.Row]]:
        """Every file of each student, newest first."""
        rows = self.db.execute(
            "SELECT student_id, sha256, status, message, created_utc FROM submissions "
            "WHERE student_id IS NOT NULL ORDER BY student_id, created_utc DESC, sha256 DESC"
        ).fetchall()
        files: dict[str, list[sqlite3.Row]] = {}
        for row in rows:
            files.setdefault(row["student_id"], []).append(row)
        return files


def _finite(seconds: object) -> float:
    """Seconds as a number SQLite keeps (NaN would become NULL): else 0."""
    try:
        value = float(seconds)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        return 0.0
    return round(value, 3) if math.isfinite(value) else 0.0


def stored_checks(checks: Sequence[Any]) -> str:
    """The checks of a grade as the JSON stored in ``results.checks``: each check's name and
    message :func:`~course_lib.grading.text.storable`, at most ``MAX_CHECKS`` of them (the
    last entry then says how many more there were and the status of the first that did not
    pass)."""
    kept = checks if len(checks) <= MAX_CHECKS else checks[: MAX_CHECKS - 1]
    entries = [
        {
            "name": storable(check.name, NAME_LIMIT),
            "status": storable(check.status, NAME_LIMIT),
            "message": storable(check.message, CHECK_MESSAGE_LIMIT, lines=True),
        }
        for check in kept
    ]
    rest = checks[len(kept) :]
    if rest:
        failed = [c.status for c in rest if c.status != "pass"]
        entries.append(
            {
                "name": "(more checks)",
                "status": storable(failed[0] if failed else "pass", NAME_LIMIT),
                "message": f"{len(rest)} more checks were not stored "
                f"({len(failed)} of them did not pass)",
            }
        )
    return json.dumps(entries, ensure_ascii=False)


def stored_grade(sha256: str, grade: Grade) -> tuple[Any, ...]:
    """The row of ``results`` that stores ``grade`` (see :meth:`Gradebook.save_grades`)."""
    return (
        sha256,
        storable(grade.exercise_id, NAME_LIMIT),
        grade.status,
        int(grade.points),
        int(grade.max_points),
        storable(grade.message, MESSAGE_LIMIT, lines=True),
        stored_checks(tuple(grade.checks)),
        storable(grade.output, OUTPUT_LIMIT, lines=True),
        _finite(grade.seconds),
    )


class _Transaction:
    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind, *exc: object) -> None:
        self.db.execute("COMMIT" if kind is None else "ROLLBACK")
