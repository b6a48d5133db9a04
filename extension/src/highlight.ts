/**
 * Code highlighted as JupyterLab's editor highlights it: the Lezer parsers of CodeMirror 6's Python and
 * C++ language support, styled by @jupyterlab/codemirror's jupyterHighlightStyle (its colours are the
 * theme's --jp-mirror-editor-* variables, so light and dark themes follow). The code stays plain spans,
 * one per line, so provenance hover keeps working on them.
 */

import { cppLanguage } from '@codemirror/lang-cpp';
import { pythonLanguage } from '@codemirror/lang-python';
import { jupyterHighlightStyle } from '@jupyterlab/codemirror';
import { highlightCode } from '@lezer/highlight';

const PARSERS: Record<string, { parser: typeof pythonLanguage.parser }> = {
  python: pythonLanguage,
  triton: pythonLanguage,
  cpp: cppLanguage
};

let styleMounted = false;

function mountStyle(): void {
  const rules = jupyterHighlightStyle.module?.getRules();
  if (!styleMounted && rules) {
    const style = document.createElement('style');
    style.textContent = rules;
    document.head.appendChild(style);
    styleMounted = true;
  }
}

/** Replaces each line span's text in `pre` (made by code.ts's codeBlock) with highlighted spans. */
export function highlightBlock(pre: HTMLElement): void {
  pre.dataset.highlighted = 'true';
  const language = PARSERS[pre.dataset.language ?? ''];
  const lineSpans = [...pre.querySelectorAll<HTMLElement>(':scope > .mc-line')];
  if (!language || lineSpans.length === 0) {
    return;
  }
  mountStyle();
  const code = lineSpans.map(span => span.textContent ?? '').join('\n');
  const lines: HTMLElement[][] = [[]];
  highlightCode(code, language.parser.parse(code), jupyterHighlightStyle,
    (text, classes) => {
      const span = document.createElement('span');
      span.textContent = text;
      span.className = classes;
      lines[lines.length - 1].push(span);
    },
    () => lines.push([]));
  lineSpans.forEach((span, i) => span.replaceChildren(...(lines[i] ?? [])));
}
