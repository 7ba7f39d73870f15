"""Model answers to the exercises of the chapters "Training a translator", "The paper's
training recipe", "Decoding and the cost of inference" and "Model families"."""

import math

import torch


def teacher_forcing_loss(logits, tgt_ids, pad_id):
    labels = tgt_ids[:, 1:]  # position t predicts token t + 1
    log_p = torch.log_softmax(logits, dim=-1)
    picked = log_p.gather(-1, labels[..., None])[..., 0]
    real = labels != pad_id
    return -(picked * real).sum() / real.sum()


def learning_rates(steps, d_model, warmup_steps):
    steps = steps.to(torch.float64)
    return d_model**-0.5 * torch.minimum(steps**-0.5, steps * warmup_steps**-1.5)


def smoothed_loss(logits, labels, epsilon, pad_id):
    k = logits.size(-1)
    real = labels != pad_id
    log_p = torch.log_softmax(logits[real], dim=-1)
    target = (1 - epsilon) * torch.nn.functional.one_hot(labels[real], k) + epsilon / k
    return -(target * log_p).sum(-1).mean()


def greedy_decode(model, prompt, eos_id, max_new_tokens):
    ids = prompt
    finished = torch.zeros(ids.size(0), dtype=torch.bool)
    for _ in range(max_new_tokens):
        token = model(ids).argmax(dim=-1)
        token = token.masked_fill(finished, 0)
        ids = torch.cat([ids, token[:, None]], dim=1)
        finished = finished | (token == eos_id)
        if finished.all():
            break
    return ids


def attend_with_cache(x, cached_keys, cached_values, w_q, w_k, w_v):
    q = x @ w_q
    keys = torch.cat([cached_keys, x @ w_k], dim=1)
    values = torch.cat([cached_values, x @ w_v], dim=1)
    weights = torch.softmax(q @ keys.transpose(1, 2) / math.sqrt(q.size(-1)), dim=-1)
    return weights @ values, keys, values


SOLUTIONS = {
    "teacher-forcing-loss": teacher_forcing_loss,
    "held-out-numbers": "a",
    "transformer-schedule": learning_rates,
    "label-smoothed-loss": smoothed_loss,
    "shared-embedding-saving": "37888000",
    "smoothing-perplexity": "a",
    "greedy-decoding": greedy_decode,
    "kv-cache-step": attend_with_cache,
    "decoding-cost": "210",
    "family-for-task": "a",
    "family-for-speech-to-text": "a",
}
