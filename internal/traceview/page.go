package traceview

// pageHTML is the viewer: inline style and script, the trace embedded as
// JSON by Write. The diagram shows a window of steps around the current
// one; the current message is drawn thick and red (class "current"),
// which is what the browser test looks for.
const pageHTML = `<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>{{.Title}}</title>
<style>
body { font: 14px sans-serif; margin: 16px; color: #222; }
h1 { font-size: 18px; margin: 0 0 4px; }
#about { color: #555; margin-bottom: 8px; }
#bar { margin: 8px 0; }
#bar button { margin-right: 4px; }
#pos { margin-left: 8px; font-weight: bold; }
#wrap { display: flex; gap: 16px; align-items: flex-start; }
#diagram { border: 1px solid #ccc; background: #fff; }
#side { min-width: 280px; max-width: 420px; }
#state { font-family: monospace; background: #f4f4f4; padding: 8px; white-space: pre-wrap; }
#label { font-family: monospace; padding: 8px 0; }
.lane { stroke: #999; stroke-dasharray: 4 3; }
.node { font-weight: bold; }
.msg { stroke: #5a7; stroke-width: 1.5; }
.msg.page { stroke: #27c; }
.msg.current { stroke: #d00; stroke-width: 3.5; }
.mtext { font: 11px monospace; fill: #444; }
.mtext.current { fill: #d00; font-weight: bold; }
#notes { color: #a00; font-family: monospace; white-space: pre-wrap; }
kbd { border: 1px solid #aaa; border-radius: 3px; padding: 0 3px; }
</style></head>
<body>
<h1 id="title"></h1>
<div id="about"></div>
<div id="bar">
<button id="first" title="Home">&#x25C0;&#x25C0;</button><button id="prev" title="left arrow or k">&#x25C0;</button><button id="next" title="right arrow or j">&#x25B6;</button><button id="last" title="End">&#x25B6;&#x25B6;</button>
<span id="pos"></span>
<span> &nbsp;<kbd>&larr;</kbd>/<kbd>&rarr;</kbd> or <kbd>k</kbd>/<kbd>j</kbd> step, <kbd>Home</kbd>/<kbd>End</kbd></span>
</div>
<div id="wrap">
<svg id="diagram" xmlns="http://www.w3.org/2000/svg"></svg>
<div id="side">
<div><b>message</b></div><div id="label"></div>
<div><b id="watch"></b></div><div id="state"></div>
</div>
</div>
<div id="notes"></div>
<pre id="selftest"></pre>
<script>
"use strict";
const T = {{.Data}};
const WINDOW = 24, ROW = 26, TOP = 40, LANE = 130, LEFT = 60;
let cur = 0;
const svgNS = "http://www.w3.org/2000/svg";
function el(name, attrs, text) {
  const e = document.createElementNS(svgNS, name);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text !== undefined) e.textContent = text;
  return e;
}
function us(ns) { return (ns / 1000).toFixed(2) + " us"; }
function draw() {
  const svg = document.getElementById("diagram");
  while (svg.firstChild) svg.removeChild(svg.firstChild);
  const first = Math.max(0, Math.min(cur - Math.floor(WINDOW / 2), T.steps.length - WINDOW));
  const last = Math.min(T.steps.length, first + WINDOW);
  const width = LEFT + LANE * (T.nodes - 1) + 200, height = TOP + ROW * (last - first) + 20;
  svg.setAttribute("width", width); svg.setAttribute("height", height);
  const x = n => LEFT + LANE * n;
  for (let n = 0; n < T.nodes; n++) {
    svg.appendChild(el("text", {x: x(n), y: 20, "text-anchor": "middle", class: "node"}, "node " + n));
    svg.appendChild(el("line", {x1: x(n), y1: 28, x2: x(n), y2: height, class: "lane"}));
  }
  for (let i = first; i < last; i++) {
    const s = T.steps[i], y = TOP + ROW * (i - first) + 10;
    const c = (s.page ? "msg page" : "msg") + (i === cur ? " current" : "");
    const line = el("line", {x1: x(s.from), y1: y, x2: x(s.to), y2: y + ROW * 0.6, class: c, "data-step": i});
    svg.appendChild(line);
    const dir = s.to >= s.from ? 1 : -1;
    svg.appendChild(el("circle", {cx: x(s.to) - 3 * dir, cy: y + ROW * 0.6, r: 3, class: c}));
    const tx = Math.min(x(s.from), x(s.to)) + 4;
    svg.appendChild(el("text", {x: tx, y: y - 2, class: "mtext" + (i === cur ? " current" : "")}, us(s.t) + "  " + s.label));
  }
  const s = T.steps[cur];
  document.getElementById("pos").textContent = "step " + (cur + 1) + " of " + T.steps.length + " at " + us(s.t);
  document.getElementById("label").textContent = "node " + s.from + " -> node " + s.to + ": " + s.label + (s.page ? " (carries the page)" : "");
  document.getElementById("state").textContent = s.state || "(no page watched)";
  document.body.setAttribute("data-current", String(cur));
}
function go(i) { cur = Math.max(0, Math.min(T.steps.length - 1, i)); draw(); }
document.addEventListener("keydown", e => {
  switch (e.key) {
  case "ArrowRight": case "j": go(cur + 1); break;
  case "ArrowLeft": case "k": go(cur - 1); break;
  case "Home": go(0); break;
  case "End": go(T.steps.length - 1); break;
  default: return;
  }
  e.preventDefault();
});
document.getElementById("first").onclick = () => go(0);
document.getElementById("prev").onclick = () => go(cur - 1);
document.getElementById("next").onclick = () => go(cur + 1);
document.getElementById("last").onclick = () => go(T.steps.length - 1);
document.getElementById("title").textContent = T.title;
document.getElementById("about").textContent = T.about;
document.getElementById("watch").textContent = T.watch ? T.watch + ", after this step" : "";
document.getElementById("notes").textContent = (T.notes || []).join("\n");
draw();
// ?selftest: press the right arrow and report what the highlight did
// (the browser test reads this from the dumped DOM).
if (location.search.indexOf("selftest") >= 0) {
  const before = document.querySelector("line.current").getAttribute("data-step");
  document.dispatchEvent(new KeyboardEvent("keydown", {key: "ArrowRight"}));
  const after = document.querySelector("line.current").getAttribute("data-step");
  document.getElementById("selftest").textContent = "selftest highlight " + before + " -> " + after;
}
</script>
</body></html>
`
