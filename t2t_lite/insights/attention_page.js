// The attention and beam viewer of t2t_lite/insights/attention_page.py: reads the JSON embedded in the page
// (id "t2t-data") and draws one heat-map at a time on a canvas, so 100 sentences of a base model
// (6 layers x 8 heads x 3 kinds each) stay responsive: a sentence's weights (uint8, zlib, base64)
// are inflated only when the sentence is first shown.
"use strict";

const AXES = {encoder_self: ["source", "source"], decoder_self: ["target", "target"],
              encoder_decoder: ["target", "source"]};
const KIND_NAMES = {encoder_self: "encoder self-attention", decoder_self: "decoder self-attention",
                    encoder_decoder: "encoder-decoder attention"};
// matplotlib's viridis at 9 evenly spaced points, as the per-head PNGs use.
const VIRIDIS = ["#440154", "#472d7b", "#3b528b", "#2c728e", "#21918c", "#28ae80", "#5ec962", "#addc30", "#fde725"];
const FONT = "12px sans-serif";

const parseStart = performance.now();
const DATA = JSON.parse(document.getElementById("t2t-data").textContent);
const parseMs = performance.now() - parseStart;
const PALETTE = buildPalette();
const inflated = new Map();  // sentence index -> Uint8Array of all its weights
const controls = {};
let lastDrawMs = 0, lastInflateMs = 0;

function buildPalette() {
  const stops = VIRIDIS.map((hex) => [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16)));
  const palette = [];
  for (let level = 0; level < 256; level++) {
    const x = level / 255 * (stops.length - 1), low = Math.min(Math.floor(x), stops.length - 2), t = x - low;
    palette.push(`rgb(${stops[low].map((c, i) => Math.round(c + t * (stops[low + 1][i] - c))).join(",")})`);
  }
  return palette;
}

async function inflate(base64) {
  const bytes = Uint8Array.from(atob(base64), (character) => character.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}

// The [heads, queries, keys] weights of one kind and layer: kinds in AXES order, then layers.
function weights(sentenceIndex, kind, layer) {
  const sentence = DATA.sentences[sentenceIndex];
  const lengths = {source: sentence.source_tokens.length, target: sentence.target_tokens.length};
  let offset = 0;
  for (const [other, [queries, keys]] of Object.entries(AXES)) {
    const size = sentence.heads * lengths[queries] * lengths[keys];
    if (other === kind) {
      offset += layer * size;
      return inflated.get(sentenceIndex).subarray(offset, offset + size);
    }
    offset += sentence.layers * size;
  }
}

// One head's [queries x keys] weights in [0, 1], or their mean over the heads (head = -1).
function matrix(bytes, head, heads, cells) {
  const values = new Float32Array(cells);
  const first = head < 0 ? 0 : head, last = head < 0 ? heads : head + 1;
  for (let h = first; h < last; h++) {
    for (let i = 0; i < cells; i++) values[i] += bytes[h * cells + i];
  }
  const scale = 255 * (last - first);
  for (let i = 0; i < cells; i++) values[i] /= scale;
  return values;
}

function option(select, value, text) {
  const element = document.createElement("option");
  element.value = value;
  element.textContent = text;
  select.appendChild(element);
}

function setUp() {
  for (const name of ["sentence", "kind", "layer", "head", "stretch"]) controls[name] = document.getElementById(name);
  DATA.sentences.forEach((sentence, index) => {
    const source = sentence.source.length > 70 ? sentence.source.slice(0, 69) + "…" : sentence.source;
    option(controls.sentence, index, `${index + 1}: ${source}`);
  });
  for (const kind of Object.keys(AXES)) option(controls.kind, kind, KIND_NAMES[kind]);
  for (const name of ["sentence", "kind", "layer", "head", "stretch"]) {
    controls[name].addEventListener("change", () => { if (name === "sentence") showSentence(); else draw(); });
  }
  document.addEventListener("keydown", stepWithArrows);
  document.getElementById("heatmap").addEventListener("mousemove", describeCell);
  const wanted = new URLSearchParams(location.hash.slice(1));  // e.g. #sentence=3&kind=encoder_decoder&layer=2
  if (wanted.get("sentence") > 0 && wanted.get("sentence") <= DATA.sentences.length) {
    controls.sentence.value = wanted.get("sentence") - 1;
  }
  if (wanted.get("kind") in AXES) controls.kind.value = wanted.get("kind");
  showSentence(wanted);
}

// The view as the page's address (#sentence=1&kind=...&layer=1&head=mean), to bookmark or share it.
function rememberView() {
  const head = Number(controls.head.value);
  const view = new URLSearchParams({sentence: Number(controls.sentence.value) + 1, kind: controls.kind.value,
                                    layer: Number(controls.layer.value) + 1, head: head < 0 ? "mean" : head + 1});
  history.replaceState(null, "", `#${view}`);
}

// Arrow keys step the head (left/right) and the layer (up/down) unless a form field has the focus.
function stepWithArrows(event) {
  if (["SELECT", "TEXTAREA", "INPUT"].includes(event.target.tagName)) return;
  const steps = {ArrowLeft: ["head", -1], ArrowRight: ["head", 1], ArrowUp: ["layer", -1], ArrowDown: ["layer", 1]};
  if (!(event.key in steps)) return;
  const [name, step] = steps[event.key], select = controls[name];
  select.selectedIndex = (select.selectedIndex + step + select.options.length) % select.options.length;
  event.preventDefault();
  draw();
}

async function showSentence(wanted = null) {
  const index = Number(controls.sentence.value), sentence = DATA.sentences[index];
  if (!inflated.has(index)) {
    const start = performance.now();
    inflated.set(index, await inflate(sentence.attention));
    lastInflateMs = performance.now() - start;
  }
  if (index !== Number(controls.sentence.value)) return;  // another sentence was chosen meanwhile
  const layer = controls.layer.value, head = controls.head.value;
  controls.layer.replaceChildren();
  controls.head.replaceChildren();
  for (let l = 0; l < sentence.layers; l++) option(controls.layer, l, `layer ${l + 1}`);
  option(controls.head, -1, "mean of the heads");
  for (let h = 0; h < sentence.heads; h++) option(controls.head, h, `head ${h + 1}`);
  if (layer && layer < controls.layer.options.length) controls.layer.value = layer;
  if (head && head < sentence.heads) controls.head.value = head;
  if (wanted && wanted.get("layer") > 0 && wanted.get("layer") <= sentence.layers) {
    controls.layer.value = wanted.get("layer") - 1;
  }
  if (wanted && wanted.get("head") > 0 && wanted.get("head") <= sentence.heads) {
    controls.head.value = wanted.get("head") - 1;
  }
  document.getElementById("source").textContent = sentence.source;
  document.getElementById("translation").textContent = sentence.beams.length ? sentence.beams[0][0] : "";
  document.getElementById("note").textContent = sentence.note || "";
  const rows = sentence.beams.map(([text, score], rank) => {
    const row = document.createElement("tr");
    for (const value of [rank + 1, text, score.toFixed(4)]) {
      const cell = document.createElement("td");
      cell.textContent = value;
      row.appendChild(cell);
    }
    return row;
  });
  document.querySelector("#beams tbody").replaceChildren(...rows);
  draw();
}

function currentView() {
  const index = Number(controls.sentence.value), sentence = DATA.sentences[index];
  const kind = controls.kind.value, layer = Number(controls.layer.value), head = Number(controls.head.value);
  const tokens = {source: sentence.source_tokens, target: sentence.target_tokens};
  const [queryTokens, keyTokens] = AXES[kind].map((axis) => tokens[axis]);
  const cells = queryTokens.length * keyTokens.length;
  const values = matrix(weights(index, kind, layer), head, sentence.heads, cells);
  return {kind, layer, head, queryTokens, keyTokens, values};
}

function draw() {
  if (!inflated.has(Number(controls.sentence.value))) return;  // drawn once inflated, by showSentence
  const start = performance.now();
  const view = currentView(), canvas = document.getElementById("heatmap"), context = canvas.getContext("2d");
  const {queryTokens, keyTokens, values} = view;
  context.font = FONT;
  const widest = (tokens) => Math.max(0, ...tokens.map((token) => context.measureText(token).width));
  const cell = Math.max(6, Math.min(28, Math.floor(640 / Math.max(queryTokens.length, keyTokens.length))));
  const left = Math.ceil(widest(queryTokens)) + 10, top = Math.ceil(widest(keyTokens)) + 10;
  const width = left + cell * keyTokens.length + 70, height = top + cell * queryTokens.length + 10;
  const ratio = window.devicePixelRatio || 1;
  canvas.width = width * ratio;
  canvas.height = height * ratio;
  canvas.style.width = `${width}px`;
  canvas.style.height = `${height}px`;
  context.setTransform(ratio, 0, 0, ratio, 0, 0);
  context.fillStyle = "#fff";
  context.fillRect(0, 0, width, height);
  const maximum = controls.stretch.checked ? Math.max(1e-6, ...values) : 1;
  for (let row = 0; row < queryTokens.length; row++) {
    for (let column = 0; column < keyTokens.length; column++) {
      const level = Math.min(255, Math.round(values[row * keyTokens.length + column] / maximum * 255));
      context.fillStyle = PALETTE[level];
      context.fillRect(left + column * cell, top + row * cell, cell, cell);
    }
  }
  drawLabels(context, queryTokens, keyTokens, left, top, cell);
  drawLegend(context, left + cell * keyTokens.length + 16, top, Math.max(cell * queryTokens.length, 60), maximum);
  canvas.dataset.geometry = JSON.stringify({left, top, cell, rows: queryTokens.length, columns: keyTokens.length});
  rememberView();
  lastDrawMs = performance.now() - start;
  const headName = view.head < 0 ? "mean of the heads" : `head ${view.head + 1}`;
  document.getElementById("caption").textContent =
    `${KIND_NAMES[view.kind]}, layer ${view.layer + 1}, ${headName}: ` +
    "rows are queries, columns the keys they attend to.";
  document.getElementById("timing").textContent =
    `${DATA.sentences.length} sentence(s); page data read in ${parseMs.toFixed(1)} ms; this sentence's ` +
    `weights inflated in ${lastInflateMs.toFixed(1)} ms; this heat-map drawn in ${lastDrawMs.toFixed(1)} ms.`;
}

function drawLabels(context, queryTokens, keyTokens, left, top, cell) {
  context.fillStyle = "#222";
  context.font = FONT;
  context.textBaseline = "middle";
  context.textAlign = "right";
  queryTokens.forEach((token, row) => context.fillText(token, left - 6, top + (row + 0.5) * cell));
  context.save();
  context.rotate(-Math.PI / 2);
  context.textAlign = "left";
  keyTokens.forEach((token, column) => context.fillText(token, -(top - 6), left + (column + 0.5) * cell));
  context.restore();
}

function drawLegend(context, x, y, height, maximum) {
  for (let i = 0; i < height; i++) {
    context.fillStyle = PALETTE[Math.round((1 - i / (height - 1)) * 255)];
    context.fillRect(x, y + i, 12, 1);
  }
  context.fillStyle = "#222";
  context.textAlign = "left";
  context.fillText(maximum.toFixed(maximum < 1 ? 3 : 0), x + 16, y + 4);
  context.fillText("0", x + 16, y + height - 4);
}

function describeCell(event) {
  const geometry = JSON.parse(event.target.dataset.geometry || "{}");
  const bounds = event.target.getBoundingClientRect();
  const column = Math.floor((event.clientX - bounds.left - geometry.left) / geometry.cell);
  const row = Math.floor((event.clientY - bounds.top - geometry.top) / geometry.cell);
  const status = document.getElementById("cell");
  if (!(row >= 0 && row < geometry.rows && column >= 0 && column < geometry.columns)) {
    status.textContent = "";
    return;
  }
  const view = currentView();
  status.textContent = `query ${row + 1} “${view.queryTokens[row]}” → key ${column + 1} ` +
    `“${view.keyTokens[column]}”: ${view.values[row * geometry.columns + column].toFixed(3)}`;
}

if (DATA.sentences.length) setUp();
