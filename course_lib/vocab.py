"""A vocabulary: the table between tokens (strings) and the integer ids a model looks up.

Four special tokens come first, at fixed ids, in every vocabulary of the course:

====  ==========  =================================================================
 id    token       used for
====  ==========  =================================================================
 0     ``<pad>``   filling up short sequences of a batch (:func:`pad_batch`)
 1     ``<bos>``   "beginning of sequence", put in front of a sentence
 2     ``<eos>``   "end of sequence", put after a sentence
 3     ``<unk>``   any token that is not in the vocabulary
====  ==========  =================================================================

The corpus's own tokens follow from id 4 on, the most frequent first.

Masks are boolean and **True at real tokens** (False at padding), the course's convention
(True = allowed), as in :mod:`course_lib.attention`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

import torch
from torch import Tensor

from course_lib._checks import integer, positive_int

__all__ = ["BOS", "EOS", "PAD", "SPECIAL_TOKENS", "UNK", "Vocabulary", "pad_batch"]

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIAL_TOKENS: tuple[str, ...] = (PAD, BOS, EOS, UNK)


def _check_tokens(name: str, tokens: object) -> list[str]:
    """``tokens`` as a list of strings; a lone string is refused (it is a sentence, not split)."""
    if isinstance(tokens, str):
        raise TypeError(
            f"{name} must be a sequence of tokens such as ['the', 'cat'], got the string "
            f"{tokens!r}; split it into tokens first"
        )
    tokens = list(tokens)  # type: ignore[call-overload]
    for token in tokens:
        if not isinstance(token, str):
            raise TypeError(
                f"{name} must hold strings, got {token!r} of type {type(token).__name__}"
            )
    return tokens


class Vocabulary:
    """A fixed table ``token <-> id`` with the special tokens at ids 0 to 3.

    Args:
        tokens: the corpus's tokens in id order; they get the ids 4, 5, ... Duplicates and
            special tokens are not allowed. Usually built with :meth:`from_corpus`.

    Example:
        >>> vocab = Vocabulary.from_corpus([["the", "cat"], ["the", "dog"]])
        >>> vocab.tokens
        ['<pad>', '<bos>', '<eos>', '<unk>', 'the', 'cat', 'dog']
        >>> vocab.encode(["the", "bird"], add_eos=True)
        [4, 3, 2]
    """

    def __init__(self, tokens: Iterable[str] = ()) -> None:
        tokens = _check_tokens("tokens", tokens)
        self._id_to_token: list[str] = list(SPECIAL_TOKENS)
        self._token_to_id: dict[str, int] = {t: i for i, t in enumerate(SPECIAL_TOKENS)}
        for token in tokens:
            if token in self._token_to_id:
                kind = "special token" if token in SPECIAL_TOKENS else "duplicate token"
                raise ValueError(
                    f"tokens must be distinct and not special: {kind} {token!r} (the special "
                    f"tokens {', '.join(SPECIAL_TOKENS)} are always added at ids 0 to 3)"
                )
            self._token_to_id[token] = len(self._id_to_token)
            self._id_to_token.append(token)

    @classmethod
    def from_corpus(
        cls,
        sentences: Iterable[Sequence[str]],
        min_count: int = 1,
        max_size: int | None = None,
    ) -> Vocabulary:
        """Build the vocabulary of a tokenised corpus.

        Tokens are ordered by count, most frequent first, ties in alphabetical order, so the
        same corpus always gives the same ids. Special tokens found in the corpus are not
        counted (they already have their ids).

        Args:
            sentences: the corpus, each sentence a list of tokens.
            min_count: keep only tokens that occur at least this often.
            max_size: if given, the largest ``len(vocab)``, the four special tokens included:
                only the ``max_size - 4`` most frequent tokens are kept.

        Raises:
            TypeError: if a sentence is a string instead of a list of tokens.
            ValueError: if ``min_count`` is not positive or ``max_size`` is below 4.
        """
        min_count = positive_int("min_count", min_count)
        if max_size is not None:
            max_size = integer("max_size", max_size)
            if max_size < len(SPECIAL_TOKENS):
                raise ValueError(
                    f"max_size counts the {len(SPECIAL_TOKENS)} special tokens too, so it must "
                    f"be at least {len(SPECIAL_TOKENS)}, got {max_size}"
                )
        counts: Counter[str] = Counter()
        for number, sentence in enumerate(sentences):
            counts.update(_check_tokens(f"sentence {number}", sentence))
        ordered = sorted(
            (token for token, count in counts.items() if count >= min_count),
            key=lambda token: (-counts[token], token),
        )
        ordered = [token for token in ordered if token not in SPECIAL_TOKENS]
        if max_size is not None:
            ordered = ordered[: max_size - len(SPECIAL_TOKENS)]
        return cls(ordered)

    # --- the special ids ------------------------------------------------------------------

    @property
    def pad_id(self) -> int:
        """Id of ``<pad>`` (0)."""
        return 0

    @property
    def bos_id(self) -> int:
        """Id of ``<bos>`` (1)."""
        return 1

    @property
    def eos_id(self) -> int:
        """Id of ``<eos>`` (2)."""
        return 2

    @property
    def unk_id(self) -> int:
        """Id of ``<unk>`` (3)."""
        return 3

    @property
    def special_ids(self) -> tuple[int, ...]:
        """The ids of the four special tokens, ``(0, 1, 2, 3)``."""
        return tuple(range(len(SPECIAL_TOKENS)))

    # --- lookups --------------------------------------------------------------------------

    @property
    def tokens(self) -> list[str]:
        """Every token in id order (``tokens[i]`` has id ``i``), special tokens first."""
        return list(self._id_to_token)

    def __len__(self) -> int:
        return len(self._id_to_token)

    def __contains__(self, token: object) -> bool:
        return token in self._token_to_id

    def __repr__(self) -> str:
        words = self._id_to_token[len(SPECIAL_TOKENS) :]
        shown = ", ".join(repr(t) for t in words[:5]) + (", ..." if len(words) > 5 else "")
        return f"Vocabulary(size={len(self)}, tokens=[{shown}])"

    def token_to_id(self, token: str) -> int:
        """The id of ``token``; ``KeyError`` if it is not in the vocabulary.

        Use :meth:`encode` to map unknown tokens to ``unk_id`` instead.
        """
        try:
            return self._token_to_id[token]
        except KeyError:
            raise KeyError(
                f"{token!r} is not in the vocabulary ({len(self)} tokens); encode() maps "
                "unknown tokens to <unk>"
            ) from None

    def id_to_token(self, index: int) -> str:
        """The token with id ``index``; ``IndexError`` outside ``[0, len(vocab))``."""
        index = integer("id", index)
        if not 0 <= index < len(self):
            raise IndexError(f"id {index} is outside the vocabulary's range [0, {len(self)})")
        return self._id_to_token[index]

    # --- sentences ------------------------------------------------------------------------

    def encode(
        self, tokens: Sequence[str], add_bos: bool = False, add_eos: bool = False
    ) -> list[int]:
        """The ids of a list of tokens; unknown tokens become ``unk_id``.

        Args:
            tokens: one sentence, a list of tokens (not a string).
            add_bos: put ``bos_id`` in front.
            add_eos: put ``eos_id`` at the end.
        """
        tokens = _check_tokens("tokens", tokens)
        ids = [self._token_to_id.get(token, self.unk_id) for token in tokens]
        return [self.bos_id] * bool(add_bos) + ids + [self.eos_id] * bool(add_eos)

    def decode(self, ids: Iterable[int] | Tensor, skip_special: bool = True) -> list[str]:
        """The tokens of a list of ids (or a 1-D integer tensor).

        Args:
            ids: token ids, each in ``[0, len(vocab))``.
            skip_special: leave out ``<pad>``, ``<bos>`` and ``<eos>``. ``<unk>`` is always
                kept: it stands for a real word that the vocabulary does not know.

        Raises:
            IndexError: for an id outside ``[0, len(vocab))``, naming it.
        """
        if isinstance(ids, Tensor):
            if ids.dim() != 1:
                raise ValueError(
                    f"decode takes one sequence, a 1-D tensor of ids, got shape {tuple(ids.shape)}"
                )
            ids = ids.tolist()
        ids = [integer("id", index) for index in ids]
        skipped = {self.pad_id, self.bos_id, self.eos_id} if skip_special else set()
        return [self.id_to_token(index) for index in ids if index not in skipped]


def _id_row(number: int, sequence: Sequence[int] | Tensor) -> Tensor:
    """Sequence ``number`` of a batch as a 1-D ``torch.long`` tensor, refusing non-integer ids."""
    if isinstance(sequence, Tensor):
        if sequence.dtype == torch.bool or sequence.is_floating_point() or sequence.is_complex():
            raise TypeError(
                f"sequence {number} must hold integer token ids, got a tensor of {sequence.dtype}"
            )
        if sequence.dim() != 1:
            raise ValueError(
                f"each sequence must be 1-D (a list of ids), sequence {number} has shape "
                f"{tuple(sequence.shape)}"
            )
        return sequence.to(torch.long)
    if isinstance(sequence, str):
        raise TypeError(
            f"sequence {number} must be a list of token ids, got the string {sequence!r}"
        )
    return torch.tensor([integer(f"sequence {number}'s id", i) for i in sequence], dtype=torch.long)


def pad_batch(
    sequences: Sequence[Sequence[int] | Tensor], pad_id: int = 0
) -> tuple[Tensor, Tensor]:
    """Stack sequences of different lengths into one batch, padding each on the right.

    Example: ``pad_batch([[5, 6, 7], [8]])`` gives the ids ``[[5, 6, 7], [8, 0, 0]]`` and the
    mask ``[[True, True, True], [True, False, False]]``.

    Args:
        sequences: ``batch`` sequences of token ids (lists or 1-D tensors), at least one.
        pad_id: the id written after the end of shorter sequences (``Vocabulary.pad_id``).

    Returns:
        ``(ids, mask)``: ids, a ``torch.long`` tensor of shape ``(batch, seq)`` with ``seq``
        the longest length, and mask, a bool tensor ``(batch, seq)``, True at real tokens and
        False at padding.

    Raises:
        ValueError: for an empty batch or a sequence that is not 1-D.
    """
    pad_id = integer("pad_id", pad_id)
    rows = [_id_row(number, sequence) for number, sequence in enumerate(sequences)]
    if not rows:
        raise ValueError("pad_batch needs at least one sequence, got an empty batch")
    seq = max(row.numel() for row in rows)
    ids = torch.full((len(rows), seq), pad_id, dtype=torch.long)
    mask = torch.zeros(len(rows), seq, dtype=torch.bool)
    for number, row in enumerate(rows):
        ids[number, : row.numel()] = row
        mask[number, : row.numel()] = True
    return ids, mask
