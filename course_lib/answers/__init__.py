"""The answers engine: how an answer to a code exercise runs and is judged.

A student's check (:mod:`course_lib.exercises`) and the instructor's grader
(:mod:`course_lib.grading`) both use this package, and only the names it exports here, so
that an answer earns the same verdict in both. Its modules, in the order an answer meets
them:

- :mod:`~course_lib.answers.source` -- the answer as a self-contained source: the student's
  function with the imports, constants and helpers it uses;
- :mod:`~course_lib.answers.judging` -- before running, an answer that cannot run on its own
  is refused; the exercise's cases are drawn for a seed and become a task; after running,
  the outcome becomes a :class:`Verdict`;
- :mod:`~course_lib.answers.engine` -- the trusted side: starts a fork server and runs a
  task's cases in fresh processes, and reads back what they report, bounded;
- :mod:`~course_lib.answers.runner` -- the fork server and the case processes themselves: a
  script of the standard library and torch alone, which grading runs inside bubblewrap, where
  ``course_lib`` does not exist (with its companions ``_confine``, what a case may not do, and
  ``_refuse``, the computations an exercise forbids);
- :mod:`~course_lib.answers.forbidden` -- the PyTorch operators that the exercises forbid;
- :mod:`~course_lib.answers.compare` -- a result against the reference, within tolerances;
- :mod:`~course_lib.answers.records` -- what passes between them: :class:`Case`,
  :class:`Outcome`, :class:`Check`, :class:`Verdict`.

This package imports nothing of ``course_lib`` outside itself.
"""

from course_lib.answers.compare import compare_results, compare_tensors, describe_type
from course_lib.answers.engine import (
    ENGINE_FOLDER,
    STOP_CHECK,
    Engine,
    EngineLost,
    local_engine,
)
from course_lib.answers.forbidden import ATTENTION, EMBEDDING, ENCODER_LAYER, NORMALIZATION
from course_lib.answers.judging import (
    WHOLE_ANSWER_CHECKS,
    CodeSpec,
    Prepared,
    interpret,
    judge,
    make_task,
    prepare,
    public_cases,
    refusal,
    run_locally,
)
from course_lib.answers.records import (
    CHECK_STATUSES,
    OUTCOME_STATUSES,
    STATUSES,
    Case,
    Check,
    Outcome,
    Verdict,
    check_status,
)
from course_lib.answers.runner import (
    DEFAULT_LIMITS,
    ENGINE_FILES,
    TableScorer,
    descendants,
    process_stat,
    processes,
)
from course_lib.answers.source import FunctionSource, SourceUnavailable, function_source

__all__ = [
    "ATTENTION",
    "CHECK_STATUSES",
    "DEFAULT_LIMITS",
    "EMBEDDING",
    "ENCODER_LAYER",
    "ENGINE_FILES",
    "ENGINE_FOLDER",
    "NORMALIZATION",
    "OUTCOME_STATUSES",
    "STATUSES",
    "STOP_CHECK",
    "WHOLE_ANSWER_CHECKS",
    "Case",
    "Check",
    "CodeSpec",
    "Engine",
    "EngineLost",
    "FunctionSource",
    "Outcome",
    "Prepared",
    "SourceUnavailable",
    "TableScorer",
    "Verdict",
    "check_status",
    "compare_results",
    "compare_tensors",
    "descendants",
    "describe_type",
    "function_source",
    "interpret",
    "judge",
    "local_engine",
    "make_task",
    "prepare",
    "process_stat",
    "processes",
    "public_cases",
    "refusal",
    "run_locally",
]
