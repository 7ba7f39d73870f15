"""Specification: course_lib works wherever a student puts a model, on any device, in any dtype.

Nothing that course_lib creates beside a model's tensors may stay on the CPU: ids built from
text, masks, random draws. There is no GPU on the test machine, so the tests use the ``meta``
device (tensors with shapes and no values) and a :class:`DeviceWatch`, a torch function mode
that behaves as strictly as a GPU would:

- an operation that meets a ``meta`` tensor and a CPU tensor (other than a 0-d number, which
  CUDA accepts too) raises, as it would with a CUDA tensor (plain ``meta`` lets some of them
  through, e.g. ``F.embedding`` with CPU ids);
- a random draw with a ``torch.Generator`` of another device than the one it draws on raises,
  as CUDA does ("Expected a 'cuda' device type for generator");
- with ``values=True`` (the value-needing paths: decoding loops, explorers, training losses),
  a value read from a ``meta`` tensor (``bool``, ``int``, ``float``, ``.item()``,
  ``.tolist()``, ``.numpy()``, a copy to the CPU for a figure) answers with zeros, so that the
  code runs to the end on shapes alone.

The same tests run on CUDA, for real, when there is one. Float64 and bfloat16 forward passes
of every model class run on the CPU.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten, tree_map

from course_lib import attention, decoding, embeddings, families, objectives, training, word2vec
from course_lib.decoder import Decoder, DecoderLayer
from course_lib.encoder import Encoder, EncoderLayer
from course_lib.feedforward import FeedForward
from course_lib.positional import PositionalEncoding
from course_lib.recurrence import rnn_stepwise
from course_lib.transformer import Transformer
from course_lib.translation import load_number_translator
from course_lib.vocab import Vocabulary

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
TORCH_2_3 = pytest.mark.skipif(
    not hasattr(torch.amp, "GradScaler"),
    reason="torch < 2.3: no loss scaling on the CPU, and dynamo also breaks graphs at "
    "zip(strict=True) and Tensor.is_complex",
)
VOCAB = 11
BATCH, LENGTH, D_MODEL = 2, 5, 16


# --------------------------------------------------------------------------- the watch


def tree_leaves(tree: object) -> list:
    return tree_flatten(tree)[0]  # torch.utils._pytree.tree_leaves is newer than torch 2.1


def _fake_value(tensor: Tensor) -> object:
    """What a value read from a meta tensor answers: zero of the right kind."""
    if tensor.dtype == torch.bool:
        return False
    return 0.0 if tensor.is_floating_point() else 0


_READS = {
    Tensor.__bool__: _fake_value,
    Tensor.__int__: lambda t: 0,
    Tensor.__index__: lambda t: 0,
    Tensor.__float__: lambda t: 0.0,
    Tensor.item: _fake_value,
    Tensor.tolist: lambda t: np.zeros(tuple(t.shape), dtype=int).tolist(),
    Tensor.numpy: lambda t: np.zeros(tuple(t.shape)),
    Tensor.cpu: lambda t: torch.zeros(t.shape, dtype=t.dtype),
}


# what moving a module or a tensor to a device calls: the two devices meet there on purpose
_MOVES = {Tensor.to, Tensor.copy_, torch._has_compatible_shallow_copy_type}


def _moves_to_cpu(func: object, args: tuple, kwargs: dict) -> bool:
    if func is not Tensor.to:
        return False
    target = [a for a in (*args[1:], kwargs.get("device")) if isinstance(a, (str, torch.device))]
    return bool(target) and torch.device(target[0]).type == "cpu"


class DeviceWatch(TorchFunctionMode):
    """Raise where a GPU would: CPU tensors meeting meta ones, generators of another device.

    Args:
        values: answer value reads from meta tensors with zeros (see the module docstring).
    """

    def __init__(self, values: bool = False) -> None:
        super().__init__()
        self.values = values

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, Tensor)]
        on_meta = any(t.device.type == "meta" for t in tensors)
        if self.values and on_meta and args and isinstance(args[0], Tensor):
            if args[0].device.type == "meta" and func in _READS:
                return _READS[func](args[0])
            if args[0].device.type == "meta" and _moves_to_cpu(func, args, kwargs):
                return torch.zeros(args[0].shape, dtype=args[0].dtype)
            if func is Tensor.__format__:
                return format(_fake_value(args[0]), *args[1:])
        if self.values and func is torch.equal and on_meta:
            return True
        if on_meta and func not in _MOVES and getattr(func, "__name__", "") != "__set__":
            cpu = [t for t in tensors if t.device.type == "cpu" and t.dim() > 0]
            if cpu:
                raise RuntimeError(
                    f"{getattr(func, '__name__', func)} mixes a meta tensor with a CPU tensor "
                    f"of shape {tuple(cpu[0].shape)} (on a GPU: 'Expected all tensors to be on "
                    "the same device')"
                )
        self._check_generator(func, args, kwargs)
        return func(*args, **kwargs)

    @staticmethod
    def _check_generator(func, args, kwargs) -> None:
        generator = kwargs.get("generator")
        if generator is None:
            return
        device = kwargs.get("device")
        if device is None:
            first = next((t for t in tree_leaves(args) if isinstance(t, Tensor)), None)
            device = first.device if first is not None else "cpu"
        if torch.device(device).type != generator.device.type:
            raise RuntimeError(
                f"{getattr(func, '__name__', func)} draws on {device} with a generator of "
                f"{generator.device} (on a GPU: \"Expected a 'cuda' device type for generator\")"
            )


def to_device(value, device):
    return tree_map(lambda t: t.to(device) if isinstance(t, Tensor) else t, value)


# --------------------------------------------------------------------------- forward passes


def _ids(device, high=VOCAB, shape=(BATCH, LENGTH)):
    return torch.randint(1, high, shape, device=device)  # no padding


def _x(device, dtype, length=LENGTH):
    return torch.randn(BATCH, length, D_MODEL, device=device, dtype=dtype)


def _model(module: nn.Module, device, dtype) -> nn.Module:
    torch.manual_seed(0)
    return module.to(device=device, dtype=dtype).eval()


def _transformer(**kwargs) -> Transformer:
    sizes = {"d_model": D_MODEL, "num_heads": 2, "d_ff": 32, "max_len": 32}
    return Transformer(VOCAB, VOCAB, num_encoder_layers=1, num_decoder_layers=1, **sizes, **kwargs)


_SIZES = {"d_model": D_MODEL, "num_heads": 2, "num_layers": 1, "d_ff": 32, "max_len": 32}


def _encoder_only(**kwargs) -> families.EncoderOnlyModel:
    return families.EncoderOnlyModel(VOCAB, **_SIZES, **kwargs)


def _decoder_only(**kwargs) -> families.DecoderOnlyModel:
    return families.DecoderOnlyModel(VOCAB, **_SIZES, **kwargs)


def _causal(device):
    return attention.causal_mask(LENGTH, device=device)


# name -> (device, dtype) -> (output, expected shape); the model classes first
FORWARD = {
    "MultiHeadAttention": lambda d, t: (
        _model(attention.MultiHeadAttention(D_MODEL, 2), d, t)(*[_x(d, t)] * 3, _causal(d))[0],
        (BATCH, LENGTH, D_MODEL),
    ),
    "MultiHeadAttention, fused": lambda d, t: (
        _model(attention.MultiHeadAttention(D_MODEL, 2), d, t)(
            *[_x(d, t)] * 3, _causal(d), need_weights=False
        )[0],
        (BATCH, LENGTH, D_MODEL),
    ),
    "FeedForward": lambda d, t: (
        _model(FeedForward(D_MODEL, 32), d, t)(_x(d, t)),
        (BATCH, LENGTH, D_MODEL),
    ),
    "EncoderLayer": lambda d, t: (
        _model(EncoderLayer(D_MODEL, 2, 32), d, t)(_x(d, t), _causal(d)),
        (BATCH, LENGTH, D_MODEL),
    ),
    "Encoder": lambda d, t: (
        _model(Encoder(2, D_MODEL, 2, 32, norm_first=True), d, t)(
            _x(d, t), attention.padding_mask(_ids(d), 0)
        ),
        (BATCH, LENGTH, D_MODEL),
    ),
    "DecoderLayer": lambda d, t: (
        _model(DecoderLayer(D_MODEL, 2, 32), d, t)(_x(d, t), _x(d, t, 7), _causal(d)),
        (BATCH, LENGTH, D_MODEL),
    ),
    "Decoder": lambda d, t: (
        _model(Decoder(2, D_MODEL, 2, 32), d, t)(_x(d, t), _x(d, t, 7), _causal(d)),
        (BATCH, LENGTH, D_MODEL),
    ),
    "Transformer": lambda d, t: (
        _model(_transformer(), d, t)(_ids(d), _ids(d, shape=(BATCH, 4))),
        (BATCH, 4, VOCAB),
    ),
    "Transformer, tied, unpadded": lambda d, t: (
        _model(_transformer(tie_embeddings="all", pad_id=None), d, t)(_ids(d), _ids(d)),
        (BATCH, LENGTH, VOCAB),
    ),
    "TokenEmbedding": lambda d, t: (
        _model(embeddings.TokenEmbedding(VOCAB, D_MODEL, padding_idx=0, scale=True), d, t)(_ids(d)),
        (BATCH, LENGTH, D_MODEL),
    ),
    "PatchEmbedding": lambda d, t: (
        _model(embeddings.PatchEmbedding(3, 4, D_MODEL), d, t)(
            torch.randn(BATCH, 3, 8, 12, device=d, dtype=t)
        ),
        (BATCH, 6, D_MODEL),
    ),
    "PositionalEncoding": lambda d, t: (
        _model(PositionalEncoding(D_MODEL, max_len=32), d, t)(_x(d, t), start=3),
        (BATCH, LENGTH, D_MODEL),
    ),
    "LearnedPositions": lambda d, t: (
        _model(families.LearnedPositions(32, D_MODEL), d, t)(_x(d, t), start=3),
        (BATCH, LENGTH, D_MODEL),
    ),
    "EncoderOnlyModel": lambda d, t: (
        _model(_encoder_only(positions="learned"), d, t)(_ids(d)),
        (BATCH, LENGTH, VOCAB),
    ),
    "DecoderOnlyModel": lambda d, t: (
        _model(_decoder_only(), d, t)(_ids(d)),
        (BATCH, LENGTH, VOCAB),
    ),
    "SequenceClassifier": lambda d, t: (
        _model(families.SequenceClassifier(_encoder_only(), 3), d, t)(_ids(d)),
        (BATCH, 3),
    ),
    "SkipGram": lambda d, t: (
        _model(word2vec.SkipGram(VOCAB, D_MODEL), d, t)(_ids(d, shape=(BATCH,))),
        (BATCH, D_MODEL),
    ),
    "CBOW": lambda d, t: (
        _model(word2vec.CBOW(VOCAB, D_MODEL), d, t)(
            _ids(d, shape=(BATCH, 4)), torch.ones(BATCH, 4, dtype=torch.bool, device=d)
        ),
        (BATCH, D_MODEL),
    ),
    "nn.RNNCell through rnn_stepwise": lambda d, t: (
        rnn_stepwise(_x(d, t), _model(nn.RNNCell(D_MODEL, 8), d, t)),
        (BATCH, LENGTH, 8),
    ),
}

# functions: losses, masks and the others a model calls
FUNCTIONS = {
    "scaled_dot_product_attention": lambda d, t: (
        attention.scaled_dot_product_attention(*[_x(d, t)] * 3, mask=_causal(d))[0],
        (BATCH, LENGTH, D_MODEL),
    ),
    "one_hot_lookup": lambda d, t: (
        embeddings.one_hot_lookup(_ids(d), torch.randn(VOCAB, D_MODEL, device=d, dtype=t)),
        (BATCH, LENGTH, D_MODEL),
    ),
    "sequence_loss": lambda d, t: (
        training.sequence_loss(torch.randn(BATCH, LENGTH, VOCAB, device=d, dtype=t), _ids(d)),
        (),
    ),
    "label_smoothed_loss": lambda d, t: (
        training.label_smoothed_loss(
            torch.randn(BATCH, LENGTH, VOCAB, device=d, dtype=t), _ids(d), 0.1
        ),
        (),
    ),
    "smoothed_targets": lambda d, t: (
        training.smoothed_targets(_ids(d), VOCAB, 0.1, dtype=t),
        (BATCH, LENGTH, VOCAB),
    ),
    "negative_sampling_loss": lambda d, t: (
        word2vec.negative_sampling_loss(
            torch.randn(BATCH, 8, device=d, dtype=t),
            torch.randn(BATCH, 8, device=d, dtype=t),
            torch.randn(BATCH, 3, 8, device=d, dtype=t),
        ),
        (),
    ),
    "SkipGram.loss with negative sampling": lambda d, t: (
        _model(word2vec.SkipGram(VOCAB, 8), d, t).loss(
            _ids(d, shape=(BATCH,)),
            _ids(d, shape=(BATCH,)),
            noise=torch.full((VOCAB,), 1 / VOCAB, device=d),
            generator=torch.Generator(),
        ),
        (),
    ),
    "mask_tokens with a CPU generator": lambda d, t: (
        objectives.mask_tokens(_ids(d), mask_id=1, generator=torch.Generator().manual_seed(0))[0],
        (BATCH, LENGTH),
    ),
    "pca_2d": lambda d, t: (word2vec.pca_2d(torch.randn(6, 4, device=d, dtype=t)), (6, 2)),
}


@pytest.mark.parametrize("name", [*FORWARD, *FUNCTIONS])
def test_runs_on_the_meta_device_without_a_cpu_tensor(name):
    with DeviceWatch():
        output, shape = {**FORWARD, **FUNCTIONS}[name]("meta", torch.float32)
    assert output.device.type == "meta"
    assert tuple(output.shape) == shape


@CUDA
@pytest.mark.parametrize("name", [*FORWARD, *FUNCTIONS])
def test_runs_on_cuda(name):
    output, shape = {**FORWARD, **FUNCTIONS}[name]("cuda", torch.float32)
    assert output.device.type == "cuda"
    assert tuple(output.shape) == shape
    assert torch.isfinite(output.float()).all()


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
@pytest.mark.parametrize("name", [*FORWARD, *FUNCTIONS])
def test_runs_in_float64_and_bfloat16(name, dtype):
    output, shape = {**FORWARD, **FUNCTIONS}[name]("cpu", dtype)
    assert tuple(output.shape) == shape
    if output.is_floating_point():
        assert output.dtype == dtype
        assert torch.isfinite(output).all()


# --------------------------------------------------------------------------- training


def _fit_settings():
    return {"epochs": 1, "batch_size": 2, "learning_rate": 1e-3}


def _train(name: str, device) -> training.TrainingHistory:
    """Train a small model of family ``name`` on ``device``, its data left on the CPU."""
    ids = torch.randint(1, VOCAB, (4, LENGTH))
    if name == "train_masked_lm":
        model = _model(_encoder_only(), device, torch.float32)
        return objectives.train_masked_lm(model, ids, mask_id=1, **_fit_settings())
    if name == "train_causal_lm":
        model = _model(_decoder_only(), device, torch.float32)
        return objectives.train_causal_lm(model, ids, **_fit_settings())
    if name == "train_classifier":
        model = _model(families.SequenceClassifier(_encoder_only(), 3), device, torch.float32)
        labels = torch.tensor([0, 1, 2, 1])
        return objectives.train_classifier(model, ids, labels, **_fit_settings())
    model = _model(_transformer(), device, torch.float32)
    return training.train_seq2seq(model, ids, ids, label_smoothing=0.1, **_fit_settings())


TRAINERS = ["train_masked_lm", "train_causal_lm", "train_classifier", "train_seq2seq"]


@pytest.mark.parametrize("name", TRAINERS)
def test_training_runs_on_the_meta_device_with_data_on_the_cpu(name):
    with DeviceWatch():
        history = _train(name, "meta")
    assert len(history.step_losses) == 2


@CUDA
@pytest.mark.parametrize("name", TRAINERS)
def test_training_runs_on_cuda_with_data_on_the_cpu(name):
    history = _train(name, "cuda")
    assert all(math.isfinite(loss) for loss in history.step_losses)


# --------------------------------------------------------------------------- values needed


@pytest.fixture(scope="module", params=["meta", pytest.param("cuda", marks=CUDA)])
def device(request):
    return request.param


@pytest.fixture
def watch(device):
    """On meta, the watch that answers value reads; on CUDA, nothing (the GPU is the watch)."""
    if device == "meta":
        with DeviceWatch(values=True):
            yield
    else:
        yield


@pytest.fixture(scope="module")
def moved(device):
    """The shipped translator with its model moved to ``device``."""
    torch.set_num_threads(1)
    translator = load_number_translator()
    translator.model.to(device)
    return translator


def _language_model(device) -> families.DecoderOnlyModel:
    return _model(_decoder_only(), device, torch.float32)


def _prompt(device) -> Tensor:
    return torch.full((BATCH, 1), 2, device=device)


def test_greedy_decoding_stays_on_the_models_device(device, watch):
    model = _language_model(device)
    ids = decoding.greedy_decode(model.next_token_scores, _prompt(device), 3, 4)
    assert ids.device.type == device and ids.size(0) == BATCH


def test_sampling_with_a_cpu_generator_stays_on_the_models_device(device, watch):
    model = _language_model(device)
    generator = torch.Generator().manual_seed(0)
    ids = decoding.sample(model.next_token_scores, _prompt(device), 3, 4, generator=generator)
    assert ids.device.type == device and ids.size(0) == BATCH


def test_beam_search_stays_on_the_models_device(device, watch):
    model = _language_model(device)
    result = decoding.beam_search(model.next_token_scores, _prompt(device), 3, 4, beam_width=2)
    assert result.sequences.device.type == device and result.scores.device.type == device


def test_the_translator_translates_on_the_models_device(moved, device, watch):
    names = moved.translate([21, 1971], beam_width=2)
    assert len(names) == 2
    assert len(moved.translate([7])) == 1


def test_the_translators_analyses_run_on_the_models_device(moved, device, watch):
    assert moved.cross_attention(21).weights.device.type == device
    assert len(moved.alignment_agreement([21, 35])) == len(moved.model.decoder.layers)
    src_ids = moved.source_ids([21])
    assert src_ids.device.type == device
    assert moved.log_probability(src_ids, moved.generate(src_ids)).device.type == device


def test_the_translation_explorers_run_on_the_models_device(moved, device, watch):
    from course_lib.explorers.at_work import DecodingExplorer, TranslatorExplorer

    TranslatorExplorer(moved, "21")
    explorer = DecodingExplorer(moved, number=21, beam_width=2)
    assert explorer.beams.value.count("<tr><td>") == 2


def test_the_sampling_explorer_runs_on_the_models_device(device, watch):
    from course_lib.explorers.at_work import SamplingExplorer

    vocab = Vocabulary([f"w{i}" for i in range(VOCAB - 4)])
    explorer = SamplingExplorer(_language_model(device), vocab, count=2, max_new_tokens=3)
    explorer.set(temperature=0.5, seed=1)
    assert "2 sentences" in explorer.readout.value


def test_the_layer_explorers_run_on_the_models_device(moved, device, watch):
    from course_lib.explorers.building import DecoderExplorer, TokenPathExplorer

    model = moved.model
    english, spanish = moved.source_vocab, moved.target_vocab
    TokenPathExplorer(model.embed_source, model.encoder, english, "twenty one", token=1)
    DecoderExplorer(model, english, spanish, "twenty one", "veintiuno", position=1)


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16])
def test_the_translator_and_the_explorers_run_in_float64_and_bfloat16(dtype):
    from course_lib.explorers.at_work import DecodingExplorer, SamplingExplorer
    from course_lib.explorers.building import DecoderExplorer, TokenPathExplorer

    translator = load_number_translator()
    translator.model.to(dtype)
    assert translator.translate([21]) == ["veintiuno"]
    DecodingExplorer(translator, number=21, beam_width=2)
    model, english = translator.model, translator.source_vocab
    TokenPathExplorer(model.embed_source, model.encoder, english, "twenty one", token=1)
    DecoderExplorer(model, english, translator.target_vocab, "twenty one", "veintiuno")
    vocab = Vocabulary([f"w{i}" for i in range(VOCAB - 4)])
    language_model = _model(_decoder_only(), "cpu", dtype)
    SamplingExplorer(language_model, vocab, count=2, max_new_tokens=3).set(seed=1)


@CUDA
def test_kmeans_runs_on_cuda_with_its_cpu_generator():
    from course_lib.discretize import kmeans

    points = torch.randn(40, 3, device="cuda")
    centroids, assignments = kmeans(points, 4)
    assert centroids.shape == (4, 3) and centroids.device.type == "cuda"
    assert assignments.shape == (40,) and assignments.device.type == "cuda"


# --------------------------------------------------------------------------- mixed precision


def test_fit_refuses_a_float16_model_and_says_why():
    model = _decoder_only().half()
    ids = torch.randint(1, VOCAB, (4, LENGTH))
    with pytest.raises(TypeError, match=r"float16.*(?s:NaN).*autocast=torch\.float16"):
        objectives.train_causal_lm(model, ids, **_fit_settings())


def test_fit_trains_in_bfloat16_autocast_and_keeps_float32_weights():
    torch.manual_seed(0)
    model = _decoder_only()
    ids = torch.randint(1, VOCAB, (8, LENGTH))
    settings = {**_fit_settings(), "epochs": 3, "learning_rate": 1e-2}
    history = objectives.train_causal_lm(model, ids, autocast=torch.bfloat16, **settings)
    assert all(math.isfinite(loss) for loss in history.step_losses)
    assert history.epoch_losses[-1] < history.epoch_losses[0]
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_fit_computes_the_loss_under_autocast():
    model = nn.Linear(4, 3)
    seen = []

    def batch_loss(x: Tensor, y: Tensor) -> Tensor:
        logits = model(x)
        seen.append(logits.dtype)
        return F.cross_entropy(logits.float(), y)

    data = (torch.randn(4, 4), torch.tensor([0, 1, 2, 0]))
    training.fit(model, data, batch_loss, autocast=torch.bfloat16, **_fit_settings())
    assert seen == [torch.bfloat16, torch.bfloat16]


@TORCH_2_3
def test_fit_scales_the_loss_under_float16_autocast():
    torch.manual_seed(0)
    model = _decoder_only()
    ids = torch.randint(1, VOCAB, (8, LENGTH))
    history = objectives.train_causal_lm(model, ids, autocast=torch.float16, **_fit_settings())
    assert all(math.isfinite(loss) for loss in history.step_losses)
    assert all(torch.isfinite(p).all() for p in model.parameters())


@CUDA
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_fit_trains_on_cuda_in_mixed_precision(dtype):
    torch.manual_seed(0)
    model = _model(_decoder_only(), "cuda", torch.float32)
    ids = torch.randint(1, VOCAB, (8, LENGTH))
    history = objectives.train_causal_lm(model, ids, autocast=dtype, **_fit_settings())
    assert all(math.isfinite(loss) for loss in history.step_losses)
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_fit_refuses_an_autocast_dtype_that_is_not_a_half_precision():
    with pytest.raises(ValueError, match=r"autocast must be None, torch\.bfloat16 or"):
        training.fit(
            nn.Linear(2, 2),
            (torch.randn(2, 2),),
            lambda x: x.sum(),
            autocast=torch.float64,
            **_fit_settings(),
        )


# --------------------------------------------------------------------------- compiled


@TORCH_2_3
def test_checks_of_values_do_not_break_a_compiled_graph():
    """The id and mask checks read values in eager mode only: compiled, the Transformer is
    one graph (it was 30, split by 29 breaks at those checks)."""
    torch._dynamo.reset()
    model = _transformer().eval()
    explanation = torch._dynamo.explain(model)(_ids("cpu"), _ids("cpu", shape=(BATCH, 4)))
    assert explanation.graph_break_count == 0
