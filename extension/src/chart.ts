/** A horizontal SVG bar chart (the timings tab): one bar per label, its value printed after it. */

import { escape } from './report.js';

const ROW_H = 22;
const LABEL_W = 170;
const BAR_W = 320;

export function barChart(bars: [string, number][], unit: (v: number) => string): string {
  if (bars.length === 0) {
    return '';
  }
  const max = Math.max(...bars.map(([, v]) => v), Number.MIN_VALUE);
  const rows = bars.map(([label, value], i) => {
    const y = i * ROW_H;
    const w = Math.max(1, (value / max) * BAR_W);
    return `<text x="${LABEL_W - 6}" y="${y + 15}" text-anchor="end">${escape(label)}</text>` +
      `<rect x="${LABEL_W}" y="${y + 3}" width="${w.toFixed(1)}" height="${ROW_H - 6}" class="mc-bar"/>` +
      `<text x="${LABEL_W + w + 6}" y="${y + 15}">${escape(unit(value))}</text>`;
  });
  const width = LABEL_W + BAR_W + 90;
  const height = bars.length * ROW_H;
  return `<svg class="mc-chart" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">` +
    `${rows.join('')}</svg>`;
}
