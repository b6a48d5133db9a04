// Unit tests of the renderer's HTML (no browser needed): node --test test/  (after `tsc`).
// MC_REPORT_JSON names a report's JSON, written by tests/notebook/test_extension.py from the Python test fixture.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

const { parseReport, escape } = await import('../lib/report.js');
const { reportToHtml, reportTabs } = await import('../lib/view.js');
const { parseGraph, layout, dagSvg, MAX_DAG_NODES } = await import('../lib/dag.js');
const { codeProvenance, codeBlock, MAX_OPEN_LINES } = await import('../lib/code.js');
const { barChart } = await import('../lib/chart.js');

const path = process.env.MC_REPORT_JSON;
const report = path ? JSON.parse(readFileSync(path, 'utf8')) : null;
const options = { skip: path ? false : 'set MC_REPORT_JSON to a report JSON file' };

test('the report shows each stage as a tab', options, () => {
  const labels = reportTabs(parseReport(report)).map(t => t.label);
  for (const label of ['summary', 'source', 'bytecode', 'capture', 'decompose', 'simplify', 'fusion', 'kernels',
                       'timings']) {
    assert.ok(labels.includes(label), `${label} in ${labels}`);
  }
  assert.ok(labels.some(l => l.startsWith('codegen')), labels.join(', '));
});

test('graph breaks and refused fusions are shown with their reasons', options, () => {
  const html = reportToHtml(parseReport(report));
  for (const text of ['graph break at line 13', 'print() has side effects', 'not fused',
                      'x: float32[4, 8] contiguous', 'kernel_cos_mul_add']) {
    assert.ok(html.includes(escape(text)), text);
  }
});

test('graphs are drawn with nodes coloured by their kernel', options, () => {
  const graph = report.graphs[0];
  const simplified = graph.stages.find(s => s.name === 'simplify');
  const kernelOf = new Map(graph.kernels.flatMap((k, i) => k.nodes.map(n => [n, i])));
  const svg = dagSvg(simplified.text, kernelOf, graph.kernels.map(k => k.name));
  assert.match(svg, /<svg class="mc-dag"/);
  assert.match(svg, /data-node="cos" data-kernel="0"/);
  assert.match(svg, /data-node="amax" data-kernel="1"/);
  assert.match(svg, /data-node="x">/); // an input is in no kernel
});

test('a printed graph parses into nodes and edges, laid out in layers', () => {
  const nodes = parseGraph('def forward(x: "float32[4]", w: "float32[4]"):\n' +
    '    a = ops.cos(x)   # float32[4]  cell.py:2  torch.cos(x)\n' +
    '    b = ops.mul(a, w)   # float32[4]\n    return b');
  assert.deepEqual(nodes.map(n => [n.name, n.op, n.inputs]),
    [['x', 'input', []], ['w', 'input', []], ['a', 'cos', ['x']], ['b', 'mul', ['a', 'w']], ['output', 'output', ['b']]]);
  layout(nodes);
  const y = Object.fromEntries(nodes.map(n => [n.name, n.y]));
  assert.ok(y.x === y.w && y.x < y.a && y.a < y.b && y.b < y.output);
  assert.equal(parseGraph('steps:\n  kernel_a'), null);
});

test('a graph too large to draw is collapsed with its node count', () => {
  const body = Array.from({ length: MAX_DAG_NODES + 5 }, (_, i) => `    n${i} = ops.neg(${i ? `n${i - 1}` : 'x'})`);
  const html = dagSvg(['def forward(x):', ...body, `    return n${MAX_DAG_NODES + 4}`].join('\n'), new Map(), []);
  assert.ok(!html.includes('<svg'));
  assert.match(html, new RegExp(`${MAX_DAG_NODES + 7} nodes: too many to draw`));
  const long = codeBlock(Array(MAX_OPEN_LINES + 1).fill('x = 1').join('\n'), 'python');
  assert.match(long, new RegExp(`<details class="mc-collapsed"><summary>${MAX_OPEN_LINES + 1} lines`));
});

test('each generated line knows the source lines it came from', () => {
  const code = '// a = cos(x)  <- cell.py:11\n// b = mul(a, w)  <- cell.py:12\nvoid k() {\n  out = a;\n}\n\n' +
    '// c = exp(b)  <- cell.py:14\nvoid k2() {}';
  assert.deepEqual(codeProvenance(code), [[11], [12], [11, 12], [11, 12], [11, 12], [], [14], [14]]);
  assert.match(codeBlock(code, 'cpp', true), /<span class="mc-line" data-src="11 12">void k\(\) \{<\/span>/);
});

test('a report that is not one gives a clear error', () => {
  assert.match(parseReport('{not json').message, /not JSON/);
  assert.match(parseReport(null).message, /null/);
  assert.match(parseReport({ function: 'f', graphs: 3, graph_breaks: [] }).message, /no graphs/);
});

test('escapes everything taken from the report', options, () => {
  const html = reportToHtml(parseReport({ ...report, function: '<img src=x onerror=alert(1)>' }));
  assert.ok(!html.includes('<img'));
  assert.equal(escape('a<b & "c"'), 'a&lt;b &amp; &quot;c&quot;');
});

test('the timing chart has one bar per value, scaled to the largest', () => {
  const svg = barChart([['eager', 2], ['compiled', 1]], v => `${v} s`);
  const widths = [...svg.matchAll(/class="mc-bar"/g)].length;
  assert.equal(widths, 2);
  assert.match(svg, /width="320.0" height="16" class="mc-bar"\/><text x="496" y="15">2 s/);
  assert.match(svg, /width="160.0"/);
});
