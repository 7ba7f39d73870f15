"""Model answers to the exercises of the chapter "Input embeddings"."""

import torch


def one_hot_embed(ids: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    vocab_size = weight.shape[0]
    one_hot = (ids[..., None] == torch.arange(vocab_size)).to(weight.dtype)  # (*, vocab_size)
    return one_hot @ weight  # (*, d_model)


def make_skipgram_pairs(sentences: list[list[int]], window: int) -> torch.Tensor:
    pairs = []
    for sentence in sentences:
        for i, centre in enumerate(sentence):
            for j in range(max(0, i - window), min(len(sentence), i + window + 1)):
                if j != i:
                    pairs.append([centre, sentence[j]])
    return torch.tensor(pairs, dtype=torch.long).reshape(-1, 2)


SOLUTIONS = {
    "emb-one-hot-lookup": one_hot_embed,
    "emb-gradient-rows": "3, 2",
    "w2v-skipgram-pairs": make_skipgram_pairs,
}
