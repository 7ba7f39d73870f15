"""Exercises students check as they go, and the submission file they hand in.

In a chapter::

    from course_lib.exercises import ask, check, hint, progress, submit

    def positional_encoding(max_len, d_model):
        ...                                       # your code

    check("positional-encoding", positional_encoding)   # runs the checks, shows the result
    hint("positional-encoding")                         # one more hint each time
    ask("pe-worked-example")                            # a question with a Check button
    progress()                                          # every exercise and its status
    submit("your-student-id")                           # writes submission-....json

Answers, results and hints are remembered in ``$COURSE_LIB_HOME/progress.json`` (default
``~/.course_lib``). Exercises are defined per chapter, e.g. in
:mod:`course_lib.exercises.positional_encoding`, and registered on import.
"""

# The chapters' exercises, in reading order: progress() and submissions list them in the
# order they are registered.
# isort: off
from course_lib.exercises import transformers_at_a_glance
from course_lib.exercises import input_embeddings
from course_lib.exercises import positional_encoding
from course_lib.exercises import self_attention
from course_lib.exercises import multi_head_attention
from course_lib.exercises import masking_and_cross_attention
from course_lib.exercises import feed_forward_and_norm
from course_lib.exercises import encoder
from course_lib.exercises import decoder
from course_lib.exercises import training_a_translator
from course_lib.exercises import training_recipe
from course_lib.exercises import decoding_and_inference_cost
from course_lib.exercises import model_families
from course_lib.exercises import rotary_positions
from course_lib.exercises import rmsnorm_and_gated_ffn
from course_lib.exercises import attention_at_scale
from course_lib.exercises import a_modern_decoder

# isort: on
from course_lib.answers import Case, Check
from course_lib.exercises._registry import (
    ChoiceExercise,
    CodeExercise,
    Exercise,
    Mistake,
    Option,
    Result,
    UnknownExerciseError,
    ValueExercise,
    get_exercise,
    list_exercises,
)
from course_lib.exercises._store import progress_file
from course_lib.exercises._student import (
    Hints,
    Progress,
    Question,
    ask,
    check,
    evaluate,
    hint,
    progress,
)
from course_lib.exercises.submission import (
    SubmissionError,
    read_submission,
    submit,
)

__all__ = [
    "Case",
    "Check",
    "ChoiceExercise",
    "CodeExercise",
    "Exercise",
    "Hints",
    "Mistake",
    "Option",
    "Progress",
    "Question",
    "Result",
    "SubmissionError",
    "UnknownExerciseError",
    "ValueExercise",
    "a_modern_decoder",
    "ask",
    "attention_at_scale",
    "check",
    "decoder",
    "decoding_and_inference_cost",
    "encoder",
    "evaluate",
    "feed_forward_and_norm",
    "get_exercise",
    "hint",
    "input_embeddings",
    "list_exercises",
    "masking_and_cross_attention",
    "model_families",
    "multi_head_attention",
    "positional_encoding",
    "progress",
    "progress_file",
    "read_submission",
    "rmsnorm_and_gated_ffn",
    "rotary_positions",
    "self_attention",
    "submit",
    "training_a_translator",
    "training_recipe",
    "transformers_at_a_glance",
]
