"""The viewer page's inline CSS (kept in Python so the package needs no data files)."""

STYLE = """
:root { --fg: #1d232b; --muted: #5b6470; --line: #d5dae1; --accent: #1f6feb; --bg: #f7f8fa; }
* { box-sizing: border-box; }
body { margin: 0; padding: 14px 18px; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
       color: var(--fg); background: var(--bg); }
header h1 { font-size: 18px; margin: 0 0 2px; }
.hint { margin: 0 0 10px; color: var(--muted); font-size: 12.5px; }
kbd { border: 1px solid var(--line); border-radius: 3px; padding: 0 4px; background: #fff; font-size: 11.5px; }
.controls { display: flex; flex-wrap: wrap; gap: 8px 18px; align-items: center; padding: 8px 10px;
            background: #fff; border: 1px solid var(--line); border-radius: 8px; margin-bottom: 12px; }
.controls label { display: inline-flex; gap: 6px; align-items: center; white-space: nowrap; }
.controls select { max-width: 240px; }
.controls .layer input { width: 220px; }
#layer-label { font-variant-numeric: tabular-nums; min-width: 6ch; font-weight: 600; }
#error { background: #ffe8e6; border: 1px solid #f5a09a; color: #8a1c12; padding: 8px 10px; border-radius: 8px;
         margin-bottom: 12px; white-space: pre-wrap; }
.panels { display: flex; flex-wrap: wrap; gap: 18px; }
.panel { background: #fff; border: 1px solid var(--line); border-radius: 8px; padding: 10px 12px; }
.panel h2 { font-size: 14px; margin: 0 0 8px; }
.stage { position: relative; line-height: 0; }
.stage canvas { position: absolute; left: 0; top: 0; }
.stage canvas.base { position: relative; }
.stage canvas.marks { cursor: crosshair; }
canvas.colorbar { display: block; margin-top: 8px; height: 10px; border-radius: 2px; }
.scale { display: flex; justify-content: space-between; font-size: 11.5px; color: var(--muted);
         font-variant-numeric: tabular-nums; }
.caption { margin: 6px 0 0; font-size: 12.5px; color: var(--muted); max-width: 520px; min-height: 3.6em; }
footer { margin-top: 12px; color: var(--muted); font-size: 12px; }
"""
