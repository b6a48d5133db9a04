/**
 * The compile report as JSON (the MIME type application/vnd.minicompiler.report+json), rendered
 * to HTML. Mirrors minicompiler/report.py; every string from the report is escaped, so the
 * HTML is safe to put into the page.
 */

export const MIME_TYPE = 'application/vnd.minicompiler.report+json';

export interface StageRecord {
  name: string;
  seconds: number;
  text: string;
  language: string;
  notes: string[];
}

export interface KernelInfo {
  name: string;
  kind: string;
  nodes: string[];
  source_lines: string[];
  code: string;
  language: string;
}

export interface FusionInfo {
  producer: string;
  consumer: string;
  fused: boolean;
  reason: string;
}

export interface GraphReport {
  backend: string;
  guards: string[];
  stages: StageRecord[];
  kernels: KernelInfo[];
  fusion: FusionInfo[];
  fallback: string | null;
}

export interface GraphBreakInfo {
  reason: string;
  filename: string;
  lineno: number | null;
  line: string;
  instruction: string;
  hint: string;
}

export interface InstructionInfo {
  offset: number;
  opname: string;
  argrepr: string;
  lineno: number | null;
  status: string;
}

export interface CompileReport {
  function: string;
  filename: string;
  firstlineno: number;
  source: string;
  bytecode: InstructionInfo[];
  graphs: GraphReport[];
  graph_breaks: GraphBreakInfo[];
  eager_fallback: string | null;
  recompile_reason: string | null;
  compile_seconds: number;
}

export function escape(text: unknown): string {
  return String(text)
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

function ms(seconds: number): string {
  return `${(seconds * 1000).toFixed(1)} ms`;
}

function details(title: string, body: string, open = false): string {
  return `<details${open ? ' open' : ''}><summary><b>${title}</b></summary>${body}</details>`;
}

function table(headers: string[], rows: string[][], rowClasses: string[] = []): string {
  const head = headers.map(h => `<th>${h}</th>`).join('');
  const body = rows
    .map((row, i) => `<tr class="${rowClasses[i] ?? ''}">${row.map(c => `<td>${c}</td>`).join('')}</tr>`)
    .join('');
  return `<table><tr>${head}</tr>${body}</table>`;
}

/** The source with each graph-break line marked, and the break's reason beside it. */
function sourceHtml(report: CompileReport): string {
  if (!report.source) {
    return '';
  }
  const breaks = new Map(report.graph_breaks.filter(b => b.lineno !== null).map(b => [b.lineno, b.reason]));
  const first = report.firstlineno || 1;
  const lines = report.source.replace(/\n$/, '').split('\n').map((line, i) => {
    const reason = breaks.get(first + i);
    const text = `${String(first + i).padStart(4)} ${escape(line)}`;
    return reason === undefined ? text : `<span class="mc-break">${text}  &larr; graph break: ${escape(reason)}</span>`;
  });
  return details('source', `<pre>${lines.join('\n')}</pre>`, report.graph_breaks.length > 0);
}

function bytecodeHtml(report: CompileReport): string {
  if (report.bytecode.length === 0) {
    return '';
  }
  const rows = report.bytecode.map(i => [
    String(i.lineno ?? ''), String(i.offset), `<code>${escape(i.opname)}</code>`, escape(i.argrepr), escape(i.status)
  ]);
  const classes = report.bytecode.map(i => `mc-status-${i.status.replace(' ', '-')}`);
  return details('bytecode', table(['line', 'offset', 'instruction', 'argument', 'status'], rows, classes));
}

function graphHtml(graph: GraphReport, index: number): string {
  const parts = [`<h4>graph ${index} &mdash; backend <code>${escape(graph.backend)}</code></h4>`];
  if (graph.fallback) {
    parts.push(`<p class="mc-break">runs with torch ops: ${escape(graph.fallback)}</p>`);
  }
  parts.push(details(`guards (${graph.guards.length})`,
    `<ul>${graph.guards.map(g => `<li><code>${escape(g)}</code></li>`).join('')}</ul>`));
  for (const stage of graph.stages) {
    const notes = stage.notes.map(n => `<li>${escape(n)}</li>`).join('');
    parts.push(details(`${escape(stage.name)} (${ms(stage.seconds)})`,
      `<pre>${escape(stage.text)}</pre>${notes ? `<ul>${notes}</ul>` : ''}`));
  }
  if (graph.kernels.length > 0) {
    const rows = graph.kernels.map(k => [
      `<code>${escape(k.name)}</code>`, escape(k.kind), escape(k.nodes.join(', ')),
      k.source_lines.map(escape).join('<br>')
    ]);
    parts.push(details(`kernels (${graph.kernels.length})`,
      table(['kernel', 'kind', 'graph nodes', 'from your code'], rows), true));
  }
  if (graph.fusion.length > 0) {
    const refused = graph.fusion.filter(f => !f.fused).length;
    const rows = graph.fusion.map(f => [
      escape(f.producer), escape(f.consumer), f.fused ? 'fused' : '<b>not fused</b>', escape(f.reason)
    ]);
    parts.push(details(`fusion decisions (${refused} refused)`,
      table(['producer', 'consumer', 'decision', 'reason'], rows, graph.fusion.map(f => (f.fused ? '' : 'mc-refused')))));
  }
  return parts.join('');
}

/** The whole report: a summary line, graph breaks, source, bytecode, then each graph. */
export function reportToHtml(report: CompileReport): string {
  const kernels = report.graphs.reduce((n, g) => n + g.kernels.length, 0);
  const parts = [
    `<div><b>minicompiler</b>: <code>${escape(report.function)}</code> &mdash; ${report.graphs.length} graph(s), ` +
      `${kernels} kernel(s), compiled in ${ms(report.compile_seconds)}</div>`
  ];
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
  parts.push(sourceHtml(report), bytecodeHtml(report));
  report.graphs.forEach((graph, i) => parts.push(graphHtml(graph, i)));
  return `<div class="mc-report">${parts.join('')}</div>`;
}
