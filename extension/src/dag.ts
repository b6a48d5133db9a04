/**
 * A printed graph (`def forward(x: "float32[8]"): y = ops.cos(x) ... return y`) drawn as a DAG in SVG,
 * each node coloured by the kernel it ends up in. The layout is the layered one that
 * minicompiler/notebook/dag.py uses: a node's layer is its longest path from an input, and nodes in a
 * layer are ordered by the mean position of their inputs.
 */

import { escape } from './report.js';

const BOX_W = 128;
const BOX_H = 36;
const GAP_X = 16;
const GAP_Y = 30;
const MARGIN = 8;
/** More nodes than this are listed, not drawn: a layout of thousands of boxes would freeze the page. */
export const MAX_DAG_NODES = 250;

export interface DagNode {
  name: string;
  op: string; // "input" and "output" for the graph's ends
  inputs: string[];
  x: number;
  y: number;
}

const DEF_LINE = /^def \w+\((.*)\):\s*$/;
const ARG = /(\w+)\s*(?::\s*"[^"]*")?/g;
const NODE_LINE = /^\s+(\w+)\s*=\s*([\w.]+)\((.*)\)\s*$/;
const RETURN_LINE = /^\s+return\b(.*)$/;
const NAME = /[A-Za-z_]\w*/g;

/** The nodes of a printed graph, or null when `text` is not one. */
export function parseGraph(text: string): DagNode[] | null {
  const lines = text.split('\n');
  const def = DEF_LINE.exec(lines[0] ?? '');
  if (!def) {
    return null;
  }
  const nodes = new Map<string, DagNode>();
  const add = (name: string, op: string, args: string): void => {
    const inputs = (args.match(NAME) ?? []).filter(n => nodes.has(n));
    nodes.set(name, { name, op, inputs: [...new Set(inputs)], x: 0, y: 0 });
  };
  for (const m of def[1].matchAll(ARG)) {
    if (m[1]) {
      add(m[1], 'input', '');
    }
  }
  for (const raw of lines.slice(1)) {
    const line = raw.split('#')[0].replace(/\s+$/, ''); // the comment holds meta and the source line
    const node = NODE_LINE.exec(line);
    const ret = RETURN_LINE.exec(line);
    if (node) {
      add(node[1], node[2].replace(/^ops\./, ''), node[3]);
    } else if (ret) {
      add('output', 'output', ret[1]);
    }
  }
  return nodes.size > 0 ? [...nodes.values()] : null;
}

/** Places nodes in layers (longest path from an input), ordered by their inputs' mean position. */
export function layout(nodes: DagNode[]): { width: number; height: number } {
  const byName = new Map(nodes.map(n => [n.name, n]));
  const layer = new Map<string, number>();
  for (const n of nodes) { // printed graphs are in topological order
    layer.set(n.name, Math.max(-1, ...n.inputs.map(i => layer.get(i) ?? 0)) + 1);
  }
  const layers: DagNode[][] = [];
  for (const n of nodes) {
    (layers[layer.get(n.name)!] ??= []).push(n);
  }
  let width = 0;
  layers.forEach((row, depth) => {
    const meanX = (n: DagNode): number =>
      n.inputs.length ? n.inputs.reduce((s, i) => s + byName.get(i)!.x, 0) / n.inputs.length : 0;
    row.sort((a, b) => meanX(a) - meanX(b));
    row.forEach((n, i) => {
      n.x = MARGIN + i * (BOX_W + GAP_X);
      n.y = MARGIN + depth * (BOX_H + GAP_Y);
    });
    width = Math.max(width, row.length * (BOX_W + GAP_X) - GAP_X + 2 * MARGIN);
  });
  return { width, height: layers.length * (BOX_H + GAP_Y) - GAP_Y + 2 * MARGIN };
}

/** A kernel's colour: hues spread around the wheel, readable on light and dark backgrounds. */
export function kernelColour(index: number): string {
  return `hsl(${(index * 137) % 360} 60% 55% / 0.55)`;
}

/** The SVG of a graph; `kernelOf` maps a node name to the index of the kernel that computes it. */
export function dagSvg(text: string, kernelOf: Map<string, number>, kernelNames: string[]): string | null {
  const nodes = parseGraph(text);
  if (!nodes) {
    return null;
  }
  if (nodes.length > MAX_DAG_NODES) {
    return `<p class="mc-too-large">${nodes.length} nodes: too many to draw (the limit is ${MAX_DAG_NODES}); ` +
      'the graph is printed below.</p>';
  }
  const { width, height } = layout(nodes);
  const byName = new Map(nodes.map(n => [n.name, n]));
  const edges = nodes.flatMap(n => n.inputs.map(i => {
    const from = byName.get(i)!;
    return `<line x1="${from.x + BOX_W / 2}" y1="${from.y + BOX_H}" x2="${n.x + BOX_W / 2}" y2="${n.y}" ` +
      'class="mc-edge" marker-end="url(#mc-arrow)"/>';
  }));
  const boxes = nodes.map(n => {
    const k = kernelOf.get(n.name);
    const fill = k === undefined ? 'var(--jp-layout-color2)' : kernelColour(k);
    const title = k === undefined ? n.name : `${n.name} in ${kernelNames[k]}`;
    return `<g class="mc-node" data-node="${escape(n.name)}"${k === undefined ? '' : ` data-kernel="${k}"`}>` +
      `<title>${escape(title)}</title>` +
      `<rect x="${n.x}" y="${n.y}" width="${BOX_W}" height="${BOX_H}" rx="5" style="fill:${fill}"/>` +
      `<text x="${n.x + BOX_W / 2}" y="${n.y + 15}">${escape(n.name)}</text>` +
      `<text x="${n.x + BOX_W / 2}" y="${n.y + 29}" class="mc-op">${escape(n.op)}</text></g>`;
  });
  return `<svg class="mc-dag" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">` +
    '<defs><marker id="mc-arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" ' +
    'orient="auto"><path d="M0,0L10,5L0,10z" class="mc-arrowhead"/></marker></defs>' +
    `${edges.join('')}${boxes.join('')}</svg>`;
}
