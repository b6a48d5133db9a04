/**
 * A JupyterLab MIME renderer for minicompiler's compile report: outputs that carry
 * application/vnd.minicompiler.report+json are drawn from the report's JSON (so a saved notebook shows
 * the report after a reload, without a running kernel) as tabs, with the graphs as DAGs, generated code
 * highlighted by JupyterLab's own CodeMirror highlighter, and kernel lines linked to source lines.
 */

import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { highlightBlock } from './highlight.js';
import { MIME_TYPE, parseReport } from './report.js';
import { reportToHtml } from './view.js';

class ReportWidget extends Widget implements IRenderMime.IRenderer {
  constructor() {
    super();
    this.addClass('mc-report-output');
    this.node.addEventListener('click', event => this.onClick(event));
    this.node.addEventListener('mouseover', event => this.onHover(event, true));
    this.node.addEventListener('mouseout', event => this.onHover(event, false));
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const report = parseReport(model.data[MIME_TYPE]);
    if (report instanceof Error) {
      this.node.innerHTML = '';
      const message = document.createElement('pre');
      message.className = 'mc-parse-error';
      message.textContent = `minicompiler: this compile report cannot be shown: ${report.message}`;
      this.node.appendChild(message);
      return Promise.resolve();
    }
    this.node.innerHTML = reportToHtml(report); // every report string is escaped by the view
    this.showTab('0');
    return Promise.resolve();
  }

  private showTab(index: string): void {
    this.node.querySelectorAll<HTMLElement>('.mc-tab').forEach(tab =>
      tab.classList.toggle('mc-active', tab.dataset.tab === index));
    this.node.querySelectorAll<HTMLElement>('.mc-panel').forEach(panel => {
      panel.hidden = panel.dataset.tab !== index;
      if (!panel.hidden) { // highlight a panel's code when first shown: a large report stays cheap
        panel.querySelectorAll<HTMLElement>('pre.mc-code:not(.mc-source):not([data-highlighted])')
          .forEach(pre => highlightBlock(pre));
      }
    });
  }

  private onClick(event: Event): void {
    const tab = (event.target as HTMLElement).closest<HTMLElement>('.mc-tab');
    if (tab?.dataset.tab !== undefined) {
      this.showTab(tab.dataset.tab);
    }
  }

  /** Hovering a generated line lights up the source lines it came from; hovering a source line, the
   * generated lines that came from it. */
  private onHover(event: Event, on: boolean): void {
    const line = (event.target as HTMLElement).closest<HTMLElement>('.mc-line');
    if (!line) {
      return;
    }
    const panel = line.closest('.mc-panel') ?? this.node;
    const lit = line.dataset.line !== undefined
      ? panel.querySelectorAll<HTMLElement>(`.mc-line[data-src~="${line.dataset.line}"]`)
      : (line.dataset.src ?? '').split(' ').filter(Boolean).flatMap(n =>
          [...panel.querySelectorAll<HTMLElement>(`.mc-src[data-line="${n}"]`)]);
    if (lit.length === 0) {
      return;
    }
    line.classList.toggle('mc-lit', on);
    lit.forEach(el => el.classList.toggle('mc-lit', on));
  }
}

export const rendererFactory: IRenderMime.IRendererFactory = {
  safe: true,
  mimeTypes: [MIME_TYPE],
  // Lower ranks win: below text/html's 50, so JupyterLab draws the report from its JSON rather
  // than showing the static HTML fallback that travels in the same output.
  defaultRank: 40,
  createRenderer: () => new ReportWidget()
};

const extension: IRenderMime.IExtension = {
  id: 'minicompiler-jupyterlab:report',
  rendererFactory,
  rank: 40,
  dataType: 'json',
  documentWidgetFactoryOptions: []
};

export default extension;
