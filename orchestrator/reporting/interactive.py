"""Interactive time series for the self-contained pages: a canvas chart with hover read-out, drag-to-zoom on the
time axis, double-click to reset and a clickable legend. Plain JavaScript inlined in the page (no library, no
network at view time); the data travel as JSON in the page, thinned to at most ``MAX_POINTS`` per line."""

from __future__ import annotations

import html
import json
from collections.abc import Mapping, Sequence

import numpy as np

MAX_POINTS = 2000
"""Samples per line kept in the page (every k-th sample: a 40 s run at 100 Hz keeps every second one)."""
TOTAL_POINTS = 200_000
"""Samples per chart at most: with many robots each line keeps fewer (at least 200)."""

_SCRIPT = """
<script>
(function () {
  function chart(box) {
    var spec = JSON.parse(box.querySelector('script[type="application/json"]').textContent);
    var canvas = box.querySelector('canvas'), tip = box.querySelector('.tip'), ctx = canvas.getContext('2d');
    var ratio = window.devicePixelRatio || 1, W = canvas.clientWidth, H = canvas.clientHeight;
    canvas.width = W * ratio; canvas.height = H * ratio; ctx.scale(ratio, ratio);
    var pad = {l: 60, r: 12, t: 10, b: 34}, hidden = {}, drag = null;
    (spec.hidden || []).forEach(function (i) { hidden[i] = true; });
    var all = spec.lines.map(function (l) { return l.t; }).reduce(function (a, b) { return a.concat(b); }, []);
    var full = [Math.min.apply(null, all), Math.max.apply(null, all)], view = full.slice();
    function yRange() {
      var lo = Infinity, hi = -Infinity;
      spec.lines.forEach(function (l, i) {
        if (hidden[i]) return;
        for (var k = 0; k < l.t.length; k++) {
          if (l.t[k] < view[0] || l.t[k] > view[1] || l.y[k] === null) continue;
          lo = Math.min(lo, l.y[k]); hi = Math.max(hi, l.y[k]);
        }
      });
      if (!isFinite(lo)) { lo = 0; hi = 1; }
      if (hi - lo < 1e-12) { lo -= 0.5; hi += 0.5; }
      var m = 0.05 * (hi - lo); return [lo - m, hi + m];
    }
    function X(t) { return pad.l + (t - view[0]) / (view[1] - view[0]) * (W - pad.l - pad.r); }
    function T(x) { return view[0] + (x - pad.l) / (W - pad.l - pad.r) * (view[1] - view[0]); }
    var yr;
    function Y(v) { return H - pad.b - (v - yr[0]) / (yr[1] - yr[0]) * (H - pad.t - pad.b); }
    function ticks(lo, hi, n) {
      var step = Math.pow(10, Math.floor(Math.log10((hi - lo) / n))), out = [];
      [1, 2, 5, 10].some(function (m) { if ((hi - lo) / (step * m) <= n) { step *= m; return true; } });
      for (var v = Math.ceil(lo / step) * step; v <= hi; v += step) out.push(+v.toPrecision(12));
      return out;
    }
    function draw() {
      yr = yRange();
      ctx.clearRect(0, 0, W, H); ctx.font = '11px system-ui, sans-serif'; ctx.strokeStyle = '#ddd';
      ctx.fillStyle = '#444';
      ticks(view[0], view[1], 8).forEach(function (t) {
        ctx.beginPath(); ctx.moveTo(X(t), pad.t); ctx.lineTo(X(t), H - pad.b); ctx.stroke();
        ctx.fillText(String(t), X(t) - 8, H - pad.b + 14);
      });
      ticks(yr[0], yr[1], 6).forEach(function (v) {
        ctx.beginPath(); ctx.moveTo(pad.l, Y(v)); ctx.lineTo(W - pad.r, Y(v)); ctx.stroke();
        ctx.fillText(String(v), 4, Y(v) + 4);
      });
      ctx.fillText(spec.xlabel, W / 2 - 20, H - 4);
      ctx.save(); ctx.beginPath(); ctx.rect(pad.l, pad.t, W - pad.l - pad.r, H - pad.t - pad.b); ctx.clip();
      spec.lines.forEach(function (l, i) {
        if (hidden[i]) return;
        ctx.strokeStyle = l.color; ctx.lineWidth = 1.3; ctx.beginPath(); var pen = false;
        for (var k = 0; k < l.t.length; k++) {
          if (l.y[k] === null) { pen = false; continue; }
          if (pen) ctx.lineTo(X(l.t[k]), Y(l.y[k])); else ctx.moveTo(X(l.t[k]), Y(l.y[k]));
          pen = true;
        }
        ctx.stroke();
      });
      if (drag) { ctx.fillStyle = 'rgba(60,120,200,0.15)'; ctx.fillRect(Math.min(drag.a, drag.b), pad.t,
                                                                         Math.abs(drag.b - drag.a), H); }
      ctx.restore();
      box.dataset.view = view[0].toFixed(3) + ',' + view[1].toFixed(3);
    }
    function nearest(x, y) {
      var t = T(x), best = null;
      spec.lines.forEach(function (l, i) {
        if (hidden[i]) return;
        var lo = 0, hi = l.t.length - 1;
        while (hi - lo > 1) { var mid = (lo + hi) >> 1; if (l.t[mid] < t) lo = mid; else hi = mid; }
        [lo, hi].forEach(function (k) {
          if (l.y[k] === null) return;
          var d = Math.hypot(X(l.t[k]) - x, Y(l.y[k]) - y);
          if (!best || d < best.d) best = {d: d, name: l.name, t: l.t[k], y: l.y[k]};
        });
      });
      return best;
    }
    canvas.addEventListener('mousedown', function (e) { drag = {a: e.offsetX, b: e.offsetX}; });
    canvas.addEventListener('mousemove', function (e) {
      if (drag) { drag.b = e.offsetX; draw(); return; }
      var p = nearest(e.offsetX, e.offsetY);
      if (p && p.d < 30) {
        tip.style.display = 'block'; tip.style.left = (e.offsetX + 12) + 'px'; tip.style.top = (e.offsetY + 8) + 'px';
        tip.textContent = p.name + ': ' + p.y.toPrecision(4) + ' ' + spec.unit + ' at t = ' + p.t.toFixed(2) + ' s';
      } else { tip.style.display = 'none'; }
    });
    canvas.addEventListener('mouseup', function () {
      if (drag && Math.abs(drag.b - drag.a) > 5) {
        var a = T(Math.min(drag.a, drag.b)), b = T(Math.max(drag.a, drag.b)); view = [a, b];
      }
      drag = null; draw();
    });
    canvas.addEventListener('mouseleave', function () { tip.style.display = 'none'; });
    canvas.addEventListener('dblclick', function () { view = full.slice(); draw(); });
    var spans = box.querySelectorAll('.legend span');
    spans.forEach(function (el) {
      el.style.opacity = hidden[+el.dataset.line] ? 0.35 : 1;
      el.addEventListener('click', function () {
        var i = +el.dataset.line; hidden[i] = !hidden[i]; el.style.opacity = hidden[i] ? 0.35 : 1; draw();
      });
    });
    var all = box.querySelector('button.all');
    if (all) all.addEventListener('click', function () {
      var show = all.dataset.state !== 'all';
      spans.forEach(function (el) { var i = +el.dataset.line; hidden[i] = !show && i >= spec.visible;
                                     el.style.opacity = hidden[i] ? 0.35 : 1; });
      all.dataset.state = show ? 'all' : 'first'; all.textContent = show ? 'show the first ' + spec.visible
                                                                        : 'show all ' + spec.lines.length;
      box.dataset.shown = spec.lines.filter(function (l, i) { return !hidden[i]; }).length; draw();
    });
    box.dataset.shown = spec.lines.filter(function (l, i) { return !hidden[i]; }).length;
    box.zoomTo = function (a, b) { view = [a, b]; draw(); };
    draw();
  }
  document.querySelectorAll('.ichart').forEach(chart);
})();
</script>
"""

_STYLE = """
<style>
.ichart{position:relative;margin:.5em 0}.ichart canvas{width:100%;height:320px;border:1px solid #ddd;cursor:crosshair}
.ichart .tip{position:absolute;display:none;background:#fff;border:1px solid #999;padding:2px 6px;font-size:12px;
pointer-events:none;white-space:nowrap}.ichart .legend{font-size:12px}.ichart .legend span{cursor:pointer;
margin-right:.8em;white-space:nowrap}.ichart .hint{color:#666;font-size:12px}
</style>
"""


def _thin(t: np.ndarray, y: np.ndarray, points: int = 2000) -> tuple[list[float], list[float | None]]:
    step = max(1, -(-len(t) // points))
    tt, yy = np.asarray(t, np.float64)[::step], np.asarray(y, np.float64)[::step]
    return ([round(float(v), 4) for v in tt],
            [None if not np.isfinite(v) else float(f"{v:.6g}") for v in yy])


def time_series_chart(lines: Sequence[tuple[str, np.ndarray, np.ndarray]], unit: str, colors: Sequence[str],
                      chart_id: str, visible: int = 16) -> str:
    """An interactive chart of ``lines`` ((name, t [s], y) each) as an HTML snippet (call ``charts_page_parts``
    once per page for the script and style). The first ``visible`` lines are drawn; a button shows the rest."""
    spec: dict = {"unit": unit, "xlabel": "time [s]", "lines": [], "visible": visible,
                  "hidden": list(range(visible, len(lines)))}
    points = max(200, min(MAX_POINTS, TOTAL_POINTS // max(len(lines), 1)))  # a page of many robots stays light
    for (name, t, y), color in zip(lines, colors, strict=False):
        tt, yy = _thin(t, y, points)
        spec["lines"].append({"name": name, "color": color, "t": tt, "y": yy})
    legend = "".join(f"<span data-line='{i}' style='color:{html.escape(line['color'])}'>&#9644; "
                     f"{html.escape(line['name'])}</span>" for i, line in enumerate(spec["lines"]))
    data = json.dumps(spec, separators=(",", ":")).replace("</", "<\\/")  # never closes the script element
    more = (f"<button class='all' type='button'>show all {len(lines)}</button>" if len(lines) > visible else "")
    return (f"<div class='ichart' id='{html.escape(chart_id)}'><canvas></canvas><div class='tip'></div>"
            f"<div class='legend'>{legend}</div>{more}<div class='hint'>drag to zoom into a time span, double-click "
            f"to reset, click a name to hide or show its line</div><script type='application/json'>{data}</script>"
            f"</div>")


def charts_page_parts() -> tuple[str, str]:
    """(style, script) to put once in a page that holds charts (the script draws every chart on load)."""
    return _STYLE, _SCRIPT


def hex_colors(n: int) -> list[str]:
    """``n`` distinct colours as hex strings, the same scheme as the PNG plots (``plots.palette``)."""
    from matplotlib.colors import to_hex

    from .plots import palette

    return [to_hex(c) for c in palette(n)]


def series_lines(names: Mapping[int, str], series: Mapping[int, object], column: str
                 ) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(name, t [s], column) of every robot in ``series`` (``metrics.Series``), in the order of ``names``."""
    out = []
    for rid, name in names.items():
        s = series.get(rid)
        if s is not None and column in s.cols:  # type: ignore[attr-defined]
            out.append((name, s.t_ns / 1e9, s.cols[column]))  # type: ignore[attr-defined]
    return out
