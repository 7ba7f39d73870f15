"""Input embeddings: what turns the input of a Transformer into vectors of size ``d_model``.

**Tokens.** A trainable lookup table from token ids to vectors (:class:`TokenEmbedding`).

A vocabulary of ``vocab_size`` tokens and an embedding size ``d_model`` give a weight matrix
``W`` of shape ``(vocab_size, d_model)``; token ``i`` is represented by row ``W[i]``. Looking
the row up is the same as multiplying the one-hot vector of ``i`` by ``W``::

    one_hot(i) @ W == W[i]

so an embedding is a linear layer without bias applied to one-hot inputs, computed without ever
building the one-hot vectors. In training, only the rows of the ids in the batch get a gradient.

The Transformer multiplies the looked-up rows by ``sqrt(d_model)`` (Vaswani et al., 2017,
section 3.4); :class:`TokenEmbedding` does so with ``scale=True``.

**Image patches.** Continuous inputs need no vocabulary: the Vision Transformer (Dosovitskiy
et al., 2021) cuts an image into square patches (:func:`patchify`) and maps each flattened
patch to ``d_model`` numbers with one linear layer (:class:`PatchEmbedding`).

For the embeddings that word2vec learns, see :mod:`course_lib.word2vec`.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from course_lib._checks import integer, positive_int, shape_of
from course_lib._devices import values_checkable

__all__ = ["PatchEmbedding", "TokenEmbedding", "check_token_ids", "one_hot_lookup", "patchify"]


def check_token_ids(ids: Tensor, vocab_size: int, name: str = "ids") -> None:
    """Raise unless ``ids`` is an integer tensor with every entry in ``[0, vocab_size)``.

    The range is checked where the values can be read: not on the ``meta`` device, nor
    while ``torch.compile`` traces (see :func:`course_lib._devices.values_checkable`).

    Raises:
        TypeError: if ``ids`` is not a tensor, or a floating-point, complex or bool tensor.
        IndexError: for an id outside ``[0, vocab_size)``, naming the id and where it is.
    """
    if not isinstance(ids, Tensor):
        raise TypeError(
            f"{name} must be a tensor of token ids (torch.long), got {type(ids).__name__}; "
            "use torch.tensor(...)"
        )
    if ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(
            f"{name} must be an integer tensor of token ids (torch.long), got {ids.dtype}; "
            "ids index rows of the table, convert them with .long()"
        )
    if not values_checkable(ids):
        return
    outside = (ids < 0) | (ids >= vocab_size)
    if outside.any():
        where = tuple(int(i) for i in outside.nonzero()[0])
        raise IndexError(
            f"token id {int(ids[where])} at position {where} of {name} is outside "
            f"[0, vocab_size={vocab_size}); {int(outside.sum())} id(s) are out of range"
        )


class TokenEmbedding(nn.Module):
    """The lookup table of a Transformer's input: token ids -> vectors of size ``d_model``.

    Args:
        vocab_size: number of rows, one per token id.
        d_model: embedding size, the length of each row (a hyperparameter).
        padding_idx: optional id (usually ``Vocabulary.pad_id``) whose row starts at zero and
            never receives a gradient, so padding stays the zero vector.
        scale: multiply the looked-up rows by ``sqrt(d_model)`` (Vaswani et al., 2017, 3.4).

    The weight starts as in :class:`torch.nn.Embedding`, ``N(0, 1)``, without scaling; with
    ``scale=True`` it starts as ``N(0, 1/d_model)``, so that after the multiplication by
    ``sqrt(d_model)`` the output's entries have variance 1 either way.

    Shape:
        ``forward(ids)``: ``ids`` is ``(batch, seq)``, the result ``(batch, seq, d_model)``.
        Any shape ``(*)`` works and gives ``(*, d_model)``.
    """

    def __init__(
        self,
        vocab_size: int,
        d_model: int,
        padding_idx: int | None = None,
        scale: bool = False,
    ) -> None:
        super().__init__()
        self.vocab_size = positive_int("vocab_size", vocab_size)
        self.d_model = positive_int("d_model", d_model)
        if padding_idx is not None:
            padding_idx = integer("padding_idx", padding_idx)
            if not 0 <= padding_idx < self.vocab_size:
                raise ValueError(
                    f"padding_idx must be an id in [0, vocab_size={self.vocab_size}), "
                    f"got {padding_idx}"
                )
        self.padding_idx = padding_idx
        self.scale = bool(scale)
        std = 1.0 / math.sqrt(self.d_model) if self.scale else 1.0
        self.weight = nn.Parameter(torch.randn(self.vocab_size, self.d_model) * std)
        if padding_idx is not None:
            with torch.no_grad():
                self.weight[padding_idx].zero_()

    @classmethod
    def from_torch(cls, embedding: nn.Embedding, scale: bool = False) -> TokenEmbedding:
        """A ``TokenEmbedding`` that shares (not copies) the weight of an ``nn.Embedding``.

        Its ``padding_idx`` is taken over; training either module changes both.

        Raises:
            TypeError: if ``embedding`` is not an ``nn.Embedding``.
            ValueError: if it uses ``max_norm``, ``scale_grad_by_freq`` or ``sparse``, which
                ``TokenEmbedding`` does not have.
        """
        if not isinstance(embedding, nn.Embedding):
            raise TypeError(f"expected a torch.nn.Embedding, got {type(embedding).__name__}")
        if embedding.max_norm is not None or embedding.scale_grad_by_freq or embedding.sparse:
            raise ValueError(
                "from_torch takes a plain nn.Embedding; got max_norm="
                f"{embedding.max_norm}, scale_grad_by_freq={embedding.scale_grad_by_freq}, "
                f"sparse={embedding.sparse}"
            )
        vocab_size, d_model = embedding.weight.shape
        module = cls(vocab_size, d_model, padding_idx=embedding.padding_idx, scale=scale)
        module.weight = embedding.weight
        return module

    def forward(self, ids: Tensor) -> Tensor:
        """Look up the rows of ``ids`` (times ``sqrt(d_model)`` if ``scale``).

        Args:
            ids: integer tensor of token ids, ``(batch, seq)``, each in ``[0, vocab_size)``.

        Returns:
            ``(batch, seq, d_model)``.

        Raises:
            TypeError: if ``ids`` is not an integer tensor.
            IndexError: for an id outside ``[0, vocab_size)``, naming it.
        """
        check_token_ids(ids, self.vocab_size)
        vectors = F.embedding(ids, self.weight, padding_idx=self.padding_idx)
        if self.scale:
            vectors = vectors * math.sqrt(self.d_model)
        return vectors

    def extra_repr(self) -> str:
        text = f"vocab_size={self.vocab_size}, d_model={self.d_model}"
        if self.padding_idx is not None:
            text += f", padding_idx={self.padding_idx}"
        return text + f", scale={self.scale}"


def one_hot_lookup(ids: Tensor, weight: Tensor) -> Tensor:
    """``one_hot(ids) @ weight``: the embedding lookup written as a matrix product.

    Builds the one-hot vectors explicitly (wasteful: ``vocab_size`` numbers per token), to show
    that the product picks out exactly the rows ``weight[ids]``.

    Args:
        ids: integer tensor of token ids, ``(batch, seq)`` (any shape ``(*)``).
        weight: the table, ``(vocab_size, d_model)``.

    Returns:
        ``(batch, seq, d_model)`` (in general ``(*, d_model)``), equal to ``weight[ids]``.
    """
    if not isinstance(weight, Tensor):
        raise TypeError(
            f"weight must be a (vocab_size, d_model) tensor, got {type(weight).__name__}"
        )
    if weight.dim() != 2:
        raise ValueError(
            f"weight must be a (vocab_size, d_model) matrix, got {tuple(weight.shape)}"
        )
    check_token_ids(ids, weight.size(0))
    one_hot = F.one_hot(ids.long(), num_classes=weight.size(0)).to(weight.dtype)  # (*, vocab)
    return one_hot @ weight


def patchify(images: Tensor, patch_size: int) -> Tensor:
    """Cut images into square patches and flatten every patch into one vector.

    Patches do not overlap and are listed in reading order: the top row of patches from left
    to right, then the next row. Each patch is flattened channel by channel, and within a
    channel row by row, the order of the weights of a ``Conv2d`` kernel.

    Args:
        images: ``(batch, channels, height, width)``, height and width multiples of
            ``patch_size``.
        patch_size: the side ``p`` of a patch, in pixels.

    Returns:
        ``(batch, num_patches, channels * p * p)`` with
        ``num_patches = (height // p) * (width // p)``: a sequence of vectors.

    Raises:
        ValueError: for images that are not 4-D or whose sides are not multiples of ``p``.
    """
    patch_size = positive_int("patch_size", patch_size)
    if not isinstance(images, Tensor) or images.dim() != 4:
        shape = shape_of(images)
        raise ValueError(f"images must have shape (batch, channels, height, width), got {shape}")
    batch, channels, height, width = images.shape
    if height % patch_size or width % patch_size:
        raise ValueError(
            f"the image sides ({height} x {width}) must be multiples of patch_size={patch_size}"
        )
    rows, columns = height // patch_size, width // patch_size
    grid = images.reshape(batch, channels, rows, patch_size, columns, patch_size)
    grid = grid.permute(0, 2, 4, 1, 3, 5)  # (batch, rows, columns, channels, p, p)
    return grid.reshape(batch, rows * columns, channels * patch_size * patch_size)


class PatchEmbedding(nn.Module):
    """The input layer of a Vision Transformer: image patches -> vectors of size ``d_model``.

    Each flattened patch (:func:`patchify`) goes through one ``nn.Linear`` with bias. This is
    the same computation as a ``Conv2d`` whose kernel size and stride both equal the patch
    size, the form in which ViT implementations often write it.

    Args:
        channels: colour channels of the images (3 for RGB).
        patch_size: side of a square patch, in pixels.
        d_model: size of the output vectors.

    Shape:
        ``forward(images)``: ``(batch, channels, height, width)`` ->
        ``(batch, num_patches, d_model)``.
    """

    def __init__(self, channels: int, patch_size: int, d_model: int) -> None:
        super().__init__()
        self.channels = positive_int("channels", channels)
        self.patch_size = positive_int("patch_size", patch_size)
        self.d_model = positive_int("d_model", d_model)
        self.projection = nn.Linear(self.channels * self.patch_size**2, self.d_model)

    def forward(self, images: Tensor) -> Tensor:
        if isinstance(images, Tensor) and images.dim() == 4 and images.size(1) != self.channels:
            raise ValueError(
                f"expected images with {self.channels} channels, (batch, {self.channels}, "
                f"height, width), got {tuple(images.shape)}"
            )
        return self.projection(patchify(images, self.patch_size))

    def extra_repr(self) -> str:
        return f"channels={self.channels}, patch_size={self.patch_size}, d_model={self.d_model}"
