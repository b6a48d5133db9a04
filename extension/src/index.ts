/**
 * A JupyterLab MIME renderer for minicompiler's compile report: outputs that carry
 * application/vnd.minicompiler.report+json are drawn from the report's JSON, so a saved
 * notebook shows the report after a reload, without a running kernel.
 */

import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import { Widget } from '@lumino/widgets';

import { CompileReport, MIME_TYPE, reportToHtml } from './report';

class ReportWidget extends Widget implements IRenderMime.IRenderer {
  constructor() {
    super();
    this.addClass('mc-report-output');
  }

  renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    const report = model.data[MIME_TYPE] as unknown as CompileReport;
    this.node.innerHTML = reportToHtml(report); // every report string is escaped by reportToHtml
    return Promise.resolve();
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
