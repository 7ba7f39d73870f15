"""Specification of course_lib.notebook: showing the library's own code in a chapter."""

import pytest
import torch

from course_lib.notebook import expect_error, fmt, show_source
from course_lib.positional import sinusoidal_positional_encoding


def test_show_source_gives_the_library_code_as_plain_text():
    shown = show_source(sinusoidal_positional_encoding)
    assert repr(shown).startswith("def sinusoidal_positional_encoding(")


def test_show_source_renders_as_a_python_code_block():
    markdown = show_source(sinusoidal_positional_encoding)._repr_markdown_()
    assert markdown.startswith("```python\ndef sinusoidal_positional_encoding(")
    assert markdown.endswith("\n```")


def test_show_source_of_something_without_source_raises_a_clear_error():
    with pytest.raises(TypeError, match="cannot show the source of 3"):
        show_source(3)


def test_show_source_without_docstring_keeps_signature_and_body_only():
    code = repr(show_source(sinusoidal_positional_encoding, docstring=False))
    assert code.startswith("def sinusoidal_positional_encoding(")
    assert '"""' not in code
    assert "return pe.to(dtype=dtype, device=device)" in code


def test_fmt_rounds_with_explicit_signs():
    assert fmt(torch.tensor([0.90929, -0.41615])) == "[+0.909, -0.416]"
    assert fmt([1, 0], digits=1) == "[+1.0, +0.0]"
    assert fmt(-0.5, digits=2) == "-0.50"


def test_fmt_flattens_a_matrix():
    assert fmt(torch.eye(2), digits=0) == "[+1, +0, +0, +1]"


def test_expect_error_prints_the_wrapped_message_and_swallows_the_error(capsys):
    with expect_error(ValueError, width=30) as caught:
        raise ValueError("d_model must be even (sine and cosine come in pairs), got 7")
    printed = capsys.readouterr().out
    assert printed.startswith("ValueError: d_model must be\n    even")
    assert all(len(line) <= 30 for line in printed.splitlines())
    assert isinstance(caught.error, ValueError)


def test_expect_error_fails_when_the_block_raises_nothing():
    with pytest.raises(AssertionError, match="expected ValueError, but the block raised nothing"):
        with expect_error(ValueError):
            pass


def test_expect_error_lets_other_errors_through():
    with pytest.raises(KeyError):
        with expect_error(ValueError):
            raise KeyError("x")
