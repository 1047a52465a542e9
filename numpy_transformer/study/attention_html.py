"""``plot attention --html OUT.html``: one self-contained page to explore every layer's and head's
attention weights, in the manner of BertViz's head view.

The page is a single file: its CSS and JavaScript inline, the weights embedded as JSON, no network
and no server (open it from disk in any browser). You pick a layer, a head (or all heads) and a token:

* the tokens stand in two columns, the queries (rows) on the left and the keys (columns) on the right;
  a line from the chosen query to every key has an opacity equal to its weight (all heads: one colour
  per head);
* a heatmap of the layer's weights (one head, or the mean over the heads), the chosen token's row
  outlined;
* hovering over a token (either column or a heatmap row) or clicking it chooses it.

The selection can be given in the address too, ``page.html#layer=1&head=0&token=2`` (``head=all``):
the page reads it on load and when it changes, and writes the selection and the chosen row's weights
(6 decimals) into ``<pre id="state">`` as JSON. Tests drive a headless Chromium with that address and
read the state from the page's DOM (``chromium --headless --dump-dom``).

NumPy only: :func:`attention_html` builds the text (no matplotlib needed).
"""

from __future__ import annotations

import html
import json
import os

import numpy as np

__all__ = ["attention_html"]

_CSS = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 1.2em; color: #222; }
h1 { font-size: 1.1em; white-space: pre-line; }
#controls label { margin-right: 1.2em; }
#views { display: flex; gap: 2em; align-items: flex-start; flex-wrap: wrap; }
.tok { cursor: pointer; font: 12px monospace; }
.tok.sel { font-weight: bold; fill: #c00; }
#heat td { width: 14px; height: 14px; padding: 0; border: 1px solid #fff; }
#heat td.lab { width: auto; font: 11px monospace; padding: 0 4px; border: none; cursor: pointer; }
#heat tr.sel td.cell { border-top: 1px solid #c00; border-bottom: 1px solid #c00; }
#heat th { font: 10px monospace; writing-mode: vertical-rl; transform: rotate(180deg); font-weight: normal; }
#state { font: 11px monospace; background: #f6f6f6; padding: .5em; white-space: pre-wrap; max-width: 60em; }
"""

_JS = r"""
(function () {
  var D = JSON.parse(document.getElementById("data").textContent);
  var L = D.weights.length, H = D.weights[0].length, S = D.rows.length, T = D.cols.length;
  var sel = {layer: 0, head: 0, token: 0};
  var COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                 "#bcbd22", "#17becf"];
  var $ = function (id) { return document.getElementById(id); };
  function esc(t) {
    return String(t).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }
  function el(tag, attrs, text) {          /* SVG markup: parsed as SVG inside the page's <svg> */
    var s = "<" + tag;
    for (var k in attrs) s += " " + k + '="' + esc(attrs[k]) + '"';
    return s + (text === undefined ? "/>" : ">" + esc(text) + "</" + tag + ">");
  }
  function clamp(v, n) { v = parseInt(v, 10); return isNaN(v) ? 0 : Math.max(0, Math.min(n - 1, v)); }
  function readHash() {
    var h = location.hash.replace(/^#/, "").split("&");
    for (var i = 0; i < h.length; i++) {
      var kv = h[i].split("="); if (kv.length !== 2) continue;
      if (kv[0] === "layer") sel.layer = clamp(kv[1], L);
      if (kv[0] === "token") sel.token = clamp(kv[1], S);
      if (kv[0] === "head") sel.head = kv[1] === "all" ? "all" : clamp(kv[1], H);
    }
  }
  function heads() {
    return sel.head === "all" ? Array.from({length: H}, function (_, i) { return i; }) : [sel.head];
  }
  function matrix() {                       /* the heatmap: one head, or the mean over the heads */
    var hs = heads(), w = D.weights[sel.layer], m = [];
    for (var i = 0; i < S; i++) {
      m.push([]);
      for (var j = 0; j < T; j++) {
        var s = 0; for (var k = 0; k < hs.length; k++) s += w[hs[k]][i][j];
        m[i].push(s / hs.length);
      }
    }
    return m;
  }
  function choose(token) { sel.token = token; render(); }
  function drawLines() {
    var svg = $("lines"), parts = [];
    var rowH = 18, width = 420, n = Math.max(S, T);
    svg.setAttribute("height", rowH * (n + 1)); svg.setAttribute("width", width);
    parts.push(el("text", {x: 10, y: 12, "class": "tok"}, D.query_name));
    parts.push(el("text", {x: width - 10, y: 12, "text-anchor": "end", "class": "tok"}, D.key_name));
    var hs = heads(), w = D.weights[sel.layer];
    for (var k = 0; k < hs.length; k++) {
      var row = w[hs[k]][sel.token];
      for (var j = 0; j < T; j++) {
        parts.push(el("line", {x1: 130, y1: rowH * (sel.token + 1) + 12, x2: width - 130, y2: rowH * (j + 1) + 12,
          stroke: hs.length > 1 ? COLOURS[hs[k] % 10] : "#1f4e9c", "stroke-width": 2.5, "stroke-opacity": row[j]}));
      }
    }
    for (var i = 0; i < S; i++) {
      parts.push(el("text", {x: 120, y: rowH * (i + 1) + 16, "text-anchor": "end", "data-row": i,
                             "class": "tok" + (i === sel.token ? " sel" : "")}, D.rows[i]));
    }
    for (var j = 0; j < T; j++) {
      parts.push(el("text", {x: width - 120, y: rowH * (j + 1) + 16, "class": "tok"}, D.cols[j]));
    }
    svg.innerHTML = parts.join("");
    svg.querySelectorAll("[data-row]").forEach(function (t) {
      t.onmouseover = t.onclick = function () { choose(parseInt(t.getAttribute("data-row"), 10)); };
    });
  }
  function drawHeat() {
    var m = matrix(), t = $("heat"); t.innerHTML = "";
    var head = t.insertRow(); head.insertCell().className = "lab";
    for (var j = 0; j < T; j++) {
      var th = document.createElement("th"); th.textContent = D.cols[j]; head.appendChild(th);
    }
    var vmax = 0; for (var i = 0; i < S; i++) for (var j = 0; j < T; j++) vmax = Math.max(vmax, m[i][j]);
    for (var i = 0; i < S; i++) {
      var tr = t.insertRow(); if (i === sel.token) tr.className = "sel";
      var lab = tr.insertCell(); lab.className = "lab"; lab.textContent = D.rows[i];
      for (var j = 0; j < T; j++) {
        var c = tr.insertCell(); c.className = "cell";
        var a = vmax > 0 ? m[i][j] / vmax : 0;
        c.style.background = "rgba(31, 78, 156, " + a.toFixed(3) + ")";
        c.title = D.rows[i] + " -> " + D.cols[j] + ": " + m[i][j].toFixed(6);
      }
      (function (i) { tr.onmouseover = tr.onclick = function () { choose(i); }; })(i);
    }
  }
  function writeState() {
    var hs = heads(), w = D.weights[sel.layer], out = {layer: sel.layer, head: sel.head, token: sel.token,
      query: D.rows[sel.token], keys: D.cols, weights: {}};
    for (var k = 0; k < hs.length; k++) {
      out.weights[hs[k]] = w[hs[k]][sel.token].map(function (v) { return +v.toFixed(6); });
    }
    $("state").textContent = JSON.stringify(out);
  }
  function render() {
    $("layer").value = String(sel.layer); $("head").value = String(sel.head);
    var which = sel.head === "all" ? "all heads (lines: one colour per head; heatmap: their mean)" : "head " + sel.head;
    $("caption").textContent = D.layer_name + " " + sel.layer + ", " + which + ", query " + D.rows[sel.token];
    drawLines(); drawHeat(); writeState();
  }
  var ls = $("layer"), hsel = $("head");
  for (var l = 0; l < L; l++) ls.add(new Option(D.layer_name + " " + l, String(l)));
  for (var h = 0; h < H; h++) hsel.add(new Option("head " + h, String(h)));
  hsel.add(new Option("all heads", "all"));
  ls.onchange = function () { sel.layer = clamp(ls.value, L); render(); };
  hsel.onchange = function () { sel.head = hsel.value === "all" ? "all" : clamp(hsel.value, H); render(); };
  window.addEventListener("hashchange", function () { readHash(); render(); });
  readHash(); render();
})();
"""


def attention_html(weights, out=None, query_labels=None, key_labels=None, title="attention weights",
                   query_name="query", key_name="key", layer_name="layer"):
    """The interactive page of every layer's and head's attention weights (see the module's notes).

    Parameters
    ----------
    weights : list of ndarray (H, S, T), or ndarray (L, H, S, T)
        One sequence's weights, layer by layer.
    out : str, optional
        The ``.html`` file to write; nothing is written without it.
    query_labels, key_labels : list of str, optional
        The S rows' and T columns' labels (e.g. ``3:cat``); default the positions.
    title, query_name, key_name, layer_name : str
        The page's heading and the words for its columns and its layer menu.

    Returns
    -------
    str
        The page's text: HTML with its CSS, its script and the weights (7 decimals) inline.
    """
    w = np.asarray(weights, dtype=np.float64)
    if w.ndim != 4 or 0 in w.shape:
        raise ValueError(f"weights must be (L, H, S, T) with no empty axis (a list of L layers' (H, S, T)), "
                         f"got shape {w.shape}")
    _, _, s, t = w.shape
    rows = [str(i) for i in range(s)] if query_labels is None else [str(x) for x in query_labels]
    cols = (rows if s == t else [str(j) for j in range(t)]) if key_labels is None else [str(x) for x in key_labels]
    if len(rows) != s or len(cols) != t:
        raise ValueError(f"{len(rows)} query / {len(cols)} key labels for weights of shape {w.shape}")
    data = {"weights": np.round(w, 7).tolist(), "rows": rows, "cols": cols, "query_name": query_name,
            "key_name": key_name, "layer_name": layer_name}
    payload = json.dumps(data, separators=(",", ":")).replace("</", "<\\/")      # safe inside <script>
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title.splitlines()[0])}</title>
<style>{_CSS}</style></head>
<body>
<h1>{html.escape(title)}</h1>
<div id="controls"><label>layer <select id="layer"></select></label>
<label>head <select id="head"></select></label>
<span>hover over or click a token to choose it</span></div>
<p id="caption"></p>
<div id="views"><svg id="lines" role="img"></svg><table id="heat"></table></div>
<h2 style="font-size:1em">the chosen row</h2>
<pre id="state"></pre>
<script type="application/json" id="data">{payload}</script>
<script>{_JS}</script>
</body></html>
"""
    if out is not None:
        out = os.fspath(out)
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w", encoding="utf-8") as f:
            f.write(page)
    return page
