// Opens RESULTS/index.html (written by `dplab report`) in Chromium, headless, from the file
// system, and fails (exit 1, every failure listed) when:
//   - an experiment has no section: every results directory with a manifest.json, and every
//     pipeline file under PIPELINES, must have one;
//   - a figure does not load (an <img> that is not complete with a natural width, or a failed request);
//   - the page logs a console error or throws;
//   - the summary's counts differ from counts made here from the frames themselves: every
//     `<stage>.csv` with a `verdict` or `verdict_<c>` column, by the rule the page states
//     (agrees / within CI → agree; explained / unexplained → differ; not run, no data, side by
//     side, no paper value → not compared; any other word fails), and from the manifests'
//     `findings` — or the page colours, lists or counts a different number of cells of any
//     verdict than the frames hold; a benchmark's verdicts (a frame whose layout `<stage>.json`
//     says `in_audits`: another tool's published flags beside ours) are counted apart, against
//     the summary's benchmark count, and are in no list of differences;
//   - the Audits section differs from the audit frames: every row of every `<stage>.csv` of a
//     stage of kind audit.epsilon (as the manifests record) must be a row of its table, with
//     its epsilon_lb and violation, flagged rows first, the section linked from the side menu
//     and saying that no violation proves nothing;
//   - the layout hides what it shows: the summary is followed by the experiments and only then
//     by the list of differences; no table sticks out of the page's column; no verdict cell of
//     a table lies beyond what its scroll box shows; every figure links to itself at full size;
//   - a long table's folded rows do not unfold when its label is clicked.
// Screenshots: SCREENSHOT (the summary, first screen), SCREENSHOT with `-full` (whole page) and
// with `-audits` (the Audits section).
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

const WORDS = { 'agrees': 'agrees', 'within CI': 'within', 'explained': 'explained', 'unexplained': 'unexplained' };
const NOT_COMPARED = new Set(['', 'not run', 'no data', 'side by side', 'no paper value']);
const tally = () => ({ compared: 0, agree: 0, differ: 0, agrees: 0, within: 0, explained: 0, unexplained: 0 });
const count = (t, w) => {
  t.compared++; t[WORDS[w]]++;
  if (w === 'agrees' || w === 'within CI') t.agree++; else t.differ++;
};
const frames = tally();
const bench = tally();
const findings = tally();
const auditRows = [];
for (const d of expected) {
  const dir = join(results, d);
  if (!existsSync(dir)) continue;
  for (const f of readdirSync(dir).filter((f) => f.endsWith('.csv'))) {
    const rows = parse(readFileSync(join(dir, f)), { columns: true, skip_empty_lines: true });
    if (rows.length === 0) continue;
    const cols = Object.keys(rows[0]).filter((c) => c === 'verdict' || c.startsWith('verdict_'));
    const layout = join(dir, f.replace(/\.csv$/, '.json'));
    const inAudits = existsSync(layout) && JSON.parse(readFileSync(layout, 'utf8')).in_audits === true;
    for (const r of rows) {
      for (const c of cols) {
        const w = (r[c] ?? '').trim();
        if (w in WORDS) count(inAudits ? bench : frames, w);
        else if (!NOT_COMPARED.has(w)) fail(`${d}/${f}: \`${w}\` in column ${c} is not a verdict`);
      }
    }
  }
  const manifest = JSON.parse(readFileSync(join(dir, 'manifest.json'), 'utf8'));
  for (const st of manifest.stages ?? []) {
    if (st.kind !== 'audit.epsilon' || !existsSync(join(dir, `${st.name}.csv`))) continue;
    const rows = parse(readFileSync(join(dir, `${st.name}.csv`)), { columns: true, skip_empty_lines: true });
    for (const r of rows) {
      if (!('epsilon_lb' in r) || !('violation' in r)) { fail(`${d}/${st.name}.csv: an audit frame without epsilon_lb or violation`); break; }
      auditRows.push(`${d}|${st.name}|${r.epsilon_lb}|${r.violation}`);
    }
  }
  for (const x of manifest.pipeline?.findings ?? []) {
    if (x.verdict in WORDS) count(findings, x.verdict);
    else fail(`${d}: finding with verdict ${x.verdict}`);
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

const audits = await page.$$eval('#audits-table tbody tr.audit', (rows) => rows.map((r) =>
  `${r.dataset.pipeline}|${r.dataset.stage}|${r.dataset.epsilonLb}|${r.dataset.violation}`));
{
  const want = [...auditRows].sort();
  const got = [...audits].sort();
  if (got.length !== want.length) fail(`the Audits table has ${got.length} rows, the audit frames ${want.length}`);
  else if (got.some((g, i) => g !== want[i])) {
    const missing = want.filter((w) => !got.includes(w));
    fail(`the Audits table's rows differ from the audit frames: ${missing.slice(0, 3).join('; ')} not shown`);
  }
  const flags = audits.map((a) => a.endsWith('|true'));
  if (flags.some((f, i) => f && i > 0 && !flags[i - 1])) fail('a flagged audit is listed after one not flagged');
  if (want.length > 0) {
    const link = await page.$('nav a[href="#audits"]');
    if (!link) fail('the side menu has no link to the Audits section');
    const said = await page.$eval('#audits', (s) => s.textContent).catch(() => '');
    if (!said.includes('No violation proves nothing')) fail('the Audits section does not say that no violation proves nothing');
  }
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
  explained: +s.dataset.explained, unexplained: +s.dataset.unexplained,
  findings: +s.dataset.findings, findingsAgree: +s.dataset.findingsAgree,
  findingsExplained: +s.dataset.findingsExplained, findingsUnexplained: +s.dataset.findingsUnexplained,
}));
for (const k of ['compared', 'agree', 'differ', 'explained', 'unexplained']) {
  if (summary[k] !== frames[k]) fail(`summary says ${summary[k]} ${k}, the frames ${frames[k]}`);
}
{
  const b = await page.$eval('#summary-benchmark', (s) => ({
    compared: +s.dataset.compared, agree: +s.dataset.agree, differ: +s.dataset.differ,
  })).catch(() => ({ compared: 0, agree: 0, differ: 0 }));
  for (const k of ['compared', 'agree', 'differ']) {
    if (b[k] !== bench[k]) fail(`summary says ${b[k]} benchmark verdicts ${k}, the benchmark frames ${bench[k]}`);
  }
}
for (const k of ['compared', 'agree', 'differ']) {
  const sum = sections.reduce((a, s) => a + s[k], 0);
  if (sum !== frames[k]) fail(`the sections add up to ${sum} ${k}, the frames ${frames[k]}`);
}
for (const [k, v] of [['findings', findings.compared], ['findingsAgree', findings.agree],
  ['findingsExplained', findings.explained], ['findingsUnexplained', findings.unexplained]]) {
  if (summary[k] !== v) fail(`summary says ${summary[k]} ${k}, the manifests ${v}`);
}
if (summary.experiments !== expected.size) fail(`summary says ${summary.experiments} experiments, expected ${expected.size}`);
const listed = await page.$$eval('#disagreements tbody tr.difference', (r) => r.length).catch(() => 0);
if (listed !== frames.differ) fail(`the disagreement list has ${listed} rows, the frames ${frames.differ} disagreements`);
// Each verdict cell once, coloured by its word: the verdict column of a table (its word,
// perhaps with a cause's [k]) or a cell of a table in the thesis's layout.
const coloured = await page.evaluate(() => {
  const n = { agrees: 0, within: 0, explained: 0, unexplained: 0 };
  const cls = { 'v-agree': 'agrees', 'v-within': 'within', 'v-explained': 'explained', 'v-unexplained': 'unexplained' };
  for (const td of document.querySelectorAll('table.result td, table.thesis td')) {
    const k = Object.keys(cls).find((c) => td.classList.contains(c));
    if (!k) continue;
    const word = td.closest('table.thesis') ? td.querySelector('.verdict-word')?.textContent.trim()
      : td.textContent.trim().replace(/ \[[0-9]+\]$/, '');
    if (word === undefined || /^[+−-]?[0-9]/.test(word)) continue; // a difference Δ, coloured too
    if (word !== { agrees: 'agrees', within: 'within CI', explained: 'explained', unexplained: 'unexplained' }[cls[k]]) {
      n.mismatch = (n.mismatch ?? 0) + 1;
    }
    n[cls[k]]++;
  }
  return n;
});
for (const k of ['agrees', 'within', 'explained', 'unexplained']) {
  const want = frames[k] + bench[k];
  if (coloured[k] !== want) fail(`the tables colour ${coloured[k]} cells ${k}, the frames have ${want}`);
}
if (coloured.mismatch) fail(`${coloured.mismatch} verdict cells are coloured as another verdict than their word`);

// Layout: the summary, the papers' experiments, one's own, the audits, then the list of differences; nothing wider than the
// column; verdict cells inside what their scroll box shows; figures open at full size.
const layout = await page.evaluate(() => {
  const main = document.querySelector('main');
  const box = main.getBoundingClientRect();
  const right = box.right - parseFloat(getComputedStyle(main).paddingRight);
  const out = { problems: [] };
  const secs = [...document.querySelectorAll('main > section')].map((s) => s.id || s.className);
  const diff = secs.indexOf('differences');
  const lastExp = secs.lastIndexOf('experiment');
  if (secs[0] !== 'summary' || diff < lastExp) out.problems.push(`sections in order ${secs[0]} … ${secs.slice(-2).join(', ')}: the list of differences must come after the experiments`);
  // The papers' experiments first, then one's own (audits, examples), then the audits table.
  const papers = [...document.querySelectorAll('main > section.experiment')].map((s) => s.dataset.paper !== '');
  if (papers.indexOf(false) !== -1 && papers.lastIndexOf(true) > papers.indexOf(false)) out.problems.push('an experiment of one\'s own comes before a paper\'s experiment');
  const audits = secs.indexOf('audits');
  if (audits !== -1 && audits < lastExp) out.problems.push('the audits table comes before the experiments');
  for (const w of document.querySelectorAll('.table-wrap')) {
    const r = w.getBoundingClientRect();
    if (r.width > 0 && r.right > right + 1) out.problems.push(`a table box in ${w.closest('section')?.id} reaches x = ${Math.round(r.right)}, beyond the column (${Math.round(right)})`);
    if (w.closest('details:not([open])')) continue;
    for (const td of w.querySelectorAll('td.v-agree, td.v-within, td.v-explained, td.v-unexplained')) {
      const c = td.getBoundingClientRect();
      if (c.right > r.right + 1) { out.problems.push(`verdict cells of a table in ${w.closest('section')?.id} are hidden beyond its scroll box`); break; }
    }
  }
  for (const img of document.querySelectorAll('figure img')) {
    const a = img.closest('a');
    if (!a || a.getAttribute('href') !== img.getAttribute('src')) out.problems.push(`figure ${img.getAttribute('src')} does not link to itself at full size`);
  }
  return out;
});
for (const p of layout.problems) fail(p);

// A long table folds its later rows: hidden until its label is clicked, shown after, every
// row still in the page (the counts above read them all).
for (const input of await page.$$('input.more-rows')) {
  const id = await input.getAttribute('id');
  const hidden = () => input.evaluate((i) => {
    const more = i.nextElementSibling?.nextElementSibling?.querySelector('tbody.more');
    return more ? [...more.rows].filter((r) => r.getBoundingClientRect().height === 0).length : -1;
  });
  const before = await hidden();
  if (before <= 0) { fail(`folded table ${id}: no folded rows hidden before unfolding (${before})`); continue; }
  await page.click(`label[for="${id}"]`);
  const after = await hidden();
  if (after !== 0) fail(`folded table ${id}: ${after} of ${before} rows still hidden after unfolding`);
  await page.click(`label[for="${id}"]`);
}

await page.screenshot({ path: screenshot });
await page.screenshot({ path: screenshot.replace(/\.png$/, '-full.png'), fullPage: true });
const auditSection = await page.$('#audits');
if (auditSection) await auditSection.screenshot({ path: screenshot.replace(/\.png$/, '-audits.png') });
await browser.close();

console.log(`report: ${sections.length} sections (${expected.size} expected), ${images.length} figures loaded, ` +
  `${summary.compared} printed numbers compared: ${summary.agree} agree, ${summary.differ} differ ` +
  `(${summary.explained} explained, ${summary.unexplained} unexplained; frames: ` +
  `${frames.compared}/${frames.agree}/${frames.differ}/${frames.explained}/${frames.unexplained}); ` +
  `${bench.compared} benchmark verdicts (${bench.agree} agree); ` +
  `${summary.findings} findings (manifests: ${findings.compared}); ${audits.length} audit rows ` +
  `(frames: ${auditRows.length}, ${audits.filter((a) => a.endsWith('|true')).length} flagged); screenshot ${screenshot}`);
if (failures.length) {
  for (const f of failures) console.error(`FAIL: ${f}`);
  process.exit(1);
}
