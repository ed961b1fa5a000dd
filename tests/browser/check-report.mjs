// Opens RESULTS/index.html (written by `dplab report`) in Chromium, headless, from the file
// system, and fails (exit 1, every failure listed) when:
//   - an experiment has no section: every results directory with a manifest.json, and every
//     pipeline file under PIPELINES, must have one;
//   - a figure does not load (an <img> that is not complete with a natural width, or a failed request);
//   - the page logs a console error or throws;
//   - the summary's counts differ from counts made here from the frames themselves: every
//     `<stage>.csv` with a `verdict` or `verdict_<c>` column, by the rule the page states
//     (agrees / within CI / within → agree; differs / explained / unexplained → differ; other
//     words — not run, no data, side by side — are not compared).
// Screenshots: SCREENSHOT (the summary, first screen) and SCREENSHOT with `-full` (whole page).
//
// Usage: node check-report.mjs RESULTS PIPELINES SCREENSHOT   (CHROMIUM: the browser binary)
import { readFileSync, readdirSync, statSync, existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { parse } from 'csv-parse/sync';
import { chromium } from 'playwright-core';

const [results, pipelines, screenshot] = process.argv.slice(2);
if (!results || !pipelines || !screenshot) {
  console.error('usage: node check-report.mjs RESULTS PIPELINES SCREENSHOT');
  process.exit(2);
}
const failures = [];
const fail = (m) => failures.push(m);

// What the page must show, found without dplab.
const expected = new Set();
for (const d of readdirSync(results)) {
  if (!d.startsWith('.') && statSync(join(results, d)).isDirectory() && existsSync(join(results, d, 'manifest.json'))) {
    expected.add(d);
  }
}
const walk = (dir) => readdirSync(dir).flatMap((f) => {
  const p = join(dir, f);
  return statSync(p).isDirectory() ? walk(p) : (/\.ya?ml$/.test(f) ? [p] : []);
});
for (const f of walk(pipelines)) {
  const m = readFileSync(f, 'utf8').match(/^name:\s*["']?([A-Za-z0-9._-]+)/m);
  if (m) expected.add(m[1]);
  else fail(`${f}: no top-level name`);
}

const AGREE = new Set(['agrees', 'within CI', 'within']);
const DIFFER = new Set(['differs', 'explained', 'unexplained']);
const frames = { compared: 0, agree: 0, differ: 0 };
for (const d of expected) {
  const dir = join(results, d);
  if (!existsSync(dir)) continue;
  for (const f of readdirSync(dir).filter((f) => f.endsWith('.csv'))) {
    const rows = parse(readFileSync(join(dir, f)), { columns: true, skip_empty_lines: true });
    if (rows.length === 0) continue;
    const cols = Object.keys(rows[0]).filter((c) => c === 'verdict' || c.startsWith('verdict_'));
    for (const r of rows) {
      for (const c of cols) {
        const w = (r[c] ?? '').trim();
        if (AGREE.has(w)) { frames.compared++; frames.agree++; }
        else if (DIFFER.has(w)) { frames.compared++; frames.differ++; }
      }
    }
  }
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  headless: true,
  // Root in CI: Chromium's sandbox needs an unprivileged user.
  args: ['--no-sandbox'],
}).catch((e) => {
  console.error(`FAIL: cannot start Chromium: ${e.message}`);
  process.exit(1);
});
const page = await browser.newPage({ viewport: { width: 1400, height: 1800 } });
page.on('console', (m) => { if (m.type() === 'error') fail(`console error: ${m.text()}`); });
page.on('pageerror', (e) => fail(`page error: ${e.message}`));
page.on('requestfailed', (r) => fail(`request failed: ${r.url()} (${r.failure()?.errorText})`));
const url = pathToFileURL(resolve(results, 'index.html')).href;
const response = await page.goto(url, { waitUntil: 'load' });
if (!response || !response.ok()) fail(`${url}: did not load`);

const sections = await page.$$eval('section.experiment', (s) => s.map((x) => ({
  id: x.dataset.id, status: x.dataset.status,
  compared: +x.dataset.compared, agree: +x.dataset.agree, differ: +x.dataset.differ,
})));
const shown = new Set(sections.map((s) => s.id));
for (const id of expected) if (!shown.has(id)) fail(`no section for experiment ${id}`);
for (const s of sections) {
  if (s.status === 'damaged') fail(`experiment ${s.id} is shown as damaged`);
}

const images = await page.$$eval('img', (imgs) => imgs.map((i) => ({
  src: i.getAttribute('src'), ok: i.complete && i.naturalWidth > 0,
})));
for (const i of images) if (!i.ok) fail(`figure did not load: ${i.src}`);
const figureProblems = await page.$$eval('figure .problem', (p) => p.map((x) => x.textContent));
for (const p of figureProblems) fail(`figure not shown: ${p}`);
const withFigures = new Set(readdirSync(results).filter((d) => expected.has(d) && readdirSync(join(results, d)).some((f) => f.endsWith('.svg'))));
const shownFigures = new Set(images.map((i) => decodeURIComponent(i.src.split('/')[0])));
for (const d of withFigures) if (!shownFigures.has(d)) fail(`experiment ${d} has SVG figures but the page shows none`);

const summary = await page.$eval('#summary', (s) => ({
  experiments: +s.dataset.experiments, compared: +s.dataset.compared,
  agree: +s.dataset.agree, differ: +s.dataset.differ,
}));
for (const k of ['compared', 'agree', 'differ']) {
  if (summary[k] !== frames[k]) fail(`summary says ${summary[k]} ${k}, the frames ${frames[k]}`);
  const sum = sections.reduce((a, s) => a + s[k], 0);
  if (sum !== frames[k]) fail(`the sections add up to ${sum} ${k}, the frames ${frames[k]}`);
}
if (summary.experiments !== expected.size) fail(`summary says ${summary.experiments} experiments, expected ${expected.size}`);
const listed = await page.$$eval('#disagreements tbody tr', (r) => r.length).catch(() => 0);
if (listed !== frames.differ) fail(`the disagreement list has ${listed} rows, the frames ${frames.differ} disagreements`);
const cells = await page.$$eval('table.result td.v-agree, table.result td.v-within, table.result td.v-explained, table.result td.v-differ',
  (c) => c.filter((x) => !/^[+−-]?[0-9]/.test(x.textContent.trim())).length);
if (cells !== frames.compared) fail(`the tables colour ${cells} verdict cells, the frames have ${frames.compared}`);

await page.screenshot({ path: screenshot });
await page.screenshot({ path: screenshot.replace(/\.png$/, '-full.png'), fullPage: true });
await browser.close();

console.log(`report: ${sections.length} sections (${expected.size} expected), ${images.length} figures loaded, ` +
  `${summary.compared} printed numbers compared: ${summary.agree} agree, ${summary.differ} differ (frames: ` +
  `${frames.compared}/${frames.agree}/${frames.differ}); screenshot ${screenshot}`);
if (failures.length) {
  for (const f of failures) console.error(`FAIL: ${f}`);
  process.exit(1);
}
