"""The encoder-decoder Transformer of Vaswani et al. (2017), from token ids to next-token scores.

Source ids ``(batch, L_s)`` -> token embeddings (times ``sqrt(d_model)``) + positional encoding,
once -> :class:`~course_lib.encoder.Encoder` -> memory ``(batch, L_s, d_model)``.

Target ids ``(batch, L_t)`` (the target shifted right: ``<bos>`` first) -> embeddings +
positional encoding, once -> :class:`~course_lib.decoder.Decoder`, reading the memory -> a
linear map to the target vocabulary -> logits ``(batch, L_t, tgt_vocab_size)``. The softmax of
``logits[b, t]`` is the model's distribution over the token at position ``t + 1``.

In training (teacher forcing) every target position is computed in one call: the causal mask
keeps position ``t`` from seeing the positions after it. In generation, :meth:`Transformer.encode`
runs once and :meth:`Transformer.decode` once per new token; with a key/value cache
(:meth:`Transformer.new_cache`) each call feeds the new token only.

Masks are boolean, True where attention is allowed; :meth:`Transformer.source_mask` and
:meth:`Transformer.target_mask` build them from the ids and ``pad_id``.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from course_lib._checks import integer, positive_int, probability, shape_of
from course_lib.attention import causal_mask, padding_mask
from course_lib.cache import DecoderCache
from course_lib.decoder import Decoder
from course_lib.embeddings import TokenEmbedding
from course_lib.encoder import Encoder
from course_lib.positional import PositionalEncoding

__all__ = ["EMBEDDING_SHARING", "Transformer"]

EMBEDDING_SHARING = ("none", "target-output", "all")
"""The values of ``Transformer(tie_embeddings=...)`` (``False`` and ``True`` mean the first two)."""


def _sharing(tie_embeddings: object, src_vocab_size: object, tgt_vocab_size: object) -> str:
    """``tie_embeddings`` as one of :data:`EMBEDDING_SHARING`, checked against the sizes."""
    if isinstance(tie_embeddings, bool):
        return "target-output" if tie_embeddings else "none"
    if tie_embeddings not in EMBEDDING_SHARING:
        raise ValueError(
            f"tie_embeddings must be True, False or one of {EMBEDDING_SHARING}, "
            f"got {tie_embeddings!r}"
        )
    if tie_embeddings == "all" and src_vocab_size != tgt_vocab_size:
        raise ValueError(
            "tie_embeddings='all' shares one matrix between the source and the target "
            "embeddings, so it needs one shared vocabulary: src_vocab_size == tgt_vocab_size, "
            f"got {src_vocab_size} and {tgt_vocab_size}"
        )
    return str(tie_embeddings)


class Transformer(nn.Module):
    """Embeddings, positional encoding, encoder, decoder and the projection to the vocabulary.

    Args:
        src_vocab_size, tgt_vocab_size: sizes of the source and target vocabularies.
        d_model, num_heads, d_ff: sizes of every layer (the paper's base model: 512, 8, 2048).
        num_encoder_layers, num_decoder_layers: ``N`` of each stack (6 and 6 in the paper).
        dropout: dropout probability everywhere: on the embeddings plus positions, the
            attention weights, inside the feed-forward networks and on every sublayer's
            output (0.1 in the paper's base model).
        norm_first: post-norm (False, the paper's) or pre-norm (True) layers.
        final_norm: a layer normalization after each stack; ``None`` means "if
            ``norm_first``" (see :class:`~course_lib.encoder.Encoder`).
        max_len: the longest sequence the positional encoding accepts.
        pad_id: the padding id of both vocabularies (``Vocabulary.pad_id`` is 0), or ``None``
            if the inputs are never padded. Its embedding row starts at zero and is not
            trained, and the masks keep attention away from it.
        tie_embeddings: which matrices are one shared matrix (section 3.4 of the paper):
            ``False`` or ``"none"``: none; ``True`` or ``"target-output"``: the target
            embedding and the output projection's weight; ``"all"``: those two and the source
            embedding, as in the paper, which needs one vocabulary for both languages
            (``src_vocab_size == tgt_vocab_size``). Shared matrices are one ``Parameter``,
            counted once by ``parameters()``; ``state_dict()`` keeps a key for each use.
        activation: of the feed-forward networks, ``"relu"``, ``"gelu"`` or ``"gelu_tanh"``.
        scale_embeddings: multiply the token embeddings by ``sqrt(d_model)`` (the paper's
            section 3.4, the default); False leaves them as they are looked up.

    Shape:
        ``forward(src_ids, tgt_ids)``: ``(batch, L_s)`` and ``(batch, L_t)`` integer ids;
        returns logits ``(batch, L_t, tgt_vocab_size)``.
    """

    def __init__(
        self,
        src_vocab_size: int,
        tgt_vocab_size: int,
        d_model: int = 512,
        num_heads: int = 8,
        num_encoder_layers: int = 6,
        num_decoder_layers: int = 6,
        d_ff: int = 2048,
        dropout: float = 0.1,
        norm_first: bool = False,
        final_norm: bool | None = None,
        max_len: int = 5000,
        pad_id: int | None = 0,
        tie_embeddings: bool | str = False,
        activation: str = "relu",
        scale_embeddings: bool = True,
    ) -> None:
        super().__init__()
        self.tie_embeddings = _sharing(tie_embeddings, src_vocab_size, tgt_vocab_size)
        self.d_model = positive_int("d_model", d_model)
        dropout = probability("dropout", dropout)
        self.pad_id = None if pad_id is None else integer("pad_id", pad_id)
        embedding = {
            "d_model": d_model,
            "padding_idx": self.pad_id,
            "scale": scale_embeddings,
        }
        self.src_embedding = TokenEmbedding(src_vocab_size, **embedding)
        self.tgt_embedding = TokenEmbedding(tgt_vocab_size, **embedding)
        self.positional = PositionalEncoding(d_model, max_len, dropout)
        layers = (d_model, num_heads, d_ff, dropout, norm_first, final_norm)
        self.encoder = Encoder(num_encoder_layers, *layers, activation)
        self.decoder = Decoder(num_decoder_layers, *layers, activation)
        self.output = nn.Linear(d_model, tgt_vocab_size)
        if self.tie_embeddings in ("target-output", "all"):
            self.output.weight = self.tgt_embedding.weight
        if self.tie_embeddings == "all":
            self.src_embedding.weight = self.tgt_embedding.weight

    @classmethod
    def from_torch(
        cls, transformer: nn.Transformer, src_vocab_size: int, tgt_vocab_size: int, **kwargs
    ) -> Transformer:
        """A ``Transformer`` whose encoder and decoder are copies of an ``nn.Transformer``'s.

        ``nn.Transformer`` has no embeddings, positional encoding or output projection: those
        are new, built from ``kwargs`` (``max_len``, ``pad_id``, ``tie_embeddings``). The
        sizes, ``norm_first`` and dropout come from ``transformer``; it adds a final norm to
        both stacks, and so does the result.
        """
        if not isinstance(transformer, nn.Transformer):
            raise TypeError(f"expected a torch.nn.Transformer, got {type(transformer).__name__}")
        encoder = Encoder.from_torch(transformer.encoder)
        decoder = Decoder.from_torch(transformer.decoder)
        first = encoder.layers[0]
        ours = cls(
            src_vocab_size,
            tgt_vocab_size,
            d_model=transformer.d_model,
            num_heads=transformer.nhead,
            num_encoder_layers=len(encoder.layers),
            num_decoder_layers=len(decoder.layers),
            d_ff=first.feed_forward.d_ff,
            dropout=first.dropout1.p,
            norm_first=first.norm_first,
            activation=first.feed_forward.activation,
            **kwargs,
        )
        ours.encoder, ours.decoder = encoder, decoder
        weight = first.norm1.weight
        return ours.to(device=weight.device, dtype=weight.dtype).train(transformer.training)

    # ----------------------------------------------------------------------- masks

    def source_mask(self, src_ids: Tensor) -> Tensor | None:
        """``(batch, 1, L_s)``, True at real source tokens; ``None`` when ``pad_id`` is None.

        Used by the encoder's self-attention and by every decoder layer's cross-attention.
        """
        if self.pad_id is None:
            return None
        return padding_mask(src_ids, self.pad_id)

    def target_mask(self, tgt_ids: Tensor) -> Tensor:
        """The decoder's self-attention mask: causal, and without padding keys.

        ``(batch, L_t, L_t)`` (``(L_t, L_t)`` when ``pad_id`` is None): position ``t`` may
        attend to the real target tokens ``0..t``. Targets are padded on the right (as
        :func:`course_lib.vocab.pad_batch` does), so every position keeps at least ``<bos>``.
        """
        mask = causal_mask(tgt_ids.size(-1), device=tgt_ids.device)
        if self.pad_id is None:
            return mask
        return mask & padding_mask(tgt_ids, self.pad_id)

    # ----------------------------------------------------------------------- the two halves

    def embed_source(self, src_ids: Tensor) -> Tensor:
        """Token embeddings times ``sqrt(d_model)`` plus positions: ``(batch, L_s, d_model)``."""
        return self.positional(self.src_embedding(src_ids))

    def embed_target(self, tgt_ids: Tensor, start: int = 0) -> Tensor:
        """Target embeddings plus positions ``start, start + 1, ...``: ``(batch, L_t, d_model)``."""
        return self.positional(self.tgt_embedding(tgt_ids), start=start)

    def encode(self, src_ids: Tensor, src_mask: Tensor | None = None) -> Tensor:
        """The memory: the encoder's output for the source ids, ``(batch, L_s, d_model)``.

        Args:
            src_ids: ``(batch, L_s)`` source token ids.
            src_mask: the encoder's mask; ``None`` builds :meth:`source_mask` from the ids.
        """
        self._check_ids("src_ids", src_ids)
        if src_mask is None:
            src_mask = self.source_mask(src_ids)
        return self.encoder(self.embed_source(src_ids), src_mask)

    def decode(
        self,
        tgt_ids: Tensor,
        memory: Tensor,
        src_mask: Tensor | None,
        tgt_mask: Tensor | None = None,
        cache: DecoderCache | None = None,
    ) -> Tensor:
        """Next-token logits for every target position, reading the memory.

        Args:
            tgt_ids: ``(batch, L_t)`` target ids so far, starting with ``<bos>``.
            memory: ``(batch, L_s, d_model)`` from :meth:`encode`.
            src_mask: the source padding mask, ``self.source_mask(src_ids)`` (``None``: no
                padding). Required, so that decoding cannot forget it silently.
            tgt_mask: the self-attention mask; ``None`` builds :meth:`target_mask`.
            cache: for generation, a :meth:`new_cache`: ``tgt_ids`` then holds only the
                tokens that follow the ones fed before (their keys and values are in the
                cache, which is updated), they get the positions after them, and the result
                covers the new tokens only. The default mask is the rows of the new
                positions in :meth:`target_mask` of all the ids fed so far.

        Returns:
            ``(batch, L_t, tgt_vocab_size)``: ``logits[b, t]`` scores the token that follows
            position ``t``; its softmax is the predicted distribution.
        """
        self._check_ids("tgt_ids", tgt_ids)
        if cache is not None:
            return self._decode_cached(tgt_ids, memory, src_mask, tgt_mask, cache)
        if tgt_mask is None:
            tgt_mask = self.target_mask(tgt_ids)
        x = self.embed_target(tgt_ids)
        states = self.decoder(x, memory, tgt_mask, src_mask)
        return self.output(states)  # (batch, L_t, tgt_vocab_size)

    def new_cache(self) -> DecoderCache:
        """An empty key/value cache for :meth:`decode`, one per decoder layer."""
        return DecoderCache(len(self.decoder.layers))

    def _decode_cached(
        self,
        tgt_ids: Tensor,
        memory: Tensor,
        src_mask: Tensor | None,
        tgt_mask: Tensor | None,
        cache: DecoderCache,
    ) -> Tensor:
        start = cache.length  # positions fed before
        if cache.ids is not None and cache.ids.size(0) != tgt_ids.size(0):
            raise ValueError(
                f"the cache holds {cache.ids.size(0)} sequences, tgt_ids "
                f"{tuple(tgt_ids.shape)} has {tgt_ids.size(0)}"
            )
        all_ids = tgt_ids if cache.ids is None else torch.cat([cache.ids, tgt_ids], dim=1)
        if tgt_mask is None:  # the rows of the new positions
            tgt_mask = self.target_mask(all_ids)[..., start:, :]
        x = self.embed_target(tgt_ids, start=start)
        states = self.decoder(x, memory, tgt_mask, src_mask, cache=cache)
        cache.ids = all_ids
        return self.output(states)  # (batch, L_new, tgt_vocab_size)

    def forward(self, src_ids: Tensor, tgt_ids: Tensor) -> Tensor:
        """Logits for every target position at once (teacher forcing), with the masks built
        from ``pad_id``: ``(batch, L_t, tgt_vocab_size)``."""
        self._check_ids("src_ids", src_ids)
        self._check_ids("tgt_ids", tgt_ids)
        if src_ids.size(0) != tgt_ids.size(0):
            raise ValueError(
                "src_ids and tgt_ids must have the same batch size, got "
                f"{tuple(src_ids.shape)} and {tuple(tgt_ids.shape)}"
            )
        src_mask = self.source_mask(src_ids)
        memory = self.encode(src_ids, src_mask)
        return self.decode(tgt_ids, memory, src_mask)

    @staticmethod
    def _check_ids(name: str, ids: object) -> None:
        if not isinstance(ids, Tensor) or ids.dim() != 2:
            shape = shape_of(ids)
            raise ValueError(
                f"{name} must be a (batch, length) tensor of token ids, got {shape}; "
                "for one sentence use ids.unsqueeze(0)"
            )
        if ids.size(1) == 0:
            raise ValueError(f"{name} must hold at least one token, got {tuple(ids.shape)}")
