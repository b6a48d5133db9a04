/**
 * Code blocks with provenance: each line of generated code knows the user source lines it was generated
 * from, read from the comments codegen writes above each kernel (`// add = add(mul, 1)  <- cell.py:12`).
 * Lines are spans with data attributes, so hovering one can light up the other side (see index.ts).
 */

import { escape } from './report.js';

/** Larger code blocks are shown collapsed, with their line count, and highlighted only when opened. */
export const MAX_OPEN_LINES = 400;

const FROM_LINE = /<-\s*\S+?:(\d+)/;

/** For each line of `code`, the source lines it comes from: a `<- file:N` comment says N; the code that
 * follows a block of such comments (up to a blank line) comes from all of them. */
export function codeProvenance(code: string): number[][] {
  let block: number[] = [];
  let inComments = false;
  return code.split('\n').map(line => {
    const from = FROM_LINE.exec(line);
    if (from) {
      block = inComments ? [...block, Number(from[1])] : [Number(from[1])];
      inComments = true;
      return [Number(from[1])];
    }
    inComments = false;
    if (line.trim() === '') {
      block = [];
      return [];
    }
    return [...new Set(block)];
  });
}

/** A code block: one span per line; `data-src` lists the source lines a generated line comes from. */
export function codeBlock(code: string, language: string, withProvenance = false): string {
  const text = code.replace(/\n$/, '');
  const provenance = withProvenance ? codeProvenance(text) : [];
  const lines = text.split('\n').map((line, i) => {
    const src = provenance[i]?.length ? ` data-src="${provenance[i].join(' ')}"` : '';
    return `<span class="mc-line"${src}>${escape(line)}</span>`;
  });
  const pre = `<pre class="mc-code" data-language="${escape(language)}">${lines.join('\n')}</pre>`;
  if (lines.length <= MAX_OPEN_LINES) {
    return pre;
  }
  return `<details class="mc-collapsed"><summary>${lines.length} lines (collapsed: large)</summary>${pre}</details>`;
}

/** The user's source, one span per line (`data-line` = its line number), graph-break lines marked. */
export function sourceBlock(source: string, firstLine: number, breaks: Map<number, string>): string {
  const lines = source.replace(/\n$/, '').split('\n').map((line, i) => {
    const n = firstLine + i;
    const reason = breaks.get(n);
    const text = `${String(n).padStart(4)}  ${escape(line)}`;
    return reason === undefined
      ? `<span class="mc-line mc-src" data-line="${n}">${text}</span>`
      : `<span class="mc-line mc-src mc-break-line" data-line="${n}" title="graph break: ${escape(reason)}">` +
        `${text}  \u2190 graph break: ${escape(reason)}</span>`;
  });
  return `<pre class="mc-code mc-source" data-language="python">${lines.join('\n')}</pre>`;
}
