// The build's linking step (no componentize run: that takes a minute of CPU).

import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { disabledFeatures, entrySource, link } from '../tools/componentize.mjs';

const repo = resolve(fileURLToPath(import.meta.url), '../../../..');
const lexerPath = join(process.env.SPINDLE_JS_TOOLCHAIN ?? join(repo, 'target/toolchains/js'), 'node_modules/es-module-lexer/dist/lexer.js');
const noLexer = existsSync(lexerPath) ? false : `es-module-lexer not installed at ${lexerPath}`;

test('fetch-event is always off; http unless asked', () => {
  assert.deepEqual(disabledFeatures({ features: 'default', http: true }), ['fetch-event']);
  assert.deepEqual(disabledFeatures({ features: 'default', http: false }), ['fetch-event', 'http']);
  assert.deepEqual(disabledFeatures({ features: 'all', http: true }), []);
});

test('the entry binds the WIT imports and exports the kind', () => {
  const entry = entrySource('src/greet.js');
  assert.match(entry, /from 'spindle:job\/host@0\.2\.0'/);
  assert.match(entry, /from '\.\/kind\/src\/greet\.js'/);
  assert.match(entry, /export const kind = /);
});

test('imports of the SDK are pointed at the staged copy; packages and node: are refused', { skip: noLexer }, async () => {
  const lexer = await import(pathToFileURL(lexerPath).href);
  await lexer.init;
  const staging = await mkdtemp(join(tmpdir(), 'spindle-link-test-'));
  try {
    await mkdir(join(staging, 'kind/lib'), { recursive: true });
    const source = "import { defineKind } from '@spindle/guest';\nimport { x } from './lib/x.js';\nconst later = import('@spindle/guest');\n";
    await writeFile(join(staging, 'kind/lib/deep.js'), source);
    await link(join(staging, 'kind'), join(staging, 'spindle-guest'), lexer);
    const linked = await readFile(join(staging, 'kind/lib/deep.js'), 'utf8');
    assert.equal(linked, "import { defineKind } from '../../spindle-guest/index.js';\nimport { x } from './lib/x.js';\nconst later = import(\"../../spindle-guest/index.js\");\n");
    for (const [specifier, message] of [['node:fs', /does not exist inside a component/], ['lodash', /bundle it/], ['@spindle/guest/testing', /does not exist/]]) {
      await writeFile(join(staging, 'kind/lib/deep.js'), `import '${specifier}';\n`);
      await assert.rejects(link(join(staging, 'kind'), join(staging, 'spindle-guest'), lexer), message);
    }
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
});
