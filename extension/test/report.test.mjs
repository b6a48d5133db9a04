// Unit test of the renderer's HTML (no browser needed): node --test test/  (after `tsc`)
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';

// A report's JSON, written by tests/notebook/test_extension.py from the Python test fixture.
const path = process.env.MC_REPORT_JSON;
const { reportToHtml, escape } = await import('../lib/report.js');
const report = path ? JSON.parse(readFileSync(path, 'utf8')) : null;
const options = { skip: path ? false : 'set MC_REPORT_JSON to a report JSON file' };

test('renders stages, kernels, guards and breaks', options, () => {
  const html = reportToHtml(report);
  for (const text of ['graph break at line 13', 'kernel_cos_mul_add', 'decompose', 'not fused',
                      'x: float32[4, 8] contiguous']) {
    assert.ok(html.includes(text), text);
  }
});

test('escapes everything taken from the report', options, () => {
  const html = reportToHtml({ ...report, function: '<img src=x onerror=alert(1)>' });
  assert.ok(!html.includes('<img'));
  assert.equal(escape('a<b & "c"'), 'a&lt;b &amp; &quot;c&quot;');
});
