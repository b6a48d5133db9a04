/**
 * The compile report as JSON (the MIME type application/vnd.minicompiler.report+json): its types, which
 * mirror minicompiler/report.py, and a check that data is one. Every string from a report is escaped
 * (escape) before it goes into the page.
 */

export const MIME_TYPE = 'application/vnd.minicompiler.report+json';

export interface StageRecord {
  name: string;
  seconds: number;
  text: string;
  language: string;
  notes: string[];
  node_lines?: Record<string, number>;
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
  autograd?: StageRecord[];
  saved_tensors?: string[];
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
  run_times?: Record<string, number>;
}

export function escape(text: unknown): string {
  return String(text)
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/** The report in `data`, or an error saying what is missing (a saved output may be from another version). */
export function parseReport(data: unknown): CompileReport | Error {
  if (typeof data === 'string') {
    try {
      data = JSON.parse(data);
    } catch (e) {
      return new Error(`the report is not JSON: ${(e as Error).message}`);
    }
  }
  if (data === null || typeof data !== 'object') {
    return new Error(`the report is ${data === null ? 'null' : typeof data}, not an object`);
  }
  const report = data as Record<string, unknown>;
  for (const [key, type] of [['function', 'string'], ['graphs', 'array'], ['graph_breaks', 'array']]) {
    const value = report[key];
    if (type === 'array' ? !Array.isArray(value) : typeof value !== type) {
      return new Error(`the report has no ${key} (${type})`);
    }
  }
  const defaults = { filename: '', firstlineno: 1, source: '', bytecode: [], eager_fallback: null,
    recompile_reason: null, compile_seconds: 0, run_times: {} };
  return { ...defaults, ...report } as unknown as CompileReport;
}
