"""Activations on disk (safetensors shards) and the model's own tokenizer, checked against direct computations."""

import string

import pytest
import torch

from iclr26_core.models import tiny_model
from iclr26_gba import GBAError, collect_activations, sae_metrics, train_sae
from iclr26_gba.activation_store import ActivationShardWriter, ActivationStore, write_activations
from iclr26_gba.activations import iter_paragraphs, iter_token_blocks, text_tokenizer


def _write(tmp_path, x, shard_rows, chunk=5):
    w = ActivationShardWriter(tmp_path / "acts", x.shape[1], shard_rows=shard_rows)
    for i in range(0, x.shape[0], chunk):
        w.add(x[i : i + chunk])
    return w.close({"model": "m", "layer": 1})


def test_shards_round_trip_and_views(tmp_path):
    x = torch.randn(53, 6, generator=torch.Generator().manual_seed(0))
    store = _write(tmp_path, x, shard_rows=7)
    assert len(list((tmp_path / "acts").glob("acts-*.safetensors"))) == 8  # 7 full shards + 4 rows
    assert (store.rows, store.d) == (53, 6)
    torch.testing.assert_close(store.read(0, 53), x)
    torch.testing.assert_close(store.read(5, 23), x[5:23])  # spans three shards
    view = store.view(10, 40)
    torch.testing.assert_close(view.head(100), x[10:40])
    torch.testing.assert_close(torch.cat(list(view.chunks(9))), x[10:40])
    again = ActivationStore(tmp_path / "acts")
    assert again.meta == {"model": "m", "layer": 1}
    with pytest.raises(GBAError, match="already holds activations"):
        ActivationShardWriter(tmp_path / "acts", 6)
    with pytest.raises(GBAError, match="outside"):
        store.view(0, 60)


def test_store_batches_visit_every_row_once_per_pass(tmp_path):
    x = torch.arange(64 * 3, dtype=torch.float32).view(64, 3)
    store = ActivationStore(_write(tmp_path, x, shard_rows=10).directory, window_rows=16)
    it = store.batches(8, seed=3)
    first_pass = torch.cat([next(it) for _ in range(8)])
    assert sorted(first_pass[:, 0].tolist()) == x[:, 0].tolist()  # a permutation of all 64 rows
    assert not torch.equal(first_pass, x)  # shuffled
    second = torch.cat([next(it) for _ in range(8)])
    assert sorted(second[:, 0].tolist()) == x[:, 0].tolist()


def test_train_sae_from_a_store_equals_the_rows(tmp_path):
    x = torch.rand(300, 8, generator=torch.Generator().manual_seed(1))
    store = _write(tmp_path, x, shard_rows=64)
    res = train_sae(store, n_neurons=16, steps=12, batch_size=32, n_groups=2, ltf=0.05, every=3)
    # input statistics come from the store's first rows, exactly as from the tensor
    ref = train_sae(x, n_neurons=16, steps=1, batch_size=32, n_groups=2, ltf=0.05, every=3)
    torch.testing.assert_close(res.sae.input_scale, ref.sae.input_scale)
    streamed = sae_metrics(res.sae, store.chunks(50))
    direct = sae_metrics(res.sae, x)
    for key in ("fvu", "l0", "dead_fraction"):
        assert streamed[key] == pytest.approx(direct[key], rel=1e-6, abs=1e-9)


def test_write_activations_equals_hidden_states(tmp_path):
    model = tiny_model("gpt2", n_layer=2, n_embd=32)
    blocks = [torch.randint(3, 512, (4, 10), generator=torch.Generator().manual_seed(i)) for i in range(3)]
    store = write_activations(model, iter(blocks), 1, tmp_path / "a", max_tokens=100, shard_rows=33)
    with torch.no_grad():
        ref = torch.cat([model(input_ids=b, output_hidden_states=True).hidden_states[1] for b in blocks])
    ref = ref.reshape(-1, 32)[:100]
    assert store.rows == 100 and store.meta["layer"] == 1
    torch.testing.assert_close(store.read(0, 100), ref, atol=1e-5, rtol=1e-5)


def test_token_blocks_stream_equals_the_core_blocks():
    from iclr26_core.corpus import token_blocks
    from iclr26_core.tokenizers import char_tokenizer

    tok = char_tokenizer(string.printable)
    texts = [t[:300] for t in list(iter_paragraphs(None))[:150]]
    streamed = torch.cat(list(iter_token_blocks(iter(texts), tok, 32, max_tokens=10**9, batch_blocks=7)))
    torch.testing.assert_close(streamed, token_blocks(texts, tok, 32))
    capped = torch.cat(list(iter_token_blocks(iter(texts), tok, 32, max_tokens=100)))
    assert capped.shape == (4, 32)  # ceil(100 / 32) blocks


def test_text_file_paragraphs(tmp_path):
    f = tmp_path / "t.txt"
    f.write_text("one\nline\n\n\ntwo\n\nthree")
    assert list(iter_paragraphs(f)) == ["one\nline\n", "two\n", "three"]
    f.write_bytes(b"\xff\xfe bad")
    with pytest.raises(GBAError, match="not UTF-8"):
        list(iter_paragraphs(f))


def test_the_models_own_tokenizer_is_used(tmp_path):
    from transformers import AutoTokenizer

    from iclr26_core.tokenizers import char_tokenizer

    model = tiny_model("gpt2", n_layer=2, n_embd=32)
    folder = tmp_path / "m"
    model.save_pretrained(folder)
    char_tokenizer(string.printable[::-1]).save_pretrained(folder)  # a reversed alphabet: its own ids
    tok = text_tokenizer(str(folder), 512, log=lambda m: None)
    ref = AutoTokenizer.from_pretrained(folder)
    assert (
        tok("Hello")["input_ids"]
        == ref("Hello")["input_ids"]
        != char_tokenizer(string.printable)("Hello")["input_ids"]
    )
    bare = tmp_path / "bare"
    model.save_pretrained(bare)
    with pytest.raises(GBAError, match="no tokenizer files") as exc:
        text_tokenizer(str(bare), 512)
    assert "\n" not in str(exc.value)


def test_collect_activations_rejects_foreign_ids():
    model = tiny_model("gpt2", n_layer=2, n_embd=32)
    with pytest.raises(GBAError, match="outside the model's vocabulary"):
        collect_activations(model, torch.full((1, 4), 600), layer=1)
