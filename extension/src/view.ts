/**
 * The report as tabs, one per stage (source, bytecode, each graph stage, autograd, fusion, kernels,
 * generated code, timings), built as an HTML string with no browser APIs so node can test it.
 * index.ts puts it into the page and wires tab switching, highlighting and hover.
 */

import { barChart } from './chart.js';
import { codeBlock, sourceBlock } from './code.js';
import { dagSvg, kernelColour } from './dag.js';
import { CompileReport, escape, GraphReport, StageRecord } from './report.js';

export interface Tab {
  label: string;
  html: string;
}

function ms(seconds: number): string {
  return `${(seconds * 1000).toFixed(2)} ms`;
}

function table(headers: string[], rows: string[][], rowClasses: string[] = []): string {
  const head = headers.map(h => `<th>${h}</th>`).join('');
  const body = rows
    .map((row, i) => `<tr class="${rowClasses[i] ?? ''}">${row.map(c => `<td>${c}</td>`).join('')}</tr>`)
    .join('');
  return `<table><tr>${head}</tr>${body}</table>`;
}

function swatch(kernel: number, name: string): string {
  return `<span class="mc-swatch" style="background:${kernelColour(kernel)}">${escape(name)}</span>`;
}

function breakLines(report: CompileReport): Map<number, string> {
  return new Map(report.graph_breaks.filter(b => b.lineno !== null).map(b => [b.lineno as number, b.reason]));
}

function summary(report: CompileReport): string {
  const kernels = report.graphs.reduce((n, g) => n + (g.kernels?.length ?? 0), 0);
  const parts = [`<p><b>minicompiler</b>: <code>${escape(report.function)}</code> &mdash; ` +
    `${report.graphs.length} graph(s), ${kernels} kernel(s), compiled in ${ms(report.compile_seconds)}</p>`];
  if (report.recompile_reason) {
    parts.push(`<p class="mc-break">recompiled because ${escape(report.recompile_reason)}</p>`);
  }
  if (report.eager_fallback) {
    parts.push(`<p class="mc-break">runs eagerly: ${escape(report.eager_fallback)}</p>`);
  }
  for (const b of report.graph_breaks) {
    const hint = b.hint ? ` <i>(hint: ${escape(b.hint)})</i>` : '';
    parts.push(`<p class="mc-break">graph break at line ${b.lineno ?? '?'} <code>${escape(b.line)}</code>: ` +
      `${escape(b.reason)}${hint}</p>`);
  }
  report.graphs.forEach((g, i) => {
    if (g.fallback) {
      parts.push(`<p class="mc-break">graph ${i} runs with torch ops: ${escape(g.fallback)}</p>`);
    }
    for (const f of (g.fusion ?? []).filter(f => !f.fused)) {
      parts.push(`<p class="mc-refused">graph ${i}: ${escape(f.producer)} &rarr; ${escape(f.consumer)} ` +
        `not fused: ${escape(f.reason)}</p>`);
    }
  });
  return parts.join('');
}

function bytecode(report: CompileReport): string {
  const rows = report.bytecode.map(i => [
    String(i.lineno ?? ''), String(i.offset), `<code>${escape(i.opname)}</code>`, escape(i.argrepr), escape(i.status)
  ]);
  const classes = report.bytecode.map(i => `mc-status-${i.status.replace(/ /g, '-')}`);
  return table(['line', 'offset', 'instruction', 'argument', 'status'], rows, classes);
}

/** A stage: its graph drawn as a DAG (nodes coloured by kernel) when it is one, then its text and notes. */
function stage(s: StageRecord, graph: GraphReport): string {
  const kernels = graph.kernels ?? [];
  const kernelOf = new Map<string, number>();
  kernels.forEach((k, i) => k.nodes.forEach(n => kernelOf.set(n, i)));
  const legend = kernels.map((k, i) => swatch(i, k.name)).join(' ');
  const svg = s.language === 'python' ? dagSvg(s.text, kernelOf, kernels.map(k => k.name)) : null;
  const notes = s.notes.map(n => `<li>${escape(n)}</li>`).join('');
  return `<p class="mc-muted">${escape(s.name)}: ${ms(s.seconds)}</p>` +
    (svg ? `<div class="mc-legend">${legend}</div><div class="mc-dag-box">${svg}</div>` : '') +
    codeBlock(s.text, s.language, s.language !== 'python') + (notes ? `<ul>${notes}</ul>` : '');
}

function fusion(graph: GraphReport): string {
  const rows = graph.fusion.map(f => [
    escape(f.producer), escape(f.consumer), f.fused ? 'fused' : '<b>not fused</b>', escape(f.reason)
  ]);
  return table(['producer', 'consumer', 'decision', 'reason'], rows, graph.fusion.map(f => (f.fused ? '' : 'mc-refused')));
}

/** The kernels beside the user's source: hovering a kernel line lights up the source lines it came from. */
function kernels(report: CompileReport, graph: GraphReport): string {
  const list = graph.kernels.map((k, i) =>
    `<h4>${swatch(i, k.name)} <small>${escape(k.kind)}: ` +
    `${escape(k.nodes.join(', '))}</small></h4>` + (k.code ? codeBlock(k.code, k.language, true) : ''));
  const source = report.source ? sourceBlock(report.source, report.firstlineno || 1, breakLines(report)) : '';
  return `<div class="mc-side-by-side"><div class="mc-pane">${source}</div>` +
    `<div class="mc-pane">${list.join('')}</div></div>`;
}

function timings(report: CompileReport): string {
  const stages: [string, number][] = report.graphs.flatMap((g, i) =>
    g.stages.map(s => [`${report.graphs.length > 1 ? `g${i} ` : ''}${s.name}`, s.seconds] as [string, number]));
  const runs = Object.entries(report.run_times ?? {});
  return `<h4>compile time per stage</h4>${barChart(stages, ms)}` +
    (runs.length ? `<h4>time per call</h4>${barChart(runs, ms)}` : '');
}

function graphTabs(report: CompileReport, graph: GraphReport, prefix: string): Tab[] {
  const tabs: Tab[] = [];
  if (graph.guards.length) {
    const items = graph.guards.map(g => `<li><code>${escape(g)}</code></li>`).join('');
    tabs.push({ label: `${prefix}guards`, html: `<ul>${items}</ul>` });
  }
  const isCode = (s: StageRecord): boolean => s.language === 'cpp' || /triton|codegen/.test(s.name);
  for (const s of graph.stages.filter(s => !isCode(s))) {
    tabs.push({ label: prefix + s.name, html: stage(s, graph) });
  }
  for (const s of graph.autograd ?? []) {
    tabs.push({ label: prefix + s.name, html: stage(s, graph) });
  }
  if (graph.fusion?.length) {
    tabs.push({ label: `${prefix}fusion`, html: fusion(graph) });
  }
  if (graph.kernels?.length) {
    tabs.push({ label: `${prefix}kernels`, html: kernels(report, graph) });
  }
  for (const s of graph.stages.filter(isCode)) {
    tabs.push({ label: `${prefix}${s.name} (${s.language})`, html: stage(s, graph) });
  }
  return tabs;
}

export function reportTabs(report: CompileReport): Tab[] {
  const tabs: Tab[] = [{ label: 'summary', html: summary(report) }];
  if (report.source) {
    tabs.push({ label: 'source', html: sourceBlock(report.source, report.firstlineno || 1, breakLines(report)) });
  }
  if (report.bytecode.length) {
    tabs.push({ label: 'bytecode', html: bytecode(report) });
  }
  report.graphs.forEach((g, i) => tabs.push(...graphTabs(report, g, report.graphs.length > 1 ? `g${i} ` : '')));
  tabs.push({ label: 'timings', html: timings(report) });
  return tabs;
}

/** The whole report: a tab bar and one panel per tab, the first shown. */
export function reportToHtml(report: CompileReport): string {
  const tabs = reportTabs(report);
  const bar = tabs.map((t, i) =>
    `<button class="mc-tab${i === 0 ? ' mc-active' : ''}" data-tab="${i}">${escape(t.label)}</button>`).join('');
  const panels = tabs.map((t, i) =>
    `<div class="mc-panel" data-tab="${i}"${i === 0 ? '' : ' hidden'}>${t.html}</div>`).join('');
  return `<div class="mc-report mc-rich"><div class="mc-tabbar" role="tablist">${bar}</div>${panels}</div>`;
}
