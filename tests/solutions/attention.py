"""Model answers to the exercises of the chapters "Self-attention", "Multi-head attention" and
"Masking and cross-attention"."""

import math

import torch


def attention(query, key, value, mask=None):
    scores = query @ key.transpose(-2, -1) / math.sqrt(query.size(-1))
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    weights = torch.softmax(scores, dim=-1)
    return weights @ value, weights


def split_heads(x, num_heads):
    batch, length, d_model = x.shape
    return x.view(batch, length, num_heads, d_model // num_heads).transpose(1, 2)


def merge_heads(x):
    batch, num_heads, length, d_head = x.shape
    return x.transpose(1, 2).reshape(batch, length, num_heads * d_head)


def causal_mask(size):
    return torch.ones(size, size, dtype=torch.bool).tril()


SOLUTIONS = {
    "scaled-dot-product-attention": attention,
    "attention-by-hand": "0.284, 0.576, 0.140, 18.560",
    "split-heads": split_heads,
    "merge-heads": merge_heads,
    "mha-parameter-count": "1050624",
    "causal-mask": causal_mask,
    "decoder-attention-positions": "a",
}
