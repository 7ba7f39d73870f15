"""Subword tokens: byte-level byte-pair encoding (Sennrich et al., 2016; Radford et al., 2019).

A word-level vocabulary (:mod:`course_lib.vocab`) needs ``<unk>`` for every word it has not
seen. Byte-pair encoding (BPE) starts instead from an alphabet that can spell *any* text and
then learns, from a corpus, which neighbouring pieces are worth gluing into one token.

The algorithm, as GPT-2 runs it and as Hugging Face ``tokenizers`` trains it:

1. **Bytes as characters.** A text is cut into its UTF-8 bytes. Each of the 256 byte values is
   shown as one printable character (:func:`byte_alphabet`): the printable ASCII and Latin-1
   bytes stand for themselves, the others (space, newline, control bytes, ...) are moved to
   characters from U+0100 on, so that the space byte is written ``Ġ`` and a newline ``Ċ``.
   These 256 characters are the **base alphabet**: every text is a sequence of them. That is
   why there is no ``<unk>``: whatever the text, emoji or control characters, its bytes are in
   the vocabulary, so nothing is ever unknown; the worst case is one token per byte.
2. **Pre-tokenization** (:func:`split_words`). The text is first cut into words with GPT-2's
   pattern ``'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+``:
   English contractions, runs of letters, of digits or of other symbols (each with at most one
   space in front), and runs of white space. Merges never cross a word boundary.
3. **Training** (:meth:`BytePairEncoding.train`). Count every pair of neighbouring symbols in
   every word, weighted by how often the word occurs. Merge the most frequent pair into a new
   symbol everywhere, update the counts of the pairs around each merge, and repeat until the
   vocabulary has ``vocab_size`` tokens (or no pair is left). Equal counts are broken by the
   ids of the pair: the pair whose first symbol has the smaller id wins, then the second.
4. **Ids.** The special tokens come first (``<pad>`` = 0, ``<bos>`` = 1, ``<eos>`` = 2 by
   default), then the 256 byte characters in code-point order, then one new token per merge,
   in the order learned.
5. **Encoding** (:meth:`BytePairEncoding.encode`). Special tokens in the text are kept whole.
   Each word starts as its byte characters; the learned merges are applied by **rank**: of all
   neighbouring pairs that are merges, the one learned first is merged (the leftmost if it
   occurs twice), until no neighbouring pair is a merge.
6. **Decoding** joins the tokens' byte characters, turns them back into bytes and reads the
   bytes as UTF-8: ``decode(encode(text)) == text`` for every text.

The vocabulary size is a trade-off: more merges make sequences shorter (cheaper attention) but
the embedding table and the output layer larger (``vocab_size * d_model`` parameters each);
:func:`vocabulary_tradeoff` measures both.

Equal to Hugging Face ``tokenizers`` (checked in ``tests/test_tokenization.py``): the same
merges in the same order, the same token ids and the same encodings as ::

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<pad>", "<bos>", "<eos>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=0,
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)

Two deliberate differences: special tokens found in the *training* texts are cut out before
counting (a fresh Hugging Face tokenizer would learn merges inside ``<pad>``), and a special
token is decoded as its own text (Hugging Face passes it through the byte decoder, which only
matters for special tokens with non-ASCII characters). Character classes (letter, number,
white space) come from :mod:`unicodedata`, so characters that are new in a later Unicode
version than Python's may be split differently.
"""

from __future__ import annotations

import heapq
import itertools
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from course_lib._checks import integer, positive_int

__all__ = [
    "SPECIAL_TOKENS",
    "BytePairEncoding",
    "TradeoffRow",
    "byte_alphabet",
    "bytes_to_symbols",
    "split_words",
    "symbols_to_bytes",
    "train_bpe",
    "vocabulary_tradeoff",
]

SPECIAL_TOKENS: tuple[str, ...] = ("<pad>", "<bos>", "<eos>")
"""The default special tokens, at ids 0, 1, 2 (no ``<unk>``: nothing is ever unknown)."""

Pair = tuple[int, int]
"""Two neighbouring symbols, as token ids."""


# --------------------------------------------------------------------------- bytes as characters


def _byte_characters() -> dict[int, str]:
    """GPT-2's table byte -> printable character (the bytes that print stay themselves)."""
    printable = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    table = {byte: chr(byte) for byte in printable}
    moved = (byte for byte in range(256) if byte not in table)
    for offset, byte in enumerate(moved):  # the 68 others go to U+0100, U+0101, ... in order
        table[byte] = chr(256 + offset)
    return table


_BYTE_TO_SYMBOL: dict[int, str] = _byte_characters()
_SYMBOL_TO_BYTE: dict[str, int] = {symbol: byte for byte, symbol in _BYTE_TO_SYMBOL.items()}


def byte_alphabet() -> list[str]:
    """The 256 characters that stand for the 256 byte values, in code-point order.

    They are the base alphabet of every :class:`BytePairEncoding` (ids right after the special
    tokens). ``byte_alphabet()[:3]`` is ``['!', '"', '#']``; the space byte is ``'Ġ'``.
    """
    return sorted(_BYTE_TO_SYMBOL.values())


def bytes_to_symbols(data: bytes) -> str:
    """Write bytes with the byte alphabet: ``bytes_to_symbols(b" a")`` is ``'Ġa'``."""
    return "".join(_BYTE_TO_SYMBOL[byte] for byte in data)


def symbols_to_bytes(symbols: str) -> bytes:
    """The bytes that a string of the byte alphabet stands for (inverse of bytes_to_symbols)."""
    try:
        return bytes(_SYMBOL_TO_BYTE[symbol] for symbol in symbols)
    except KeyError as error:
        raise ValueError(f"{error.args[0]!r} is not a character of the byte alphabet") from None


# --------------------------------------------------------------------------- pre-tokenization

_CONTRACTIONS = ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d")
# \s of the pattern (Oniguruma's, as in Hugging Face tokenizers): tab to carriage return, NEL,
# and the separators Zs, Zl, Zp. Python's str.isspace() also counts U+001C to U+001F.
_SPACE_CONTROLS = frozenset("\t\n\x0b\x0c\r\x85")


def _character_class(char: str) -> str:
    """'letter' (\\p{L}), 'number' (\\p{N}), 'space' (\\s) or 'other'."""
    category = unicodedata.category(char)
    if category[0] == "L":
        return "letter"
    if category[0] == "N":
        return "number"
    if char in _SPACE_CONTROLS or category in ("Zs", "Zl", "Zp"):
        return "space"
    return "other"


def _run_end(classes: Sequence[str], start: int, kind: str) -> int:
    """The index after the run of characters of class ``kind`` that begins at ``start``."""
    end = start
    while end < len(classes) and classes[end] == kind:
        end += 1
    return end


def _word_end(text: str, classes: Sequence[str], start: int) -> int:
    """The index after the pre-token that begins at ``start`` (one match of GPT-2's pattern).

    The pattern's alternatives are tried in order, as a regular-expression engine does.
    """
    for contraction in _CONTRACTIONS:  # 's|'t|'re|'ve|'m|'ll|'d
        if text.startswith(contraction, start):
            return start + len(contraction)
    # ' ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+': an optional space, then a run of one class
    body = start + 1 if text[start] == " " and start + 1 < len(text) else start
    if classes[body] != "space":
        return _run_end(classes, body, classes[body])
    # '\s+(?!\S)|\s+': white space, leaving its last character to the word that follows
    end = _run_end(classes, start, "space")
    if end == len(text) or end - start == 1:
        return end
    return end - 1


def split_words(text: str) -> list[str]:
    """Cut ``text`` into GPT-2's pre-tokens; joined again, they give back ``text``.

    Example:
        >>> split_words("It's 2 o'clock,  see?")
        ['It', "'s", ' 2', ' o', "'", 'clock', ',', ' ', ' see', '?']
    """
    classes = [_character_class(char) for char in text]
    words, start = [], 0
    while start < len(text):
        end = _word_end(text, classes, start)
        words.append(text[start:end])
        start = end
    return words


# --------------------------------------------------------------------------- checks


def _check_text(name: str, text: object) -> str:
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {text!r} of type {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise ValueError(
            f"{name} holds the lone surrogate {text[error.start]!r} at index {error.start}: it "
            "is not valid Unicode text and has no UTF-8 bytes"
        ) from None
    return text


def _check_texts(texts: object) -> Iterable[str]:
    if isinstance(texts, str):
        raise TypeError(
            f"texts must be an iterable of strings such as ['one', 'two'], got the string "
            f"{texts[:40]!r}; put it in a list"
        )
    return (_check_text(f"text {number}", text) for number, text in enumerate(texts))  # type: ignore[call-overload]


def _check_special_tokens(special_tokens: object) -> tuple[str, ...]:
    if isinstance(special_tokens, str):
        raise TypeError(
            f"special_tokens must be a sequence of strings, got the string {special_tokens!r}"
        )
    tokens = tuple(special_tokens)  # type: ignore[call-overload]
    for token in tokens:
        if not isinstance(token, str) or not token:
            raise ValueError(f"special tokens must be non-empty strings, got {token!r}")
    if len(set(tokens)) != len(tokens):
        raise ValueError(f"special_tokens must be distinct, got {tokens}")
    return tokens


def _check_vocab_size(vocab_size: object, special_tokens: Sequence[str]) -> int:
    vocab_size = positive_int("vocab_size", vocab_size)
    base = len(set(special_tokens) | set(_BYTE_TO_SYMBOL.values()))
    if vocab_size < base:
        raise ValueError(
            f"vocab_size must be at least {base}: the {len(special_tokens)} special tokens and "
            f"the 256 byte characters come before any merge, got {vocab_size}"
        )
    return vocab_size


# --------------------------------------------------------------------------- training


class _Training(NamedTuple):
    """Everything training learned: tokens in id order and every merge as (left, right, new)."""

    tokens: list[str]
    special_tokens: tuple[str, ...]
    base_size: int
    """How many tokens come before the first merge: special tokens and byte alphabet."""
    merge_log: list[tuple[int, int, int]]


def _special_pattern(special_tokens: Sequence[str]) -> re.Pattern[str] | None:
    """A pattern finding special tokens in a text, the longest first where two could match."""
    if not special_tokens:
        return None
    by_length = sorted(special_tokens, key=len, reverse=True)
    return re.compile("(" + "|".join(re.escape(token) for token in by_length) + ")")


def _chunks(text: str, specials: re.Pattern[str] | None) -> list[str]:
    """``text`` cut around its special tokens: ordinary text and special tokens alternate."""
    return [text] if specials is None else specials.split(text)


def _count_words(texts: Iterable[str], special_tokens: Sequence[str]) -> Counter[str]:
    """How often each word (in the byte alphabet) occurs; special tokens are left out."""
    specials = _special_pattern(special_tokens)
    counts: Counter[str] = Counter()
    for text in texts:
        for piece in _chunks(text, specials)[::2]:  # odd places hold the special tokens
            counts.update(bytes_to_symbols(word.encode()) for word in split_words(piece))
    return counts


def _merge_in_word(word: list[int], left: int, right: int, new: int) -> tuple[list[int], list]:
    """Replace every ``left right`` in ``word`` by ``new``, from left to right.

    Returns the new word and the changes of the neighbouring pairs, ``(pair, +1 or -1)``: in
    ``x left right y`` the pairs ``(x, left)`` and ``(right, y)`` disappear and ``(x, new)``
    and ``(new, y)`` appear. The merged pair itself is not reported (it is done).
    """
    merged: list[int] = []
    changes: list[tuple[Pair, int]] = []
    at = 0
    while at < len(word):
        if at + 1 < len(word) and word[at] == left and word[at + 1] == right:
            if merged:  # a symbol before: x (already merged if it was a pair too)
                changes += [((merged[-1], left), -1), ((merged[-1], new), +1)]
            if at + 2 < len(word):  # a symbol after: y
                changes += [((right, word[at + 2]), -1), ((new, word[at + 2]), +1)]
            merged.append(new)
            at += 2
        else:
            merged.append(word[at])
            at += 1
    return merged, changes


def _count_pairs(words: list[list[int]], counts: list[int]) -> tuple[Counter, dict]:
    """Every neighbouring pair's count over the corpus, and the words it occurs in."""
    pair_counts: Counter[Pair] = Counter()
    where: dict[Pair, set[int]] = defaultdict(set)
    for index, word in enumerate(words):
        for pair in itertools.pairwise(word):  # overlapping: 'a a a' holds (a, a) twice
            pair_counts[pair] += counts[index]
            where[pair].add(index)
    return pair_counts, where


def _learn_merges(
    word_counts: Counter[str],
    vocab_size: int,
    special_tokens: tuple[str, ...],
    min_frequency: int,
) -> _Training:
    """Merge the most frequent pair, again and again, until the vocabulary is big enough.

    Counting every pair again after each merge would cost a pass over the corpus per merge.
    Instead the counts are updated around each merge (:func:`_merge_in_word`), and a heap
    holds the candidates: ``(-count, left, right)`` pops the largest count first, equal counts
    by the smaller ids. An entry whose count has changed since it was pushed is pushed again
    with its current count ("lazy" updates). Each entry also carries the words in which its
    pair appeared when it was pushed: the words where the merge has to be made.
    """
    tokens = list(dict.fromkeys([*special_tokens, *byte_alphabet()]))
    token_ids = {token: index for index, token in enumerate(tokens)}
    base_size = len(tokens)
    words = [[token_ids[symbol] for symbol in word] for word in word_counts]
    counts = list(word_counts.values())
    pair_counts, where = _count_pairs(words, counts)
    pushes = itertools.count()  # breaks ties between two entries of the same pair and count
    heap = [(-pair_counts[pair], *pair, next(pushes), found) for pair, found in where.items()]
    heapq.heapify(heap)
    merge_log: list[tuple[int, int, int]] = []
    while len(tokens) < vocab_size and heap:
        stored, left, right, _, found = heapq.heappop(heap)
        count = pair_counts[left, right]
        if -stored != count:  # out of date: back in line with the current count
            heapq.heappush(heap, (-count, left, right, next(pushes), found))
            continue
        if count < 1 or count < min_frequency:
            break
        merged = tokens[left] + tokens[right]
        if merged not in token_ids:  # two different pairs can spell the same token
            token_ids[merged] = len(tokens)
            tokens.append(merged)
        new = token_ids[merged]
        merge_log.append((left, right, new))
        appeared: dict[Pair, set[int]] = defaultdict(set)
        for index in found:
            words[index], changes = _merge_in_word(words[index], left, right, new)
            for pair, change in changes:
                pair_counts[pair] += change * counts[index]
                if change > 0:
                    appeared[pair].add(index)
        for pair, found_in in appeared.items():
            if pair_counts[pair] > 0:
                heapq.heappush(heap, (-pair_counts[pair], *pair, next(pushes), found_in))
    return _Training(tokens, special_tokens, base_size, merge_log)


# --------------------------------------------------------------------------- the tokenizer


class BytePairEncoding:
    """A trained byte-level BPE tokenizer: text -> token ids -> the same text.

    Build one with :meth:`train` (or :func:`train_bpe`). The vocabulary holds the special
    tokens (ids 0, 1, ...), the 256 byte characters, then one token per merge.

    Args:
        tokens: every token in id order: the special tokens, the byte alphabet, the merged
            tokens.
        merges: the merges, ``(left, right)`` pairs of tokens, in the order learned (their
            rank: the earlier, the sooner it is applied).
        special_tokens: the special tokens (all in ``tokens``).

    Example:
        >>> bpe = BytePairEncoding.train(["low lower lowest"] * 10, vocab_size=263)
        >>> bpe.merges
        [('l', 'o'), ('lo', 'w'), ('Ġ', 'low'), ('Ġlow', 'e')]
        >>> bpe.tokens("lowly")
        ['low', 'l', 'y']
    """

    def __init__(
        self,
        tokens: Sequence[str],
        merges: Sequence[tuple[str, str]],
        special_tokens: Sequence[str] = SPECIAL_TOKENS,
    ) -> None:
        self._id_to_token = list(tokens)
        self._token_to_id = {token: index for index, token in enumerate(self._id_to_token)}
        self._special_tokens = _check_special_tokens(special_tokens)
        self._check_table(merges)
        self._merges = [(left, right) for left, right in merges]
        # (left id, right id) -> (rank, id of the merged token)
        ids = self._token_to_id
        self._ranks: dict[Pair, tuple[int, int]] = {
            (ids[left], ids[right]): (rank, ids[left + right])
            for rank, (left, right) in enumerate(self._merges)
        }
        self._specials = _special_pattern(self._special_tokens)
        self._word_cache: dict[str, list[int]] = {}

    def _check_table(self, merges: Sequence[tuple[str, str]]) -> None:
        """Tokens distinct; specials, byte alphabet and every merge's parts and result in it."""
        if len(self._token_to_id) != len(self._id_to_token):
            raise ValueError("tokens must be distinct")
        needed = [*self._special_tokens, *byte_alphabet()]
        needed += [part for left, right in merges for part in (left, right, left + right)]
        missing = [token for token in needed if token not in self._token_to_id]
        if missing:
            raise ValueError(
                "tokens must hold the special tokens, the byte alphabet and the tokens of "
                f"every merge; missing {missing[:5]}"
            )

    # --- training -------------------------------------------------------------------------

    @classmethod
    def train(
        cls,
        texts: Iterable[str],
        vocab_size: int,
        special_tokens: Sequence[str] = SPECIAL_TOKENS,
        *,
        min_frequency: int = 0,
    ) -> BytePairEncoding:
        """Learn merges from ``texts`` until the vocabulary has ``vocab_size`` tokens.

        Args:
            texts: the training corpus, an iterable of strings (one text per item).
            vocab_size: the size to reach, special tokens and the 256 byte characters
                included. Training stops earlier if no pair is left (every word one token) or
                the most frequent pair occurs fewer than ``min_frequency`` times, so
                ``len(bpe)`` can be smaller.
            special_tokens: tokens that get the first ids and are never split or merged;
                where they occur in the texts they are cut out before counting.
            min_frequency: the smallest count a pair needs to be merged (0: no limit).

        Raises:
            TypeError: if ``texts`` is a string or holds something else than strings.
            ValueError: if ``vocab_size`` is smaller than the special tokens plus 256, or a
                special token is empty or repeated.
        """
        training = _train(texts, vocab_size, special_tokens, min_frequency)
        return cls._from_training(training, vocab_size)

    @classmethod
    def _from_training(cls, training: _Training, vocab_size: int) -> BytePairEncoding:
        """The tokenizer that training would have given had it stopped at ``vocab_size``.

        Training stops as soon as the vocabulary reaches ``vocab_size``; nothing before that
        depends on ``vocab_size``, so one long run holds every smaller vocabulary.
        """
        size, log = training.base_size, []
        for left, right, new in training.merge_log:
            if size >= vocab_size:
                break
            log.append((left, right))
            size = max(size, new + 1)  # a merge that spells a known token adds nothing
        # A pair merged twice (it can reappear when two pairs spell the same token) keeps the
        # rank of its last merge, as in Hugging Face tokenizers.
        ranks = {pair: rank for rank, pair in enumerate(log)}
        tokens = training.tokens[:size]
        merges = [(tokens[left], tokens[right]) for left, right in sorted(ranks, key=ranks.get)]
        return cls(tokens, merges, training.special_tokens)

    # --- the table ------------------------------------------------------------------------

    @property
    def merges(self) -> list[tuple[str, str]]:
        """The merges ``(left, right)`` in the order learned, which is the order of use."""
        return list(self._merges)

    @property
    def vocab(self) -> dict[str, int]:
        """The table token -> id (tokens written in the byte alphabet: ``Ġ`` is a space)."""
        return dict(self._token_to_id)

    @property
    def special_tokens(self) -> tuple[str, ...]:
        """The special tokens, in id order (ids 0, 1, ...)."""
        return self._special_tokens

    def __len__(self) -> int:
        return len(self._id_to_token)

    def __repr__(self) -> str:
        return (
            f"BytePairEncoding(size={len(self)}, merges={len(self._merges)}, "
            f"special_tokens={list(self._special_tokens)})"
        )

    def _special_id(self, token: str) -> int:
        if token not in self._special_tokens:
            raise KeyError(
                f"{token} is not one of this tokenizer's special tokens {self._special_tokens}"
            )
        return self._token_to_id[token]

    @property
    def pad_id(self) -> int:
        """Id of ``<pad>`` (0 with the default special tokens)."""
        return self._special_id("<pad>")

    @property
    def bos_id(self) -> int:
        """Id of ``<bos>`` (1 with the default special tokens)."""
        return self._special_id("<bos>")

    @property
    def eos_id(self) -> int:
        """Id of ``<eos>`` (2 with the default special tokens)."""
        return self._special_id("<eos>")

    def token_to_id(self, token: str) -> int:
        """The id of ``token`` (written in the byte alphabet); ``KeyError`` if it has none."""
        try:
            return self._token_to_id[token]
        except KeyError:
            raise KeyError(f"{token!r} is not in the vocabulary ({len(self)} tokens)") from None

    def id_to_token(self, index: int) -> str:
        """The token with id ``index``; ``IndexError`` outside ``[0, len(bpe))``."""
        index = integer("id", index)
        if not 0 <= index < len(self):
            raise IndexError(f"id {index} is outside the vocabulary's range [0, {len(self)})")
        return self._id_to_token[index]

    # --- encoding -------------------------------------------------------------------------

    def _encode_word(self, word: str) -> list[int]:
        """One word (in the byte alphabet) as ids: apply the merges, the lowest rank first."""
        symbols = [self._token_to_id[symbol] for symbol in word]
        while len(symbols) > 1:
            candidates = [
                (self._ranks[pair], at)
                for at, pair in enumerate(itertools.pairwise(symbols))
                if pair in self._ranks
            ]
            if not candidates:
                break
            (_, new), at = min(candidates)  # lowest rank; the leftmost if it occurs twice
            symbols[at : at + 2] = [new]
        return symbols

    def _encode_text(self, text: str) -> list[int]:
        """Ordinary text (no special tokens) as ids, word by word."""
        ids = []
        for word in split_words(text):
            symbols = bytes_to_symbols(word.encode())
            if symbols not in self._word_cache:
                self._word_cache[symbols] = self._encode_word(symbols)
            ids += self._word_cache[symbols]
        return ids

    def encode(self, text: str, *, add_bos: bool = False, add_eos: bool = False) -> list[int]:
        """The token ids of ``text``; special tokens written in the text keep their own id.

        Args:
            text: any string (every character has UTF-8 bytes, so none is unknown).
            add_bos: put ``bos_id`` in front.
            add_eos: put ``eos_id`` at the end.

        Raises:
            TypeError: if ``text`` is not a string.
            ValueError: if ``text`` holds a lone surrogate (not valid Unicode).
        """
        text = _check_text("text", text)
        ids = [self.bos_id] if add_bos else []
        for number, piece in enumerate(_chunks(text, self._specials)):
            ids += [self._token_to_id[piece]] if number % 2 else self._encode_text(piece)
        return ids + ([self.eos_id] if add_eos else [])

    def tokens(self, text: str) -> list[str]:
        """The pieces of ``text`` as tokens of the vocabulary (``Ġ`` stands for a space).

        ``[bpe.vocab[token] for token in bpe.tokens(text)] == bpe.encode(text)``.
        """
        return [self._id_to_token[index] for index in self.encode(text)]

    # --- decoding -------------------------------------------------------------------------

    def decode(self, ids: Sequence[int], *, skip_special: bool = False) -> str:
        """The text of a sequence of ids: ``decode(encode(text)) == text``.

        Special tokens are written as their text (``'<eos>'``) unless ``skip_special``. A
        sequence that stops in the middle of a character's bytes (a model can generate one)
        shows the incomplete character as U+FFFD ``'�'``.

        Raises:
            TypeError: for an id that is not an integer.
            IndexError: for an id outside ``[0, len(bpe))``.
        """
        if isinstance(ids, str):
            raise TypeError(f"ids must be a sequence of integers, got the string {ids!r}")
        data = bytearray()
        for index in ids:
            token = self.id_to_token(index)
            if token in self._special_tokens:
                data += b"" if skip_special else token.encode()
            else:
                data += symbols_to_bytes(token)
        return data.decode("utf-8", errors="replace")


def _train(
    texts: Iterable[str], vocab_size: int, special_tokens: Sequence[str], min_frequency: int
) -> _Training:
    """Check the arguments, count the words, learn the merges."""
    special_tokens = _check_special_tokens(special_tokens)
    vocab_size = _check_vocab_size(vocab_size, special_tokens)
    min_frequency = integer("min_frequency", min_frequency)
    if min_frequency < 0:
        raise ValueError(f"min_frequency must be at least 0, got {min_frequency}")
    word_counts = _count_words(_check_texts(texts), special_tokens)
    return _learn_merges(word_counts, vocab_size, special_tokens, min_frequency)


def train_bpe(
    texts: Iterable[str],
    vocab_size: int,
    special_tokens: Sequence[str] = SPECIAL_TOKENS,
    *,
    min_frequency: int = 0,
) -> BytePairEncoding:
    """Train a byte-level BPE tokenizer: the same as :meth:`BytePairEncoding.train`."""
    return BytePairEncoding.train(texts, vocab_size, special_tokens, min_frequency=min_frequency)


# --------------------------------------------------------------------------- the trade-off


@dataclass(frozen=True)
class TradeoffRow:
    """One vocabulary size of :func:`vocabulary_tradeoff`."""

    vocab_size: int
    """The size asked for."""
    actual_size: int
    """``len(bpe)``: smaller than ``vocab_size`` if the corpus ran out of pairs."""
    num_merges: int
    total_tokens: int
    """Tokens of all the measured texts together."""
    tokens_per_text: float
    bytes_per_token: float
    """UTF-8 bytes per token: 1.0 with no merge, more as tokens grow."""
    embedding_parameters: int
    """``actual_size * d_model``: one embedding row per token (the output layer has as many)."""


def vocabulary_tradeoff(
    texts: Sequence[str],
    vocab_sizes: Sequence[int],
    d_model: int = 512,
    eval_texts: Sequence[str] | None = None,
    special_tokens: Sequence[str] = SPECIAL_TOKENS,
) -> list[TradeoffRow]:
    """Sequence length against table size: train on ``texts``, measure each vocabulary size.

    A bigger vocabulary never makes a text longer (each merge is applied after all earlier
    ones) and makes the embedding table bigger. One training run to the largest size gives
    every smaller vocabulary (training stops at the size, nothing before depends on it).

    Args:
        texts: the training corpus.
        vocab_sizes: the sizes to compare, each at least the special tokens plus 256.
        d_model: the embedding width, for the parameter count (512 in the paper).
        eval_texts: the texts to measure on; ``texts`` if None.
        special_tokens: as in :meth:`BytePairEncoding.train`.

    Returns:
        One :class:`TradeoffRow` per size, in the order given.
    """
    texts = list(_check_texts(texts))
    measured = texts if eval_texts is None else list(_check_texts(eval_texts))
    if not measured:
        raise ValueError("vocabulary_tradeoff needs at least one text to measure")
    d_model = positive_int("d_model", d_model)
    special_tokens = _check_special_tokens(special_tokens)
    sizes = [_check_vocab_size(size, special_tokens) for size in vocab_sizes]
    if not sizes:
        raise ValueError("vocab_sizes must hold at least one size")
    training = _train(texts, max(sizes), special_tokens, 0)
    num_bytes = sum(len(text.encode()) for text in measured)
    rows = []
    for size in sizes:
        bpe = BytePairEncoding._from_training(training, size)
        total = sum(len(bpe.encode(text)) for text in measured)
        rows.append(
            TradeoffRow(
                vocab_size=size,
                actual_size=len(bpe),
                num_merges=len(bpe.merges),
                total_tokens=total,
                tokens_per_text=total / len(measured),
                bytes_per_token=num_bytes / total if total else 0.0,
                embedding_parameters=len(bpe) * d_model,
            )
        )
    return rows
