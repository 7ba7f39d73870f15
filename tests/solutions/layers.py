"""Model answers to the exercises of the chapters "Feed-forward, residuals and layer
normalization", "The encoder" and "The decoder"."""

import math

import torch
import torch.nn.functional as F


def layer_norm(x, gain, bias, eps):
    mean = x.mean(dim=-1, keepdim=True)
    variance = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(variance + eps) * gain + bias


def self_attention(x, mask, w_attention, num_heads):
    """Multi-head self-attention without biases (the helper the chapter gives)."""
    w_q, w_k, w_v, w_o = w_attention
    batch, length, d_model = x.shape
    d_head = d_model // num_heads

    def heads(h):
        return h.view(batch, length, num_heads, d_head).transpose(1, 2)

    q, k, v = heads(x @ w_q), heads(x @ w_k), heads(x @ w_v)
    scores = q @ k.transpose(-2, -1) / math.sqrt(d_head)
    if mask is not None:
        scores = scores.masked_fill(~mask[:, None], float("-inf"))
    mixed = torch.softmax(scores, dim=-1) @ v
    return mixed.transpose(1, 2).reshape(batch, length, d_model) @ w_o


def feed_forward(x, w_1, w_2):
    """The position-wise network without biases (the helper the chapter gives)."""
    return torch.relu(x @ w_1) @ w_2


def encoder_layer(x, mask, w_attention, w_1, w_2, gain, bias, num_heads, norm_first):
    d_model = x.size(-1)

    def norm(h, i):
        return F.layer_norm(h, (d_model,), gain[i], bias[i])

    def attend(h):
        return self_attention(h, mask, w_attention, num_heads)

    def transform(h):
        return feed_forward(h, w_1, w_2)

    if norm_first:
        x = x + attend(norm(x, 0))
        return x + transform(norm(x, 1))
    x = norm(x + attend(x), 0)
    return norm(x + transform(x), 1)


SOLUTIONS = {
    "layer-norm": layer_norm,
    "add-norm-order": "a",
    "add-norm-by-hand": "1.414, -1.414, 0, 0, 4.828, -2.828, 1, 1",
    "encoder-layer": encoder_layer,
    "encoder-layer-parameters": "3152384",
    "teacher-forcing": "a",
}
