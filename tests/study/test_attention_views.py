"""``plot attention``'s views of every layer at once: the grid (rows the layers, columns the heads,
``position:token`` labels, cross-attention included) and the interactive page (``--html``), tested in a
real headless Chromium: the page shows exactly the weights ``attention_weights`` returns."""

import html
import json
import os
import re
import subprocess

import numpy as np
import pytest
from test_plots import TINY, TINY_GPT, TINY_S2S, needs_matplotlib

from numpy_transformer.cli import main
from numpy_transformer.cli.model_source import open_model
from numpy_transformer.study import plotting
from numpy_transformer.study.attention_html import attention_html
from numpy_transformer.study.attention_maps import attention_weights

CHROMIUM = "/usr/bin/chromium"
needs_chromium = pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"{CHROMIUM} is absent (Debian's "
                                    "chromium package: apt-get install -y chromium; .ci/run installs it)")
ENCODER_TOKENS = "5 9 3 7 2 11 4"


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    d = tmp_path_factory.mktemp("views")
    assert main(TINY + ["--steps", "2", "--dtype", "float64", "--save", str(d / "enc.npz")]) == 0
    assert main(TINY_S2S + ["--steps", "2", "--save", str(d / "s2s.npz")]) == 0
    assert main(TINY_GPT + ["--steps", "2", "--save", str(d / "gpt.npz")]) == 0
    return d


def page_state(page, tmp_path, fragment):
    """Open ``page#fragment`` in headless Chromium and read back the ``<pre id=state>`` its script wrote."""
    done = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", page.as_uri() + "#" + fragment],
                          capture_output=True, text=True, timeout=180)
    found = re.search(r'<pre id="state">(.*?)</pre>', done.stdout, re.S)
    assert found and found.group(1), f"no state in the page's DOM: {done.stdout[:500]} {done.stderr[-500:]}"
    return json.loads(html.unescape(found.group(1)))


def encoder_weights(ckpts):
    model = open_model(str(ckpts / "enc.npz")).model
    ids = np.array([[int(t) for t in ENCODER_TOKENS.split()]])
    return [w[0] for w in attention_weights(model, ids)]                      # L x (H, S, S)


@needs_chromium
@pytest.mark.parametrize("layer,head,token", [(1, 0, 2), (0, 3, 6), (1, "all", 0)])
def test_the_page_shows_the_weights_attention_weights_returns(ckpts, tmp_path, capsys, layer, head, token):
    page = tmp_path / "attention.html"
    assert main(["plot", "attention", str(ckpts / "enc.npz"), "--tokens", ENCODER_TOKENS, "--html", str(page)]) == 0
    assert capsys.readouterr().out.strip().endswith(f"wrote {page}")
    text = page.read_text()
    assert not re.search(r"https?:", text), "the page must not reach the network"
    assert "<script src" not in text and "<link" not in text                     # everything inline
    state = page_state(page, tmp_path, f"layer={layer}&head={head}&token={token}")
    want = encoder_weights(ckpts)[layer]                                          # (H, S, S)
    heads = range(want.shape[0]) if head == "all" else [head]
    assert (state["layer"], state["head"], state["token"]) == (layer, head, token)
    assert state["query"] == f"{token}:{ENCODER_TOKENS.split()[token]}"
    assert state["keys"] == plotting.position_labels(ENCODER_TOKENS.split())
    assert sorted(state["weights"], key=int) == [str(h) for h in heads]
    for h in heads:
        np.testing.assert_allclose(state["weights"][str(h)], want[h, token], rtol=0, atol=1e-6)


@needs_chromium
def test_the_page_of_a_seq2seq_model_shows_its_cross_attention(ckpts, tmp_path, capsys):
    page = tmp_path / "cross.html"
    assert main(["plot", "attention", str(ckpts / "s2s.npz"), "--tokens", "4 8 6 4", "--which", "cross",
                 "--html", str(page)]) == 0
    capsys.readouterr()
    state = page_state(page, tmp_path, "layer=1&head=2&token=0")
    assert state["keys"] == ["0:noun1", "1:verb0", "2:adj0", "3:noun1"]            # the source, position:token
    row = np.array(state["weights"]["2"])
    assert row.shape == (4,) and abs(row.sum() - 1) < 1e-5 and (row > 0).all()


@needs_chromium
def test_the_api_page_in_chromium_and_its_refusals(tmp_path):
    w = np.random.default_rng(0).dirichlet(np.ones(5), size=(2, 3, 4))          # (L, H, S, T)
    page = tmp_path / "api.html"
    text = attention_html(w, out=page, query_labels=["0:a", "1:<b>", "2:c", "3:d"], key_labels=list("vwxyz"))
    assert page.read_text() == text
    state = page_state(page, tmp_path, "layer=1&head=2&token=1")
    assert state["query"] == "1:<b>"
    np.testing.assert_allclose(state["weights"]["2"], w[1, 2, 1], rtol=0, atol=1e-6)
    with pytest.raises(ValueError, match=r"weights must be \(L, H, S, T\)"):
        attention_html(w[0])
    with pytest.raises(ValueError, match="3 query / 5 key labels"):
        attention_html(w, query_labels=list("abc"))


@needs_matplotlib
@pytest.mark.parametrize("ckpt,argv,which", [("enc.npz", ["--tokens", ENCODER_TOKENS], None),
                                             ("s2s.npz", ["--tokens", "4 8 6 4"], "cross"),
                                             ("s2s.npz", ["--tokens", "4 8 6 4", "--which", "self"], None),
                                             ("gpt.npz", ["--tokens", "12+34", "--all"], None)])
def test_the_grid_draws_every_layer_and_head(ckpts, tmp_path, capsys, monkeypatch, ckpt, argv, which):
    """Without --layer (or with --all) every layer's weights go to one grid, labelled position:token."""
    drawn = {}
    original = plotting.plot_attention_grid

    def spy(weights, **kw):
        drawn.update(weights=[np.array(w) for w in weights], **kw)
        return original(weights, **kw)
    monkeypatch.setattr(plotting, "plot_attention_grid", spy)
    out = tmp_path / "grid.png"
    assert main(["plot", "attention", str(ckpts / ckpt), *argv, *(["--which", which] if which else []),
                 "--out", str(out)]) == 0
    capsys.readouterr()
    assert out.stat().st_size > 10_000
    w, rows, cols = drawn["weights"], drawn["query_labels"], drawn["key_labels"]
    assert len(w) == 2 and all(x.shape == (4, len(rows), len(cols)) for x in w)      # 2 layers x 4 heads
    assert all(re.fullmatch(rf"{i}:\S+", r) for i, r in enumerate(rows))
    if ckpt == "enc.npz":
        assert rows == plotting.position_labels(ENCODER_TOKENS.split())
        for got, want in zip(w, encoder_weights(ckpts)):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    if ckpt == "s2s.npz" and which == "cross":
        assert cols == ["0:noun1", "1:verb0", "2:adj0", "3:noun1"] and drawn["key_name"] == "source token"
    if ckpt == "gpt.npz":
        assert rows[:6] == ["0:1", "1:2", "2:+", "3:3", "4:4", "5:="] and rows == cols   # the prompt, then the answer


def test_html_and_layer_together_are_refused(ckpts, tmp_path, capsys):
    assert main(["plot", "attention", str(ckpts / "enc.npz"), "--tokens", ENCODER_TOKENS, "--layer", "1",
                 "--html", str(tmp_path / "x.html")]) == 2
    assert capsys.readouterr().err == "error: --html draws every layer (the page picks one): drop --layer 1\n"
    assert not (tmp_path / "x.html").exists()
