
(() => {
  "use strict";
  const META = JSON.parse(document.getElementById("bl-meta").textContent);
  const $ = (id) => document.getElementById(id);
  const ui = {
    model: $("model"), image: $("image"), probe: $("probe"), layer: $("layer"), layerLabel: $("layer-label"),
    grid: $("grid"), truth: $("truth"), opacity: $("opacity"), error: $("error"), footer: $("footer"),
  };
  const state = { model: 0, image: 0, probe: null, layer: null, patch: 0, locked: false };
  const MAX_DECODED = 24;
  const decoded = new Map();
  const images = new Map();
  let renderSeq = 0, renders = 0;

  // ---- color maps (viridis for probabilities, magma for attention) ----
  const STOPS = {
    score: [[68,1,84],[72,40,120],[62,74,137],[49,104,142],[38,130,142],[31,158,137],[53,183,121],[110,206,88],
            [181,222,43],[253,231,37]],
    attn: [[0,0,4],[28,16,68],[79,18,123],[129,37,129],[181,54,122],[229,80,100],[251,135,97],[254,194,135],
           [252,253,191]],
  };
  function lut(stops) {
    const out = new Uint8ClampedArray(256 * 3);
    for (let i = 0; i < 256; i++) {
      const t = (i / 255) * (stops.length - 1), k = Math.min(Math.floor(t), stops.length - 2), f = t - k;
      for (let c = 0; c < 3; c++) out[i * 3 + c] = Math.round(stops[k][c] * (1 - f) + stops[k + 1][c] * f);
    }
    return out;
  }
  const LUT = { score: lut(STOPS.score), attn: lut(STOPS.attn) };

  function showError(err) {
    console.error(err);
    ui.error.hidden = false;
    ui.error.textContent = "Viewer error: " + (err && err.message ? err.message : String(err));
  }

  // ---- decoding: base64 -> inflate -> undo the row filter ----
  function blobBytes(id) {
    const el = document.getElementById(id);
    if (!el) throw new Error("missing data block " + id);
    const bin = atob(el.textContent.trim());
    const out = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  async function inflate(bytes) {
    if (typeof DecompressionStream !== "function") {
      throw new Error("this browser has no DecompressionStream (Chrome 80+, Firefox 113+ and Safari 16.4+ have it)");
    }
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }
  async function decodeBlob(id) {
    const spec = META.blobs[id];
    if (!spec) throw new Error("no layout for data block " + id);
    const n = spec.n, raw = await inflate(blobBytes(id));
    const view = new DataView(raw.buffer, raw.byteOffset, raw.byteLength);
    let offset = 0;
    const floats = (present) => {
      if (!present) return null;
      const a = new Float32Array(n);
      for (let i = 0; i < n; i++) a[i] = view.getFloat32(offset + 4 * i, true);
      offset += 4 * n;
      return a;
    };
    const rowMax = floats(spec.rowMax), rowSum = floats(spec.rowSum);
    const body = raw.subarray(offset), expected = spec.tri ? (n * (n + 1)) / 2 : n * n;
    if (body.length !== expected) throw new Error(`data block ${id} holds ${body.length} values, expected ${expected}`);
    const q = new Uint8Array(expected);
    let start = 0, prevStart = 0, prevLen = 0;
    for (let i = 0; i < n; i++) {
      const len = spec.tri ? i + 1 : n;
      for (let j = 0; j < len; j++) {
        const p = i === 0 ? 0 : q[prevStart + Math.min(j, prevLen - 1)];
        q[start + j] = (body[start + j] + p) & 255;
      }
      prevStart = start; prevLen = len; start += len;
    }
    return { n, tri: spec.tri, top: (1 << spec.bits) - 1, rowMax, rowSum, q };
  }
  function getDecoded(id) {
    let p = decoded.get(id);
    if (p) { decoded.delete(id); decoded.set(id, p); return p; }
    p = decodeBlob(id);
    decoded.set(id, p);
    while (decoded.size > MAX_DECODED) decoded.delete(decoded.keys().next().value);
    return p;
  }
  function rowOf(map, i) {
    const out = new Float32Array(map.n), scale = (map.rowMax ? map.rowMax[i] : 1) / map.top;
    for (let j = 0; j < map.n; j++) {
      const idx = !map.tri ? i * map.n + j : (j <= i ? (i * (i + 1)) / 2 + j : (j * (j + 1)) / 2 + i);
      out[j] = map.q[idx] * scale;
    }
    return out;
  }
  function loadImage(src) {
    if (!src) return Promise.resolve(null);
    let p = images.get(src);
    if (!p) {
      const img = new Image();
      img.src = src;
      p = img.decode().then(() => img);
      images.set(src, p);
    }
    return p;
  }

  // ---- current selection ----
  const model = () => META.models[state.model];
  const grid = () => model().grids[state.image];
  const layers = () => model().probes[state.probe] || [];
  const truth = () => model().truth[state.image];
  const scoreId = () => META.scores[[state.model, state.image, state.probe, state.layer].join("|")];
  const attnId = () => META.attention[[state.model, state.image, state.layer + 1].join("|")];
  const label = (k) => { const cols = grid()[1]; return `r${Math.floor(k / cols)}c${k % cols}`; };

  const panels = ["score", "attn"].map((kind) => {
    const root = $("panel-" + kind);
    return {
      kind, root, base: root.querySelector("canvas.base"), heat: root.querySelector("canvas.heat"),
      marks: root.querySelector("canvas.marks"), colorbar: root.querySelector("canvas.colorbar"),
      title: root.querySelector("h2"), caption: root.querySelector(".caption"), max: root.querySelector(".scale .max"),
    };
  });

  // ---- drawing ----
  function sizeCanvases(panel, img) {
    const scale = META.display / Math.max(img.width, img.height);
    const w = Math.round(img.width * scale), h = Math.round(img.height * scale);
    for (const c of [panel.base, panel.heat, panel.marks]) {
      if (c.width !== w || c.height !== h) { c.width = w; c.height = h; }
    }
    if (panel.colorbar.width !== w) { panel.colorbar.width = w; panel.colorbar.height = 10; }
    panel.colorbar.style.width = w + "px";
    panel.root.style.width = w + 26 + "px";
  }
  function drawBase(panel, img, rows, cols) {
    const ctx = panel.base.getContext("2d"), w = panel.base.width, h = panel.base.height;
    ctx.clearRect(0, 0, w, h);
    ctx.drawImage(img, 0, 0, w, h);
    if (ui.grid.checked && w / cols >= 4 && h / rows >= 4) {
      ctx.beginPath();
      for (let c = 1; c < cols; c++) { const x = Math.round((c * w) / cols) + 0.5; ctx.moveTo(x, 0); ctx.lineTo(x, h); }
      for (let r = 1; r < rows; r++) { const y = Math.round((r * h) / rows) + 0.5; ctx.moveTo(0, y); ctx.lineTo(w, y); }
      ctx.strokeStyle = "rgba(255,255,255,0.28)";
      ctx.lineWidth = 1;
      ctx.stroke();
    }
  }
  function drawHeat(panel, values, scale, rows, cols) {
    const ctx = panel.heat.getContext("2d"), w = panel.heat.width, h = panel.heat.height;
    ctx.clearRect(0, 0, w, h);
    if (!values) return;
    const small = document.createElement("canvas");
    small.width = cols; small.height = rows;
    const sctx = small.getContext("2d"), data = sctx.createImageData(cols, rows), table = LUT[panel.kind];
    const alpha = Math.round((Number(ui.opacity.value) / 100) * 255);
    for (let k = 0; k < rows * cols; k++) {
      const t = scale > 0 ? Math.max(0, Math.min(1, values[k] / scale)) : 0, i = Math.round(t * 255) * 3;
      data.data[4 * k] = table[i]; data.data[4 * k + 1] = table[i + 1]; data.data[4 * k + 2] = table[i + 2];
      data.data[4 * k + 3] = alpha;
    }
    sctx.putImageData(data, 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(small, 0, 0, w, h);
  }
  function drawMarks(panel, rows, cols, ids, outline) {
    const ctx = panel.marks.getContext("2d"), w = panel.marks.width, h = panel.marks.height;
    const cw = w / cols, ch = h / rows;
    ctx.clearRect(0, 0, w, h);
    if (outline) ctx.drawImage(outline, 0, 0, w, h);
    if (ids && ui.truth.checked && ids[state.patch] > 0) {
      const id = ids[state.patch];
      ctx.beginPath();
      for (let k = 0; k < rows * cols; k++) {
        if (ids[k] !== id) continue;
        const r = Math.floor(k / cols), c = k % cols, x = c * cw, y = r * ch;
        if (r === 0 || ids[k - cols] !== id) { ctx.moveTo(x, y); ctx.lineTo(x + cw, y); }
        if (r === rows - 1 || ids[k + cols] !== id) { ctx.moveTo(x, y + ch); ctx.lineTo(x + cw, y + ch); }
        if (c === 0 || ids[k - 1] !== id) { ctx.moveTo(x, y); ctx.lineTo(x, y + ch); }
        if (c === cols - 1 || ids[k + 1] !== id) { ctx.moveTo(x + cw, y); ctx.lineTo(x + cw, y + ch); }
      }
      ctx.strokeStyle = "#00e5ff"; ctx.lineWidth = 2; ctx.setLineDash([5, 3]); ctx.stroke(); ctx.setLineDash([]);
    }
    const r = Math.floor(state.patch / cols), c = state.patch % cols;
    ctx.lineWidth = 3; ctx.strokeStyle = "#000"; ctx.strokeRect(c * cw, r * ch, cw, ch);
    ctx.lineWidth = 1.5; ctx.strokeStyle = state.locked ? "#ff3b30" : "#fff"; ctx.strokeRect(c * cw, r * ch, cw, ch);
  }
  function drawColorbar(panel) {
    const ctx = panel.colorbar.getContext("2d"), w = panel.colorbar.width, table = LUT[panel.kind];
    for (let x = 0; x < w; x++) {
      const i = Math.round((x / Math.max(1, w - 1)) * 255) * 3;
      ctx.fillStyle = `rgb(${table[i]},${table[i + 1]},${table[i + 2]})`;
      ctx.fillRect(x, 0, 1, 10);
    }
  }
  function objectStats(values, ids) {
    const id = ids[state.patch];
    if (!(id > 0)) return "";
    let same = 0, ns = 0, other = 0, no = 0;
    for (let k = 0; k < values.length; k++) {
      if (k === state.patch || !(ids[k] > 0)) continue;
      if (ids[k] === id) { same += values[k]; ns++; } else { other += values[k]; no++; }
    }
    const mean = (sum, count) => (count ? `${(sum / count).toFixed(2)} (${count} patch${count === 1 ? "" : "es"})` : "none");
    return ` Mean over the other patches of its object: ${mean(same, ns)}; over other objects' patches: ${mean(other, no)}.`;
  }

  async function render() {
    const seq = ++renderSeq;
    const img = META.images[state.image], [rows, cols] = grid(), ids = truth();
    const sid = scoreId(), aid = attnId();
    if (!sid) throw new Error(`no map for probe ${state.probe} at layer ${state.layer}`);
    const [picture, outline, scores, attn] = await Promise.all([
      loadImage(img.src), ui.truth.checked ? loadImage(img.outline) : null, getDecoded(sid), aid ? getDecoded(aid) : null,
    ]);
    if (seq !== renderSeq) return;
    const patch = label(state.patch), block = state.layer + 1;
    ui.layerLabel.textContent = `${state.layer} / ${model().nLayers - 1}`;
    const scoreRow = rowOf(scores, state.patch), attnRow = attn ? rowOf(attn, state.patch) : null;
    const rowMax = attn ? attn.rowMax[state.patch] : 0;
    for (const panel of panels) {
      sizeCanvases(panel, img);
      drawBase(panel, picture, rows, cols);
      drawHeat(panel, panel.kind === "score" ? scoreRow : attnRow, panel.kind === "score" ? 1 : rowMax, rows, cols);
      drawMarks(panel, rows, cols, ids, outline);
      drawColorbar(panel);
      panel.heat.dataset.state = [state.model, state.image, state.probe, state.layer, state.patch].join("|");
    }
    const relation = model().relation;
    panels[0].title.textContent = `${relation.title}: ${state.probe} probe, layer ${state.layer}`;
    panels[0].caption.textContent = `${relation.readout.replace("{patch}", patch)} for every patch.` +
      (ids && relation.name === "same_object" ? objectStats(scoreRow, ids) : "");
    panels[0].max.textContent = "1";
    panels[1].title.textContent = attn ? `Attention of block ${block}, mean over heads` : `No block ${block}`;
    panels[1].caption.textContent = attn
      ? `From ${patch} to every patch, scaled to its largest weight ${rowMax.toPrecision(3)}. ` +
        `${(100 * attn.rowSum[state.patch]).toFixed(1)}% of ${patch}'s attention goes to patches, the rest to CLS/registers.`
      : `Layer ${state.layer} is the output of the last block, so no later attention reads it.`;
    panels[1].max.textContent = attn ? rowMax.toPrecision(3) : "";
    renders++;
    document.body.dataset.renders = String(renders);
  }
  const requestRender = () => render().catch(showError);

  // ---- controls ----
  function fill(select, options, value) {
    select.replaceChildren(...options.map(([v, text]) => new Option(text, String(v))));
    select.value = String(value);
    select.disabled = options.length < 2;
  }
  function syncLayer() {
    const list = layers();
    if (!list.includes(state.layer)) {
      state.layer = list.reduce((best, l) => (best === null || Math.abs(l - state.layer) < Math.abs(best - state.layer) ? l : best), null);
    }
    ui.layer.min = "0"; ui.layer.max = String(list.length - 1); ui.layer.value = String(list.indexOf(state.layer));
    ui.layer.disabled = list.length < 2;
  }
  function syncProbes() {
    const probes = Object.keys(model().probes);
    if (!probes.includes(state.probe)) state.probe = probes[0];
    fill(ui.probe, probes.map((p) => [p, p]), state.probe);
    syncLayer();
  }
  function setLayerIndex(index) {
    const list = layers(), i = Math.max(0, Math.min(list.length - 1, index));
    state.layer = list[i]; ui.layer.value = String(i);
    requestRender();
  }
  function moveToGrid(oldGrid) {
    const [rows, cols] = grid(), [r0, c0] = oldGrid;
    const r = Math.min(rows - 1, Math.floor(((Math.floor(state.patch / c0) + 0.5) / r0) * rows));
    const c = Math.min(cols - 1, Math.floor((((state.patch % c0) + 0.5) / c0) * cols));
    state.patch = r * cols + c;
  }
  ui.model.addEventListener("change", () => { const old = grid(); state.model = Number(ui.model.value); moveToGrid(old); syncProbes(); requestRender(); });
  ui.image.addEventListener("change", () => { const old = grid(); state.image = Number(ui.image.value); moveToGrid(old); requestRender(); });
  ui.probe.addEventListener("change", () => { state.probe = ui.probe.value; syncLayer(); requestRender(); });
  ui.layer.addEventListener("input", () => setLayerIndex(Number(ui.layer.value)));
  for (const box of [ui.grid, ui.truth, ui.opacity]) box.addEventListener("input", requestRender);

  function patchAt(panel, ev) {
    const box = panel.marks.getBoundingClientRect(), [rows, cols] = grid();
    const x = (ev.clientX - box.left) / box.width, y = (ev.clientY - box.top) / box.height;
    if (!(x >= 0 && x < 1 && y >= 0 && y < 1)) return null;
    return Math.floor(y * rows) * cols + Math.floor(x * cols);
  }
  for (const panel of panels) {
    panel.marks.addEventListener("mousemove", (ev) => {
      if (state.locked) return;
      const p = patchAt(panel, ev);
      if (p !== null && p !== state.patch) { state.patch = p; requestRender(); }
    });
    panel.marks.addEventListener("click", (ev) => {
      const p = patchAt(panel, ev);
      if (p === null) return;
      state.locked = !(state.locked && p === state.patch);
      state.patch = p;
      requestRender();
    });
  }
  document.addEventListener("keydown", (ev) => {
    const tag = ev.target && ev.target.tagName;
    if (tag === "INPUT" || tag === "SELECT" || tag === "TEXTAREA") return;
    const [rows, cols] = grid();
    let r = Math.floor(state.patch / cols), c = state.patch % cols;
    switch (ev.key) {
      case "ArrowLeft": c = Math.max(0, c - 1); break;
      case "ArrowRight": c = Math.min(cols - 1, c + 1); break;
      case "ArrowUp": r = Math.max(0, r - 1); break;
      case "ArrowDown": r = Math.min(rows - 1, r + 1); break;
      case "[": case "PageDown": ev.preventDefault(); setLayerIndex(Number(ui.layer.value) - 1); return;
      case "]": case "PageUp": ev.preventDefault(); setLayerIndex(Number(ui.layer.value) + 1); return;
      case "Escape": state.locked = false; requestRender(); return;
      default: return;
    }
    ev.preventDefault();
    state.patch = r * cols + c;
    state.locked = true;
    requestRender();
  });

  // ---- start ----
  fill(ui.model, META.models.map((m, i) => [i, m.name]), 0);
  fill(ui.image, META.images.map((im, i) => [i, im.name]), 0);
  state.probe = Object.keys(model().probes)[0];
  state.layer = layers()[0];
  syncProbes();
  { const [rows, cols] = grid(); state.patch = Math.floor(rows / 2) * cols + Math.floor(cols / 2); }
  ui.footer.textContent = `${META.models.length} model(s), ${META.images.length} image(s); maps stored at ${META.bits} bits ` +
    "per value (deflate + base64) and decoded one layer at a time in this page. Made with binding_lens.";
  const ready = render().catch((err) => { showError(err); throw err; });
  window.bindingLensViewer = {
    meta: META, state, ready, rendered: () => renders,
    scoreRow: async (m, i, probe, layer, q) => Array.from(rowOf(await getDecoded(META.scores[[m, i, probe, layer].join("|")]), q)),
    attentionRow: async (m, i, block, q) => Array.from(rowOf(await getDecoded(META.attention[[m, i, block].join("|")]), q)),
  };
})();
